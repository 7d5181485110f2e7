"""model.path as users have it: a hub-snapshot-like diffusers directory, or a single .safetensors transformer plus
model.components; missing parts are one error naming them (and how to drop T5 for SD3)."""

import shutil

import pytest
import torch
from safetensors.torch import save_file

from diffusion_rl.adapters import ADAPTERS, LoraSettings, ModelConfig, build_adapter
from diffusion_rl.cli import main
from diffusion_rl.tiny_models import TINY_BUILDERS

SIZES = {"sd3": dict(height=32, width=32), "flux": dict(height=32, width=32),
         "wan": dict(height=32, width=32, num_frames=5)}


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

    with pytest.raises(FileNotFoundError,
                       match=r"single-file checkpoint holding the transformer only.*model\.components"):
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


# diffusers WanTransformer3DModel names -> the original Wan2.1 release's names (Wan-AI's wan/modules/model.py), which
# is how ComfyUI-style single files (e.g. wan2.1_t2v_1.3B_bf16.safetensors) store the transformer
_WAN_ORIGINAL = [("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
                 ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
                 ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
                 ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
                 ("condition_embedder.time_proj", "time_projection.1"), ("attn1", "self_attn"), ("attn2", "cross_attn"),
                 (".to_out.0.", ".o."), (".to_q.", ".q."), (".to_k.", ".k."), (".to_v.", ".v."),
                 ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2"), (".norm2.", ".norm3."),
                 ("proj_out", "head.head")]


def _to_original_wan(sd):
    out = {}
    for k, v in sd.items():
        n = k
        for a, b in _WAN_ORIGINAL:
            n = n.replace(a, b)
        if n == "scale_shift_table":
            n = "head.modulation"
        n = n.replace(".scale_shift_table", ".modulation")
        out["model.diffusion_model." + n] = v.contiguous()
    return out


def test_single_file_in_the_original_wan_layout(tmp_path):
    """A transformer file in the original release's key layout is converted by from_single_file (diffusers' own
    converter) and gives the same velocity as the diffusers model."""
    pipe, snap = _snapshot(tmp_path, "wan")
    want = _velocity(ADAPTERS["wan"](pipe, _cfg("wan")))
    single = tmp_path / "wan2.1_t2v_tiny_bf16.safetensors"
    orig = _to_original_wan(pipe.transformer.state_dict())
    assert not any(k.startswith("model.diffusion_model.blocks.0.attn1") for k in orig)  # really the other layout
    save_file(orig, str(single))
    ad = build_adapter(_cfg("wan", path=str(single), components=str(snap)))
    torch.testing.assert_close(_velocity(ad), want, atol=1e-6, rtol=0)


def _components_with(tmp_path, pipe, transformer):
    """A components directory as a user keeps one next to a single-file checkpoint: the tiny pipeline saved, its
    transformer folder holding only the config of ``transformer`` (no weights)."""
    comp = tmp_path / "components"
    pipe.save_pretrained(str(comp))
    for f in (comp / "transformer").glob("*.safetensors"):
        f.unlink()
    transformer.save_config(str(comp / "transformer"))
    return comp


def test_single_file_in_the_original_sd3_layout(tmp_path):
    """An SD3.5-Medium-style MMDiT-X (qk RMS norm, a dual-attention block) stored as Stability AI's single files store
    it (model.diffusion_model.joint_blocks.N.x_block.attn.qkv, ..., final_layer) loads through model.path +
    model.components and gives the diffusers model's velocity. diffusers infers nothing here: the transformer config
    comes from model.components/transformer/config.json (from_single_file(config=..., subfolder="transformer"))."""
    from diffusers import SD3Transformer2DModel

    from .original_layouts import sd3_to_original

    pipe = TINY_BUILDERS["sd3"](max_length=16)
    torch.manual_seed(1)
    # 2 blocks: MMDiT-X (attn2) then MMDiT; the last block is context-pre-only
    pipe.transformer = SD3Transformer2DModel(
        sample_size=16, patch_size=2, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=64, caption_projection_dim=32, pooled_projection_dim=64,
        pos_embed_max_size=16, qk_norm="rms_norm", dual_attention_layers=(0,)).eval()
    want = _velocity(ADAPTERS["sd3"](pipe, _cfg("sd3")))
    orig = sd3_to_original(pipe.transformer.state_dict())
    assert "model.diffusion_model.joint_blocks.0.x_block.attn2.qkv.weight" in orig
    assert not any(".to_q." in k for k in orig)  # really the other layout
    single = tmp_path / "sd3.5_medium_tiny.safetensors"
    save_file(orig, str(single))
    comp = _components_with(tmp_path, pipe, pipe.transformer)
    ad = build_adapter(_cfg("sd3", path=str(single), components=str(comp)))
    torch.testing.assert_close(_velocity(ad), want, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_single_file_in_the_original_flux_layout(tmp_path):
    """A FLUX transformer stored as Black Forest Labs' files store it (double_blocks / single_blocks with the fused
    linear1 = [q; k; v; mlp_in], final_layer) loads through model.path + model.components. diffusers 0.36's FLUX
    converter splits linear1 at a hard-coded width (inner_dim 3072, MLP ratio 4) instead of reading the config, so the
    model is full width (3072 = 2 heads x 1536) and one block of each kind deep: 520 M parameters, bf16 (~1 GB)."""
    from .original_layouts import flux_to_original

    pipe = TINY_BUILDERS["flux"](max_length=16, hidden=3072)
    assert pipe.transformer.inner_dim == 3072
    pipe.transformer.to(torch.bfloat16).eval()
    ref = ADAPTERS["flux"](pipe, _cfg("flux", dtype="bf16"))
    x = torch.randn(2, *ref.latent_shape, generator=torch.Generator().manual_seed(0))
    cond = ref.encode_prompts(["a red circle", "a blue square"])  # one conditioning for both: the loaded pipeline's
    want = ref.velocity(x, torch.tensor([0.8, 0.4]), cond)        # text encoders are bf16 (torch_dtype), these fp32
    single = tmp_path / "flux1-dev-tiny.safetensors"
    save_file(flux_to_original(pipe.transformer.state_dict()), str(single))
    # the same text encoders and VAE, saved around a small stand-in transformer (its config is then replaced)
    light = type(pipe)(**{**pipe.components, "transformer": TINY_BUILDERS["flux"](max_length=16).transformer})
    comp = _components_with(tmp_path, light, pipe.transformer)
    ad = build_adapter(_cfg("flux", path=str(single), components=str(comp), dtype="bf16"))
    torch.testing.assert_close(ad.velocity(x, torch.tensor([0.8, 0.4]), cond), want, atol=0, rtol=0)
