"""Adapters over tiny diffusers pipelines: forward, LoRA (reference = adapter off), save/load from disk."""

import pytest
import torch

from diffusion_rl.adapters import LoraSettings, ModelConfig, build_adapter, cond_select, load_pipeline

KINDS = [("sd3", dict(height=16, width=16)), ("flux", dict(height=32, width=32)),
         ("wan", dict(height=16, width=16, num_frames=5))]


@pytest.mark.parametrize("kind,kw", KINDS)
def test_forward_lora_save_load(kind, kw, tmp_path):
    cfg = ModelConfig(kind=kind, lora=LoraSettings(rank=4, alpha=8), **kw)
    a = build_adapter(cfg)
    cond = a.encode_prompts(["a red circle", "a blue square"])
    assert len(a._cache) == 2 and torch.equal(a.encode_prompts(["a blue square"])["prompt_embeds"][0],
                                              cond["prompt_embeds"][1])
    x = torch.randn(2, *a.latent_shape)
    s = torch.tensor([0.3, 0.9])
    v = a.velocity(x, s, cond)
    assert v.shape == x.shape and v.dtype == torch.float32 and torch.isfinite(v).all()
    with a.reference():
        v_ref = a.velocity(x, s, cond)
    assert torch.equal(v, v_ref)  # B = 0 at init: policy == reference exactly
    params = a.trainable_parameters()
    assert params and all("lora" in n for n, p in a.transformer.named_parameters() if p.requires_grad)
    v.pow(2).mean().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in params)
    with torch.no_grad():
        for p in params:
            p.add_(0.05 * torch.randn_like(p))
    v2 = a.velocity(x, s, cond)
    with a.reference():
        assert torch.equal(a.velocity(x, s, cond), v_ref)  # reference unaffected by LoRA training
    assert not torch.allclose(v2, v_ref)
    img = a.decode(x)
    if kind == "wan":
        assert img.shape == (2, kw["num_frames"], 3, kw["height"], kw["width"])
    else:
        assert img.shape == (2, 3, kw["height"], kw["width"])
    assert img.min() >= 0 and img.max() <= 1
    # a tiny pipeline saved to disk and loaded through from_pretrained (the real loading path) is the same model
    load_pipeline(ModelConfig(kind=kind, **kw)).save_pretrained(tmp_path / kind)
    b = build_adapter(ModelConfig(kind=kind, path=str(tmp_path / kind), lora=LoraSettings(rank=4, alpha=8), **kw))
    assert torch.allclose(b.velocity(x, s, b.encode_prompts(["a red circle", "a blue square"])), v_ref, atol=1e-5)


def test_bf16_and_gradient_checkpointing():
    a = build_adapter(ModelConfig(kind="sd3", height=16, width=16, dtype="bf16", gradient_checkpointing=True))
    cond = a.encode_prompts(["a red circle"])
    assert cond["prompt_embeds"].dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in a.trainable_parameters())  # LoRA trains in fp32
    a.train(True)
    v = a.velocity(torch.randn(1, *a.latent_shape), torch.tensor([0.5]), cond)
    assert v.dtype == torch.float32
    v.mean().backward()


def test_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="match no module"):
        build_adapter(ModelConfig(kind="sd3", height=16, width=16, lora=LoraSettings(targets=["not_a_layer"])))
    with pytest.raises(FileNotFoundError, match="no diffusers pipeline"):
        load_pipeline(ModelConfig(kind="sd3", path=str(tmp_path / "missing")))
    with pytest.raises(ValueError, match="unknown model kind"):
        load_pipeline(ModelConfig(kind="sdxl"))  # type: ignore[arg-type]


def test_cond_select():
    c = {"a": torch.arange(6).view(3, 2)}
    assert cond_select(c, [2, 0])["a"].tolist() == [[4, 5], [0, 1]]
