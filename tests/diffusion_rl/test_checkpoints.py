"""model.path as users have it: a hub-snapshot-like diffusers directory, or a single .safetensors transformer plus
model.components; missing parts are one error naming them (and how to drop T5 for SD3)."""

import shutil

import pytest
import torch
from safetensors.torch import save_file

from diffusion_rl.adapters import ADAPTERS, LoraSettings, ModelConfig, build_adapter
from diffusion_rl.cli import main
from diffusion_rl.tiny_models import TINY_BUILDERS

SIZES = {"sd3": dict(height=32, width=32), "flux": dict(height=32, width=32), "wan": dict(height=32, width=32, num_frames=5)}


def _snapshot(tmp_path, kind):
    """A tiny pipeline saved the way a hub download sits on disk, and the in-memory original."""
    pipe = TINY_BUILDERS[kind](max_length=16)
    snap = tmp_path / f"models--org--{kind}" / "snapshots" / "0123abcd"
    pipe.save_pretrained(str(snap))
    for m in pipe.components.values():
        if isinstance(m, torch.nn.Module):
            m.eval()
    return pipe, snap


def _velocity(adapter, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, *adapter.latent_shape, generator=g)
    return adapter.velocity(x, torch.tensor([0.8, 0.4]), adapter.encode_prompts(["a red circle", "a blue square"]))


def _cfg(kind, **kw):
    return ModelConfig(kind=kind, lora=LoraSettings(enabled=False), **SIZES[kind], **kw)


@pytest.mark.parametrize("kind", ["sd3", "flux", "wan"])
def test_directory_and_single_file_load_the_same_model(tmp_path, kind):
    pipe, snap = _snapshot(tmp_path, kind)
    want = _velocity(ADAPTERS[kind](pipe, _cfg(kind)))
    torch.testing.assert_close(_velocity(build_adapter(_cfg(kind, path=str(snap)))), want, atol=1e-6, rtol=0)

    # a single transformer file (e.g. downloaded alone) and a components directory without transformer weights
    single = tmp_path / f"{kind}_transformer.safetensors"
    save_file({k: v.contiguous() for k, v in pipe.transformer.state_dict().items()}, str(single))
    comp = tmp_path / "components"
    shutil.copytree(snap, comp)
    for f in (comp / "transformer").glob("*.safetensors"):
        f.unlink()
    ad = build_adapter(_cfg(kind, path=str(single), components=str(comp)))
    torch.testing.assert_close(_velocity(ad), want, atol=1e-6, rtol=0)

    with pytest.raises(FileNotFoundError, match=r"single-file checkpoint holding the transformer only.*model\.components"):
        build_adapter(_cfg(kind, path=str(single)))


def test_missing_parts_are_named_and_t5_can_be_dropped(tmp_path, capsys):
    pipe, snap = _snapshot(tmp_path, "sd3")
    shutil.rmtree(snap / "text_encoder_3")  # a user who skipped the 9.5 GB T5 download
    with pytest.raises(FileNotFoundError, match=r"text_encoder_3 \(T5EncoderModel\): no text_encoder_3/ folder.*"
                                                r"model\.drop_t5=true"):
        build_adapter(_cfg("sd3", path=str(snap)))
    ad = build_adapter(_cfg("sd3", path=str(snap), drop_t5=True))
    assert ad.pipe.text_encoder_3 is None
    emb = ad.encode_prompts(["a red circle"])["prompt_embeds"]
    assert emb.shape[1] == 16 + 16 and emb[:, 16:].abs().max() == 0  # CLIP tokens, then zeros where T5's would be
    assert torch.isfinite(_velocity(ad)).all()

    for f in (snap / "vae").glob("*.safetensors"):
        f.unlink()
    with pytest.raises(FileNotFoundError, match=r"vae \(AutoencoderKL\): vae/ holds no weights"):
        build_adapter(_cfg("sd3", path=str(snap), drop_t5=True))
    with pytest.raises(ValueError, match="drop_t5=true is for SD3"):
        build_adapter(_cfg("flux", path=str(snap), drop_t5=True))

    # through the CLI: one line, exit code 2
    single = tmp_path / "sd3.5_medium.safetensors"
    save_file({k: v.contiguous() for k, v in pipe.transformer.state_dict().items()}, str(single))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'run'}\nmodel: {{kind: sd3, path: {single}}}\n")
    capsys.readouterr()
    assert main(["train", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "T5-XXL (text_encoder_3)" in err[0] and "drop_t5" in err[0]
    assert not (tmp_path / "run").exists()
