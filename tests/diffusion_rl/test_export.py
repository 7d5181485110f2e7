"""Export: a run's LoRA loads into a stock diffusers pipeline (SD3, FLUX, Wan) and samples the same images as the
trainer's own sampler; --merge saves a pipeline that does the same without peft; a diffusers-saved LoRA starts a run."""

import json

import pytest
import torch

from diffusion_rl.adapters import ADAPTERS, LoraSettings, ModelConfig, build_adapter
from diffusion_rl.cli import main
from diffusion_rl.prompts import PromptConfig
from diffusion_rl.sampling import ode_sample
from diffusion_rl.tiny_models import TINY_BUILDERS
from diffusion_rl.trainer import DiffusionGRPOTrainer, DiffusionRLConfig
from grpo.device import randn
from grpo.flow_sde import flow_sigmas

from .conftest import redness

SIZES = {"sd3": dict(height=32, width=32), "flux": dict(height=32, width=32),
         "wan": dict(height=32, width=32, num_frames=5)}
PROMPT = "a red circle"
STEPS = 4


def _run(tmp_path, kind, ema=False):
    """A saved run whose LoRA is far from zero (random A and B), so the export changes the images."""
    cfg = DiffusionRLConfig(output_dir=str(tmp_path / "run"), resume=False,
                            prompts=PromptConfig(source="list", prompts=[PROMPT], num_eval=1))
    cfg.model.kind = kind
    for k, v in SIZES[kind].items():
        setattr(cfg.model, k, v)
    cfg.model.lora = LoraSettings(rank=4, alpha=8)  # scale alpha / r = 2: the metadata must carry alpha
    cfg.train.ema_decay = 0.5 if ema else 0.0
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness, log=False)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in tr.params:
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    if ema:  # live weights move on after the EMA was taken: the export must pick the EMA
        tr.ema = {k: v.clone() for k, v in tr.adapter.trainable_state_dict().items()}
    tr.save()
    return cfg, tr


def _stock(kind, cfg):
    """The tiny base pipeline of the run (same seed, same weights) in eval mode, as from_pretrained returns it."""
    pipe = TINY_BUILDERS[kind](max_length=cfg.max_sequence_length)
    for m in pipe.components.values():
        if isinstance(m, torch.nn.Module):
            m.eval()
    return pipe


def _pipeline_images(pipe, kind, cfg, latents, embeds=None):
    """Sample with the stock pipeline's own loop, on the trainer's sigma schedule and initial latents, no CFG.
    Wan: ``embeds`` are the prompt's UMT5 states (WanPipeline's prompt cleaning calls ftfy, not installed here)."""
    sig = flow_sigmas(STEPS, 1.0)[:-1].tolist()
    common = dict(prompt=PROMPT, height=cfg.height, width=cfg.width, num_inference_steps=STEPS, output_type="pt",
                  max_sequence_length=cfg.max_sequence_length)
    if kind == "sd3":
        return pipe(**common, guidance_scale=1.0, latents=latents, sigmas=sig).images
    if kind == "flux":
        from diffusers import FluxPipeline

        b, c, h, w = latents.shape
        return pipe(**common, latents=FluxPipeline._pack_latents(latents, b, c, h, w), sigmas=sig).images
    set_ts = pipe.scheduler.set_timesteps  # WanPipeline takes no sigmas=: hand the schedule to its scheduler
    pipe.scheduler.set_timesteps = lambda n, device=None, **kw: set_ts(device=device, sigmas=sig)
    del common["prompt"]
    return pipe(**common, prompt_embeds=embeds, num_frames=cfg.num_frames, guidance_scale=1.0, latents=latents).frames


@pytest.mark.parametrize("kind", ["sd3", "flux", "wan"])
def test_export_loads_in_stock_pipeline_with_same_images(tmp_path, kind, capsys):
    cfg, tr = _run(tmp_path, kind)
    out = tmp_path / "lora"
    assert main(["export", str(tmp_path / "run"), str(out), "--merge"]) == 0
    assert "exported live LoRA" in capsys.readouterr().out
    info = json.loads((out / "export.json").read_text())
    assert info["lora"]["rank"] == 4 and info["lora"]["alpha"] == 8.0 and info["weights"] == "live"

    # the trainer's sampler (ODE) with the trained LoRA
    gen = torch.Generator().manual_seed(7)
    ours = tr.adapter.decode(ode_sample(tr.adapter, [PROMPT], STEPS, gen))
    x0 = randn((1, *tr.adapter.latent_shape), torch.Generator().manual_seed(7), "cpu")
    with tr.adapter.reference():
        base = tr.adapter.decode(ode_sample(tr.adapter, [PROMPT], STEPS, torch.Generator().manual_seed(7)))
    assert (ours - base).abs().max() > 1e-3  # the LoRA matters, so equality below is not vacuous

    pipe = _stock(kind, cfg.model)  # the same base weights, stock class
    pipe.load_lora_weights(str(out), weight_name="pytorch_lora_weights.safetensors")  # offline hub needs the name
    emb = tr.adapter.encode_prompts([PROMPT])["prompt_embeds"] if kind == "wan" else None
    stock = _pipeline_images(pipe, kind, cfg.model, x0, emb)
    assert stock.shape == ours.shape
    torch.testing.assert_close(stock, ours, atol=2e-5, rtol=0)

    merged = type(pipe).from_pretrained(str(out / "merged"))  # fused weights, no adapter
    assert not any("lora" in n for n, _ in merged.transformer.named_parameters())
    torch.testing.assert_close(_pipeline_images(merged, kind, cfg.model, x0, emb), ours, atol=2e-4, rtol=0)


def test_export_prefers_ema_and_refuses_bad_input(tmp_path, capsys):
    _, tr = _run(tmp_path, "sd3", ema=True)
    with torch.no_grad():
        for p in tr.params:
            p.add_(1.0)
    tr.save()  # live != ema now
    out = tmp_path / "lora"
    assert main(["export", str(tmp_path / "run"), str(out)]) == 0
    from safetensors.torch import load_file

    sd = load_file(str(out / "pytorch_lora_weights.safetensors"))
    key = next(k for k in sd if k.endswith("lora_A.weight"))
    name = "transformer." + next(n for n in tr.ema if n.endswith("lora_A.default.weight") and
                                 n.replace("lora_A.default.", "lora_A.") == key[len("transformer."):])
    torch.testing.assert_close(sd[key], tr.ema[name[len("transformer."):]])
    assert all(k.startswith("transformer.") and ".default." not in k for k in sd)
    capsys.readouterr()
    assert main(["export", str(tmp_path / "nothing"), str(tmp_path / "o2")]) == 2
    assert "run directory not found" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()


@pytest.mark.parametrize("kind", ["sd3", "flux", "wan"])
def test_diffusers_saved_lora_starts_a_run(tmp_path, kind):
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    from diffusion_rl.adapters import DEFAULT_LORA_TARGETS

    mc = ModelConfig(kind=kind, lora=LoraSettings(rank=4, alpha=8), **SIZES[kind])
    pipe = _stock(kind, mc)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=DEFAULT_LORA_TARGETS[kind])
    pipe.transformer.add_adapter(cfg)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for n, p in pipe.transformer.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    # the way diffusers' LoRA training scripts save
    type(pipe).save_lora_weights(str(tmp_path / "dl"),
                                 transformer_lora_layers=get_peft_model_state_dict(pipe.transformer),
                                 transformer_lora_adapter_metadata=cfg.to_dict())
    mc.lora_init = str(tmp_path / "dl")
    ad = build_adapter(mc)
    stock = ADAPTERS[kind](pipe, ModelConfig(kind=kind, **SIZES[kind]))
    x = torch.randn(2, *ad.latent_shape, generator=g)
    cond = ad.encode_prompts([PROMPT, "a blue square"])
    torch.testing.assert_close(ad.velocity(x, torch.tensor([0.7, 0.3]), cond),
                               stock.velocity(x, torch.tensor([0.7, 0.3]), cond), atol=1e-6, rtol=0)
    mc.lora = LoraSettings(rank=8, alpha=8)
    with pytest.raises(ValueError, match="rank \\[4\\] and alpha 8.0.*model.lora.rank=8"):
        build_adapter(mc)


def test_export_needs_no_reward_package(tmp_path, monkeypatch):
    """A run trained with a reward from the user's own package exports in a shell where that package is not
    importable (issue 36): exporting a LoRA needs no reward, so none is imported."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from diffusion_rl.config import RewardConfig

    pkg = tmp_path / "site" / "userrewards_i36"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from rewards import RewardOutput\n\n\ndef score(batch):\n"
                                     "    return RewardOutput(total=batch.images.mean((1, 2, 3)), components={})\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cfg = DiffusionRLConfig(output_dir=str(tmp_path / "run"), resume=False,
                            reward=RewardConfig(name="userrewards_i36:score"),
                            prompts=PromptConfig(source="list", prompts=[PROMPT], num_eval=1))
    cfg.model.lora = LoraSettings(rank=4, alpha=8)
    DiffusionGRPOTrainer(cfg, log=False).save()
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}  # the user's package is not on this shell's path
    r = subprocess.run([sys.executable, "-m", "diffusion_rl.cli", "export", str(tmp_path / "run"),
                        str(tmp_path / "out")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "out" / "pytorch_lora_weights.safetensors").is_file()


def test_checkpoint_dir_loads_in_stock_diffusers(tmp_path, monkeypatch):
    """``pipe.load_lora_weights(<checkpoint dir>)`` in stock diffusers loads the trained LoRA (issue 36: it loaded 0
    tensors from a checkpoint, silently): the checkpoint carries pytorch_lora_weights.safetensors in diffusers' key
    format, the same weights as the export (EMA when kept), so the images equal those after loading the export."""
    import diffusers.loaders.lora_base as lora_base

    from grpo.checkpoint import latest_checkpoint, load_checkpoint

    cfg, tr = _run(tmp_path, "sd3", ema=True)
    with torch.no_grad():
        for p in tr.params:
            p.add_(0.5)
    tr.save()  # live != EMA now: the checkpoint's LoRA file must hold what the export holds (the EMA)
    ck = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "exp")]) == 0
    assert "pytorch_lora_weights" not in load_checkpoint(ck)  # resume reads its own files only

    # a user's shell is online: diffusers guesses the file in a folder (offline it demands weight_name)
    monkeypatch.setattr(lora_base, "HF_HUB_OFFLINE", False)
    x0 = randn((1, *tr.adapter.latent_shape), torch.Generator().manual_seed(7), "cpu")
    images = {}
    for name, src, kw in (("checkpoint", ck, {}), ("best", tmp_path / "run" / "checkpoints" / "best", {}),
                          ("export", tmp_path / "exp", {"weight_name": "pytorch_lora_weights.safetensors"})):
        if name == "best":
            tr.keep_best(1.0)
        pipe = _stock("sd3", cfg.model)
        pipe.load_lora_weights(str(src), **kw)
        n = sum("lora_" in k for k, _ in pipe.transformer.named_parameters())
        assert n == len(tr.ema), (name, n)  # every LoRA matrix of the run, none missing
        images[name] = _pipeline_images(pipe, "sd3", cfg.model, x0)
    base = _pipeline_images(_stock("sd3", cfg.model), "sd3", cfg.model, x0)
    assert (images["export"] - base).abs().max() > 1e-3  # the LoRA changes the images: equality below is not vacuous
    torch.testing.assert_close(images["checkpoint"], images["export"], atol=0, rtol=0)
    torch.testing.assert_close(images["best"], images["export"], atol=0, rtol=0)


def test_export_checks_the_lora_shapes_against_the_model(tmp_path, capsys):
    """Before anything is written, each LoRA pair must fit the run's model: A [rank, in], B [out, rank] of the module
    it names. The tiny model is built; a local diffusers directory's denoiser is built from its config on the meta
    device (no weights read). A pair of the right rank but another module size: one line, exit 2, OUT absent."""
    from safetensors.torch import load_file, save_file

    from diffusion_rl.export import check_lora_tensors, denoiser_modules
    from grpo.checkpoint import latest_checkpoint

    cfg, tr = _run(tmp_path, "sd3")
    ck = latest_checkpoint(tmp_path / "run" / "checkpoints")
    good = load_file(str(ck / "trainable.safetensors"))
    a_key = "transformer_blocks.0.attn.to_q.lora_A.default.weight"
    b_key = a_key.replace("lora_A", "lora_B")
    wide = {**good, a_key: torch.zeros(4, 40), b_key: torch.zeros(40, 4)}  # the model's to_q is 32 -> 32
    save_file(wide, str(ck / "trainable.safetensors"))
    out = tmp_path / "lora"
    assert main(["export", str(tmp_path / "run"), str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "transformer.transformer_blocks.0.attn.to_q.lora_A / lora_B have shapes [4, 40] / " \
        "[40, 4], but the model's transformer_blocks.0.attn.to_q weight is [32, 32]" in err[0] \
        and "nothing written" in err[0], err
    assert not out.exists()

    base = tmp_path / "base"  # the same model as a local diffusers directory: checked from its config alone
    _stock("sd3", cfg.model).save_pretrained(str(base))
    meta = denoiser_modules(ModelConfig(kind="sd3", path=str(base)))["transformer"]
    assert {p.device.type for p in meta.parameters()} == {"meta"}
    trained = {n.replace(".base_layer", ""): p.shape for n, p in tr.adapter.pipe.transformer.named_parameters()
               if "lora_" not in n}  # (peft keeps a targeted layer's own weight under .base_layer)
    assert {n: p.shape for n, p in meta.named_parameters()} == trained
    check_lora_tensors(good, 4, {"transformer": meta})
    with pytest.raises(ValueError, match=r"to_q weight is \[32, 32\]"):
        check_lora_tensors(wide, 4, {"transformer": meta})
    with pytest.raises(ValueError, match=r"lora_A has shape \[4, 32\], expected \[2, in_features\] "
                                         r"\(model.lora.rank=2\)"):
        check_lora_tensors(good, 2)  # another rank: refused without any model
    renamed = {k.replace("transformer_blocks.0.", "transformer_blocks.9."): v for k, v in good.items()}
    with pytest.raises(ValueError, match=r"transformer_blocks.9.attn.* is not in this run's SD3Transformer2DModel"):
        check_lora_tensors(renamed, 4, {"transformer": meta})
