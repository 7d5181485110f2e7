"""Qwen-Image, Wan 2.2 (two experts split at boundary_ratio, and the 5B single-expert layout) and FLUX.1 Kontext
(editing: reference latents appended to the sequence): tiny random pipelines built in code run the trainer's
sampler and one training step; the exported LoRA loads in the stock diffusers pipeline (QwenImagePipeline,
WanPipeline with transformer_2, FluxKontextPipeline) and gives the same images as the trainer's own sampler;
the export starts a run again (model.lora_init)."""

import json
import types

import numpy as np
import pytest
import torch
from PIL import Image

from diffusion_rl.adapters import LoraSettings, ModelConfig, build_adapter
from diffusion_rl.cli import main
from diffusion_rl.prompts import PromptConfig
from diffusion_rl.sampling import ode_sample
from diffusion_rl.tiny_models import TINY_BUILDERS
from diffusion_rl.trainer import DiffusionGRPOTrainer, DiffusionRLConfig
from grpo.device import randn
from grpo.flow_sde import flow_sigmas

from ..torchrun_util import torchrun

SIZES = {"qwenimage": dict(height=32, width=32), "wan22": dict(height=32, width=32, num_frames=5),
         "flux_kontext": dict(height=32, width=32)}
STEPS = 4  # sigmas 1, .75, .5, .25: Wan 2.2's high-noise expert takes t=1000 (>= 875), the low-noise one the rest


def redness(batch):
    """Mean red minus mean green/blue of images [B, 3, H, W] or videos [B, F, 3, H, W]."""
    im = batch.images
    im = im.movedim(-3, 1) if im.dim() == 5 else im
    return types.SimpleNamespace(total=im[:, 0].flatten(1).mean(1) - im[:, 1:].flatten(1).mean(1), components={})


def _prompts(kind, tmp_path):
    if kind != "flux_kontext":
        return ["a red circle", "a blue square"]
    ref = tmp_path / "ref.png"  # the image to edit, at the output size
    Image.fromarray((np.random.RandomState(0).rand(32, 32, 3) * 255).astype("uint8")).save(ref)
    return [f"{ref} | a red circle", f"{ref} | a blue square"]


def _cfg(kind, tmp_path, **tiny):
    cfg = DiffusionRLConfig(output_dir=str(tmp_path / "run"), resume=False,
                            prompts=PromptConfig(source="list", prompts=_prompts(kind, tmp_path), num_eval=2))
    cfg.model.kind = kind
    for k, v in SIZES[kind].items():
        setattr(cfg.model, k, v)
    cfg.model.tiny = tiny
    cfg.model.lora = LoraSettings(rank=4, alpha=8)
    cfg.sampler.num_steps, cfg.sampler.eta = STEPS, 1.0
    cfg.grpo.group_size, cfg.train.prompts_per_iter, cfg.train.iterations = 2, 2, 1
    cfg.train.eval_steps, cfg.train.log_images = STEPS, False
    return cfg


@pytest.mark.parametrize("kind,tiny", [("qwenimage", {}), ("wan22", {}), ("wan22", {"two_experts": False}),
                                       ("flux_kontext", {})])
def test_sampler_and_one_training_step(tmp_path, kind, tiny):
    cfg = _cfg(kind, tmp_path, **tiny)
    cfg.train.lr = 1e-2
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness, log=False)
    before = {k: v.clone() for k, v in tr.adapter.trainable_state_dict().items()}
    s = tr.step()
    assert s["cost/backward"] > 0 and np.isfinite(s["reward/mean"])
    after = tr.adapter.trainable_state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved, "no LoRA weight moved"
    if kind == "wan22" and not tiny:  # both experts learn: each from the steps it denoises
        assert {k.split(".", 1)[0] for k in moved} == {"transformer", "transformer_2"}
        assert tr.adapter.boundary == 875.0
    if kind == "wan22" and tiny:
        assert tr.adapter.expand and tr.adapter.boundary is None


def test_wan22_routes_rows_to_their_expert(tmp_path):
    """A batch mixing noise levels gives each row the velocity of its own expert, alone."""
    ad = build_adapter(ModelConfig(kind="wan22", lora=LoraSettings(enabled=False), **SIZES["wan22"]))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, *ad.latent_shape, generator=g)
    cond = ad.encode_prompts(["a red circle", "a blue square", "a cat"])
    sig = torch.tensor([0.95, 0.5, 0.875])  # t = 950 and 875 (the boundary itself) high, 500 low
    v = ad.velocity(x, sig, cond)
    for i in range(3):
        torch.testing.assert_close(v[i:i + 1],
                                   ad.velocity(x[i:i + 1], sig[i:i + 1], {k: c[i:i + 1] for k, c in cond.items()}),
                                   atol=1e-6, rtol=0)
    hi = ad._call(ad.transformer.transformer, x[1:2], torch.tensor([500.0]), cond["prompt_embeds"][1:2]).float()
    assert not torch.allclose(hi, v[1:2])  # the low-noise expert really is another network


def _stock_images(pipe, kind, mc, x0, ad, prompt):
    """The stock pipeline's own sampling loop on the trainer's sigma schedule and initial latents, no CFG."""
    sig = flow_sigmas(STEPS, 1.0)[:-1].tolist()
    common = dict(height=mc.height, width=mc.width, num_inference_steps=STEPS, output_type="pt",
                  max_sequence_length=mc.max_sequence_length)
    b, c = x0.shape[:2]
    if kind == "qwenimage":
        from diffusers import QwenImagePipeline

        emb = ad.encode_prompts([prompt])["prompt_embeds"]
        lat = QwenImagePipeline._pack_latents(x0, b, c, *x0.shape[2:])
        return pipe(prompt_embeds=emb, prompt_embeds_mask=torch.ones(emb.shape[:2], dtype=torch.long), latents=lat,
                    sigmas=sig, **common).images
    if kind == "flux_kontext":
        from diffusers import FluxKontextPipeline

        path, text = prompt.split(" | ")
        lat = FluxKontextPipeline._pack_latents(x0, b, c, *x0.shape[2:])
        return pipe(image=Image.open(path).convert("RGB"), prompt=text, latents=lat, sigmas=sig, _auto_resize=False,
                    max_area=mc.height * mc.width, **common).images
    set_ts = pipe.scheduler.set_timesteps  # WanPipeline takes no sigmas=: hand the schedule to its scheduler
    pipe.scheduler.set_timesteps = lambda n, device=None, **kw: set_ts(device=device, sigmas=sig)
    return pipe(prompt_embeds=ad.encode_prompts([prompt])["prompt_embeds"], num_frames=mc.num_frames,
                guidance_scale=1.0,
                latents=x0, **common).frames


@pytest.mark.parametrize("kind", ["qwenimage", "wan22", "flux_kontext"])
def test_export_loads_in_stock_pipeline_with_same_images(tmp_path, kind, capsys):
    cfg = _cfg(kind, tmp_path)
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness, log=False)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a LoRA far from zero, so that the export changes the images
        for p in tr.params:
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    tr.save()
    out = tmp_path / "lora"
    assert main(["export", str(tmp_path / "run"), str(out), "--merge"]) == 0
    info = json.loads((out / "export.json").read_text())
    want_files = {"transformer", "transformer_2"} if kind == "wan22" else {"transformer"}
    assert set(info["files"]) == want_files and all((out / f).is_file() for f in info["files"].values())

    prompt = cfg.prompts.prompts[0]
    ad = tr.adapter
    ours = ad.decode(ode_sample(ad, [prompt], STEPS, torch.Generator().manual_seed(7)))
    x0 = randn((1, *ad.latent_shape), torch.Generator().manual_seed(7), "cpu")
    with ad.reference():
        base = ad.decode(ode_sample(ad, [prompt], STEPS, torch.Generator().manual_seed(7)))
    assert (ours - base).abs().max() > 1e-3  # the LoRA matters, so the equality below is not vacuous

    pipe = TINY_BUILDERS[kind](max_length=cfg.model.max_sequence_length)
    for m in pipe.components.values():
        if isinstance(m, torch.nn.Module):
            m.eval()
    for comp, f in info["files"].items():
        pipe.load_lora_weights(str(out), weight_name=f,
                               **({"load_into_transformer_2": True} if comp == "transformer_2" else {}))
    stock = _stock_images(pipe, kind, cfg.model, x0, ad, prompt)
    assert stock.shape == ours.shape
    torch.testing.assert_close(stock, ours, atol=2e-5, rtol=0)

    merged = type(pipe).from_pretrained(str(out / "merged"))  # fused weights, no adapter
    assert not any("lora" in n for n, _ in merged.transformer.named_parameters())
    torch.testing.assert_close(_stock_images(merged, kind, cfg.model, x0, ad, prompt), ours, atol=2e-4, rtol=0)

    # the export starts a run again: same velocity as the trained adapter
    mc = ModelConfig(kind=kind, lora=LoraSettings(rank=4, alpha=8), lora_init=str(out), **SIZES[kind])
    again = build_adapter(mc)
    x = torch.randn(2, *ad.latent_shape, generator=g)
    cond = ad.encode_prompts(cfg.prompts.prompts)
    sig = torch.tensor([0.9, 0.3])  # Wan 2.2: one row per expert
    torch.testing.assert_close(again.velocity(x, sig, cond), ad.velocity(x, sig, cond), atol=1e-6, rtol=0)


def test_bad_input(tmp_path):
    ad = build_adapter(ModelConfig(kind="flux_kontext", lora=LoraSettings(enabled=False), **SIZES["flux_kontext"]))
    with pytest.raises(ValueError, match=r"names no reference image: expected '<image path> \| <instruction>'"):
        ad.encode_prompts(["a red circle"])
    with pytest.raises(FileNotFoundError, match="reference image .*missing.png' does not exist"):
        ad.encode_prompts([f"{tmp_path / 'missing.png'} | make it red"])
    pipe = TINY_BUILDERS["wan22"]()
    pipe.register_to_config(boundary_ratio=None)
    with pytest.raises(ValueError, match="needs both"):
        build_adapter(ModelConfig(kind="wan22", lora=LoraSettings(enabled=False), **SIZES["wan22"]), pipe=pipe)
    ad = build_adapter(ModelConfig(kind="wan22", lora=LoraSettings(rank=4, alpha=8), **SIZES["wan22"]))
    from diffusion_rl.lora_files import load_lora_init

    with pytest.raises(FileNotFoundError, match="pytorch_lora_weights_transformer_2.safetensors"):
        load_lora_init(ad, tmp_path)
    with pytest.raises(ValueError, match="unknown model kind 'sd4'.*qwenimage"):
        build_adapter(ModelConfig(kind="sd4"))  # type: ignore[arg-type]


def test_wan22_two_experts_fsdp_two_processes_match_one(tmp_path):
    """dist.strategy=fsdp shards each expert as its own root (each is called alone): 2 processes give the 1-process
    run's LoRA weights of both experts after one iteration."""
    import subprocess
    import sys
    from pathlib import Path

    from grpo.checkpoint import load_checkpoint

    root = Path(__file__).resolve().parents[2]
    args = ["train", "configs/diffusion/tiny_sd3_flat.yaml", "model.kind=wan22", "model.height=32", "model.width=32",
            "model.num_frames=5", "model.lora.rank=4", "model.lora.alpha=8", "sampler.num_steps=4", "sampler.eta=1.0",
            "grpo.group_size=4", "train.prompts_per_iter=1", "train.iterations=1", "train.lr=0.01",
            "train.eval_steps=4",
            "train.save_every=1", "train.log_images=false", "prompts.source=list", "prompts.prompts=[a red circle]",
            "prompts.num_eval=1", "reward.name=tests.diffusion_rl.test_new_families:redness",
            "reward.retry_backoff_s=0"]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    for n, out in ((1, tmp_path / "one"), (2, tmp_path / "two")):
        pre = [sys.executable, "-m", "diffusion_rl.cli"] if n == 1 else \
            [*torchrun(2), "-m", "diffusion_rl.cli"]
        extra = [f"output_dir={out}"] + (["dist.strategy=fsdp"] if n == 2 else [])
        res = subprocess.run([*pre, *args, *extra], env=env, cwd=root, capture_output=True, text=True, timeout=400)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    a = load_checkpoint(tmp_path / "one" / "checkpoints")["trainable"]
    b = load_checkpoint(tmp_path / "two" / "checkpoints")["trainable"]
    assert a.keys() == b.keys() and {k.split(".", 1)[0] for k in a} == {"transformer", "transformer_2"}
    moved = {k.split(".", 1)[0] for k, v in a.items() if "lora_B" in k and float(v.abs().max()) > 0}
    assert moved == {"transformer", "transformer_2"}
    # Adam's first step is lr g / (|g| + eps): an element whose gradient is near 0 turns the reduction order's last
    # bits into a visible difference, so: every element within a tenth of one step (lr), nearly all within 1e-5
    d = torch.cat([(b[k] - v).abs().flatten() for k, v in a.items()])
    assert float(d.max()) < 0.1 * 0.01 and float((d > 1e-5).float().mean()) < 0.01, \
        (float(d.max()), int((d > 1e-5).sum()))
