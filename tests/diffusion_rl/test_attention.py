"""model.attention: SDPA is the default and what runs; diffusers' dispatch switches FLUX / Wan to another kernel
(checked with one that exists on CPU, SDPA's math kernel); xformers / flash are refused with one line where not
installed, on CPU, and (flash) for SD3's joint processor."""

import pytest
import torch

from diffusion_rl import attention
from diffusion_rl.adapters import LoraSettings, ModelConfig, build_adapter
from diffusion_rl.cli import main


@pytest.mark.parametrize("kind", ["sd3", "flux", "wan"])
def test_sdpa_default_runs(kind):
    cfg = ModelConfig(kind=kind, lora=LoraSettings(rank=2, alpha=2), num_frames=5)
    assert cfg.attention == "sdpa"
    ad = build_adapter(cfg)
    assert ad.attention == "torch scaled_dot_product_attention"
    assert attention.attention_backends(ad.transformer) == {"sdpa"}
    x = torch.randn(1, *ad.latent_shape)
    assert torch.isfinite(ad.velocity(x, torch.tensor([0.5]), ad.encode_prompts(["a cat"]))).all()


def test_sdpa_on_cuda_switches_cudnn_attention_off():
    """On a CUDA model, SDPA runs without cuDNN's attention kernel (its backward failed on FLUX.1-dev's training
    shapes on an H100); on the CPU the switch is left as it is. The switch itself needs no GPU."""
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        assert attention.set_attention(None, "sdpa", "sd3", torch.device("cpu")) == "torch scaled_dot_product_attention"
        assert torch.backends.cuda.cudnn_sdp_enabled()
        desc = attention.set_attention(None, "sdpa", "flux", torch.device("cuda"))
        assert "cuDNN's kernel off" in desc and not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.mark.parametrize("kind", ["flux", "wan"])
def test_a_dispatch_backend_that_exists_is_selected(kind):
    """FLUX and Wan switch kernels through diffusers' attention dispatch (``set_attention_backend``, the call
    ``set_attention`` makes for xformers / flash). Selected here with a backend that exists on CPU, SDPA's math kernel
    (``_native_math``): every processor reports it (``attention_backends``) and the velocity equals the default
    SDPA's within float rounding."""
    cfg = ModelConfig(kind=kind, lora=LoraSettings(rank=2, alpha=2), num_frames=5)
    ad = build_adapter(cfg)
    x = torch.randn(1, *ad.latent_shape, generator=torch.Generator().manual_seed(0))
    cond = ad.encode_prompts(["a cat"])
    with torch.no_grad():
        v_sdpa = ad.velocity(x, torch.tensor([0.5]), cond)
        ad.transformer.set_attention_backend("_native_math")
        assert attention.attention_backends(ad.transformer) == {"_native_math"}
        v_math = ad.velocity(x, torch.tensor([0.5]), cond)
    assert torch.allclose(v_math, v_sdpa, atol=1e-5, rtol=0) and not torch.equal(v_math, torch.zeros_like(v_math))


def test_refusals(monkeypatch, tmp_path, capsys):
    """Each refusal runs whatever is installed here: a package reported missing, then reported present (on a CPU)."""
    cpu = torch.device("cpu")
    monkeypatch.setattr(attention, "installed", lambda module: False)
    for name, pkg in (("xformers", "xformers"), ("flash", "flash_attn")):
        with pytest.raises(ValueError, match=f"the {pkg} package is not installed.*model.attention=sdpa"):
            attention.check_attention(name, "flux", cpu)
    with pytest.raises(ValueError, match="SD3's joint-attention processor has no flash-attn dispatch"):
        attention.check_attention("flash", "sd3", cpu)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'run'}\nmodel: {{kind: flux, attention: xformers, device: cpu}}\n")
    assert main(["train", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "xformers package is not installed" in err[0]
    monkeypatch.setattr(attention, "installed", lambda module: True)  # installed, but this is a CPU
    for name, kind in (("xformers", "wan"), ("flash", "flux")):
        with pytest.raises(ValueError, match=f"model.attention={name} runs on CUDA only"):
            attention.check_attention(name, kind, cpu)
    assert main(["train", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.attention=xformers runs on CUDA only" in err[0]
    with pytest.raises(ValueError, match="expected one of"):
        attention.check_attention("eager", "wan", cpu)
    monkeypatch.undo()
    cfg.write_text(f"output_dir: {tmp_path / 'run'}\nmodel: {{kind: flux, attention: cudnn}}\n")
    assert main(["train", str(cfg), "--dry-run"]) == 2
    assert "cudnn" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
