"""model.attention: SDPA is the default and what runs; xformers / flash are refused with one line where not
installed (this CPU machine has neither), on CPU, and (flash) for SD3's joint processor."""

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


def test_refusals(monkeypatch, tmp_path, capsys):
    cpu = torch.device("cpu")
    for name, pkg in (("xformers", "xformers"), ("flash", "flash_attn")):
        if not attention.installed(pkg):
            with pytest.raises(ValueError, match=f"the {pkg} package is not installed.*model.attention=sdpa"):
                attention.check_attention(name, "flux", cpu)
    with pytest.raises(ValueError, match="SD3's joint-attention processor has no flash-attn dispatch"):
        attention.check_attention("flash", "sd3", cpu)
    monkeypatch.setattr(attention, "installed", lambda module: True)  # installed, but this is a CPU
    with pytest.raises(ValueError, match="model.attention=xformers runs on CUDA only"):
        attention.check_attention("xformers", "wan", cpu)
    with pytest.raises(ValueError, match="expected one of"):
        attention.check_attention("eager", "wan", cpu)
    monkeypatch.undo()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'run'}\nmodel: {{kind: flux, attention: xformers, device: cpu}}\n")
    if not attention.installed("xformers"):
        assert main(["train", str(cfg), "--dry-run"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "xformers package is not installed" in err[0]
    cfg.write_text(f"output_dir: {tmp_path / 'run'}\nmodel: {{kind: flux, attention: cudnn}}\n")
    assert main(["train", str(cfg), "--dry-run"]) == 2
    assert "cudnn" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
