"""Rollout copy: skip rules, QuantLinear, LoRA merge, in-place refresh after an update, backends and strict mode."""

import copy
import warnings

import pytest
import torch
from torch import nn

from diffusion_rl.quant import (
    QuantBackendError,
    QuantConfig,
    QuantLinear,
    SkipRules,
    backends,
    effective_linear_weight,
    make_rollout_copy,
    refresh_rollout_copy,
    resolve_backend,
)
from grpo.config import ConfigError, build_config

from .conftest import sd3_inputs, tiny_sd3


def _out(model, dtype=torch.float32, **kw):
    with torch.no_grad():
        return model(**sd3_inputs(dtype=dtype, **kw)).sample.float()


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def test_skip_rules_default_on_sd3(sd3):
    q = make_rollout_copy(sd3, QuantConfig(format="nvfp4"))
    rep = q.rollout_quant_report
    quantized = {n for n, r in rep.items() if not r.startswith("skipped")}
    assert "transformer_blocks.0.attn.to_q" in quantized and "transformer_blocks.1.ff.net.2" in quantized
    for n in ("context_embedder", "time_text_embed.timestep_embedder.linear_1", "transformer_blocks.0.norm1.linear",
              "norm_out.linear", "proj_out"):
        assert rep[n].startswith("skipped"), (n, rep[n])
        assert type(q.get_submodule(n)) is nn.Linear
    for n in quantized:
        assert isinstance(q.get_submodule(n), QuantLinear)
    assert not any(p.requires_grad for p in q.parameters()) and not q.training


def test_skip_rules_configurable():
    rules = SkipRules(min_in_features=64)
    assert "min_in_features" in rules.reason("blocks.0.attn.to_q", 32, "nvfp4")
    assert rules.reason("blocks.0.attn.to_q", 64, "nvfp4") is None
    assert "multiple of 16" in rules.reason("blocks.0.attn.to_q", 72, "fp8")
    assert SkipRules(require_divisible=False).reason("x.to_q", 72, "fp8") is None
    assert "multiple of the NVFP4 block" in SkipRules(require_divisible=False).reason("x.to_q", 72, "nvfp4")
    assert SkipRules(force_patterns=(r"norm1\.linear$",)).reason("blocks.0.norm1.linear", 32, "nvfp4") is None
    assert SkipRules(extra_patterns=("to_k",)).reason("blocks.0.attn.to_k", 32, "fp8") == "name matches 'to_k'"
    # FLUX's per-block proj_out is quantized, only the final top-level one is skipped
    assert SkipRules().reason("single_transformer_blocks.0.proj_out", 64, "nvfp4") is None
    with pytest.raises(ValueError, match="not a valid regular expression"):
        SkipRules(patterns=("(",))
    m = nn.Sequential(nn.Linear(24, 32), nn.GELU(), nn.Linear(32, 16))
    q = make_rollout_copy(m, QuantConfig(format="fp8", dtype="fp32"))
    assert type(q[0]) is nn.Linear and isinstance(q[2], QuantLinear)


def test_bad_config_values_are_named():
    for key, bad in [("format", "fp4"), ("backend", "cuda"), ("fp8_granularity", "block"), ("dtype", "fp64")]:
        with pytest.raises(ConfigError, match=rf"'quant.{key}' expects one of .*got '{bad}'"):
            build_config(QuantConfig, {key: bad}, "quant")


@pytest.mark.parametrize("fmt,tol", [("bf16", 0.03), ("fp8", 0.05), ("nvfp4", 0.25)])
def test_copy_tracks_model_and_leaves_it_untouched(sd3, fmt, tol):
    before = {k: v.clone() for k, v in sd3.state_dict().items()}
    q = make_rollout_copy(sd3, QuantConfig(format=fmt))
    assert all(torch.equal(v, sd3.state_dict()[k]) for k, v in before.items())
    y, yq = _out(sd3), _out(q, torch.bfloat16)
    assert bool(torch.isfinite(yq).all()) and _rel(yq, y) < tol


def test_quant_buffers_survive_dtype_casts(sd3):
    q = make_rollout_copy(sd3, QuantConfig(format="nvfp4", dtype="fp32"))
    y = _out(q)
    q.to(torch.bfloat16)
    lin = q.get_submodule("transformer_blocks.0.attn.to_q")
    assert lin.codes.dtype == torch.uint8 and lin.block_scale.dtype == torch.float8_e4m3fn
    assert lin.tensor_scale.dtype == torch.float32 and lin.weight.dtype == torch.bfloat16
    q.to(torch.float32)
    assert torch.allclose(_out(q), y, atol=0.05)
    sd = q.state_dict()
    assert "transformer_blocks.0.attn.to_q.codes" in sd and "transformer_blocks.0.attn.to_q.weight_dequant" not in sd


def _add_lora(model, seed=0):
    from peft import LoraConfig

    model.add_adapter(LoraConfig(r=4, lora_alpha=8, init_lora_weights=True,
                                 target_modules=["to_q", "to_v", "ff.net.2"]))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return [p for p in model.parameters() if p.requires_grad]


def test_lora_is_merged_without_touching_the_trained_model(sd3):
    params = _add_lora(sd3)
    assert params
    q = make_rollout_copy(sd3, QuantConfig(format="bf16", dtype="fp32"))
    assert torch.allclose(_out(q), _out(sd3), atol=1e-5)
    assert sd3.get_submodule("transformer_blocks.0.attn.to_q").merged is False  # nothing merged into the source
    merged = copy.deepcopy(sd3)
    for m in merged.modules():
        if hasattr(m, "merge") and hasattr(m, "lora_A"):
            m.merge()  # peft's own merge, on a copy
    w, _ = effective_linear_weight(sd3.get_submodule("transformer_blocks.1.attn.to_v"))
    assert torch.allclose(w, merged.get_submodule("transformer_blocks.1.attn.to_v").get_base_layer().weight, atol=1e-6)
    assert torch.equal(q.get_submodule("transformer_blocks.1.attn.to_v").weight, w)
    # disabled adapters = the reference policy: the copy of a disabled model is the base model
    sd3.disable_adapters()
    w0, _ = effective_linear_weight(sd3.get_submodule("transformer_blocks.1.attn.to_v"))
    assert torch.equal(w0, sd3.get_submodule("transformer_blocks.1.attn.to_v").get_base_layer().weight)
    sd3.enable_adapters()


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8", "bf16"])
def test_refresh_follows_an_optimizer_step_in_place(sd3, fmt):
    params = _add_lora(sd3)
    cfg = QuantConfig(format=fmt)
    q = make_rollout_copy(sd3, cfg)
    y_before, ref_before = _out(q, torch.bfloat16), _out(sd3)
    mods = {n: id(m) for n, m in q.named_modules()}
    ptrs = {n: t.data_ptr() for n, t in q.named_buffers()} | {n: p.data_ptr() for n, p in q.named_parameters()}
    opt = torch.optim.SGD(params, lr=20.0)
    loss = sd3(**sd3_inputs()).sample.pow(2).mean()
    loss.backward()
    opt.step()
    assert torch.equal(_out(q, torch.bfloat16), y_before)  # stale until refreshed
    n = refresh_rollout_copy(q, sd3)
    assert n > 0
    y_after = _out(q, torch.bfloat16)
    assert not torch.equal(y_after, y_before)
    fresh = make_rollout_copy(sd3, cfg)
    assert torch.equal(y_after, _out(fresh, torch.bfloat16))  # == a copy made from scratch
    assert {n: id(m) for n, m in q.named_modules()} == mods  # no module re-allocated
    assert ({n: t.data_ptr() for n, t in q.named_buffers()}
            | {n: p.data_ptr() for n, p in q.named_parameters()}) == ptrs
    # the copy moves *with* the trained model: its change is aligned with the trained model's change
    d_true, d_q = (_out(sd3) - ref_before).flatten(), (y_after - y_before).flatten()
    assert float(torch.nn.functional.cosine_similarity(d_true, d_q, dim=0)) > 0.8


def test_full_refresh_copies_frozen_weights_too(sd3):
    sd3.requires_grad_(False)
    q = make_rollout_copy(sd3, QuantConfig(format="fp8"))
    with torch.no_grad():
        sd3.get_submodule("transformer_blocks.0.attn.to_q").weight.mul_(2)
        sd3.get_submodule("norm_out.linear").bias.add_(1)
    assert refresh_rollout_copy(q, sd3) == 0  # nothing trainable changed
    y = _out(q, torch.bfloat16)
    assert refresh_rollout_copy(q, sd3, full=True) > 0
    assert not torch.equal(_out(q, torch.bfloat16), y)
    with pytest.raises(ValueError, match="make_rollout_copy"):
        refresh_rollout_copy(tiny_sd3(), sd3)


def test_real_backend_falls_back_with_one_warning_or_raises_when_strict(sd3):
    backends._WARNED.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        q1 = make_rollout_copy(sd3, QuantConfig(format="nvfp4", backend="real"))
        make_rollout_copy(sd3, QuantConfig(format="nvfp4", backend="real"))
    msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning) and "quant.backend" in str(x.message)]
    assert len(msgs) == 1 and "not a CUDA GPU" in msgs[0] and "emulated" in msgs[0]
    assert q1.rollout_quant_backend == "emulated"
    with pytest.raises(QuantBackendError, match="strict"):
        make_rollout_copy(sd3, QuantConfig(format="fp8", backend="real", strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # auto never warns
        assert resolve_backend(QuantConfig(format="nvfp4", backend="auto"), "cpu") == "emulated"


def test_real_availability_rules(monkeypatch):
    monkeypatch.setattr(backends, "device_capability", lambda d: (9, 0))
    assert backends.real_available("fp8", "cuda")[0]
    ok, why = backends.real_available("nvfp4", "cuda")
    assert not ok and "(10, 0)" in why
    assert resolve_backend(QuantConfig(format="fp8", backend="auto"), "cuda") == "real"
    # real FP8 GEMMs need FP8 activations: weight-only FP8 is emulated
    assert resolve_backend(QuantConfig(format="fp8", backend="auto", quantize_activations=False), "cuda") == "emulated"
    monkeypatch.setattr(backends, "device_capability", lambda d: (10, 0))
    monkeypatch.setattr(backends, "torchao_nvfp4_config", lambda: None)
    ok, why = backends.real_available("nvfp4", "cuda")
    assert not ok and "torchao" in why


def test_quant_linear_errors():
    cfg = QuantConfig(format="nvfp4", dtype="fp32")
    with pytest.raises(ValueError, match="in_features % 16"):
        QuantLinear(24, 8, True, cfg)
    lin = QuantLinear.from_weight(torch.randn(8, 32), torch.zeros(8), cfg)
    with pytest.raises(ValueError, match=r"weight shape \(4, 32\)"):
        lin.set_weight(torch.randn(4, 32))
    with pytest.raises(ValueError, match=r"inputs \[\.\.\., 32\]"):
        lin(torch.randn(2, 16))
    assert "W4A4" in repr(lin)
