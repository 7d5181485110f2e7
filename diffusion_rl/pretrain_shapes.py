"""Pretrain the embedded default: a small text-conditioned flow-matching model on "colors and shapes".

The model is a real ``StableDiffusion3Pipeline`` (two tiny CLIP text encoders, no T5, a small
``SD3Transformer2DModel``) working in pixel space (``vae=None``; latents are images in ``[-1, 1]``), so RL
afterwards goes through exactly the adapter code path of the full SD3 recipes. Training data are renders of
prompts from the colors-and-shapes grammar (``rewards.shapes``); the objective is rectified flow matching
(Lipman et al. 2023; Esser et al. 2024)::

    x_s = (1 - s) x_0 + s eps,   s ~ logit-normal(0, 1),   L = || v_theta(x_s, s, c) - (eps - x_0) ||^2

with the text encoders trained jointly. The result is saved with ``save_pretrained`` (safetensors) and is loaded
back through ``StableDiffusion3Pipeline.from_pretrained`` like any SD3 checkpoint.

    diffusion-rl pretrain-shapes [--out DIR] [--steps 4000] [--hidden 128 --layers 4] [--size 32]

Every ``--save-every`` steps the whole training state (weights, AdamW, the one-cycle schedule, the RNG streams)
is written atomically to ``DIR.ckpt/`` (``grpo.checkpoint``); rerunning the same command resumes from it and
produces the same weights as an uninterrupted run. It is removed once ``DIR`` is saved.

The shipped ``diffusion_rl/assets/shapes_sd3`` is three stages (~1 h 40 min on 2 CPU cores in all)::

    diffusion-rl pretrain-shapes --out s1                                       # 4000 steps, lr 1e-3
    diffusion-rl pretrain-shapes --out s2 --init s1 --lr 3e-4 --seed 1          # +4000
    diffusion-rl pretrain-shapes --out s3 --init s2 --lr 3e-4 --seed 2          # +4000

Pretraining is its own command: loading a model never trains one (``model.pretrain: shapes`` only makes a missing
model an error that names this command).

Verifier on 256 prompts (10 ODE steps), all-correct / graded shape credit (shape_width 0.2): s1 0.184 / 0.575, s2
0.301 / 0.693, s3 0.398 / 0.759 (exact shape 0.57, colour 0.97, relation 0.98). The shipped stages predate
seeded layouts (the renderer drew them from OS entropy), so a rerun gives a model like it, not a bit-identical
one; runs are reproducible now.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import torch

DEFAULT_DIR = Path(os.environ.get("BRANCHLOOP_CACHE", Path.home() / ".cache" / "branchloop")) / "shapes_sd3"


def _shapes():
    try:
        from rewards import shapes
    except ImportError as e:
        raise ImportError("the shapes demo needs rewards.shapes (prompt grammar, renderer, verifier)") from e
    return shapes


def pretrain(out: str | Path = DEFAULT_DIR, steps: int = 4000, size: int = 32, batch: int = 32, lr: float = 1e-3,
             seed: int = 0, hidden: int = 128, layers: int = 4, log_every: int = 100, init: str | Path | None = None,
             save_every: int = 500) -> Path:
    """Train and save the model; ``init``: continue from a saved shapes pipeline (its architecture; ``hidden`` and
    ``layers`` are then ignored) instead of a fresh one. A training state in ``<out>.ckpt`` (see the module
    docstring) is resumed; ``save_every=0`` writes none."""
    for name, value in (("steps", steps), ("size", size), ("batch", batch), ("hidden", hidden), ("layers", layers)):
        if int(value) < 1:
            raise ValueError(f"{name}={value}: expected >= 1")
    if lr <= 0 or save_every < 0 or log_every < 0:
        raise ValueError(f"need lr > 0, save_every >= 0 and log_every >= 0, got {lr}, {save_every}, {log_every}")
    if init is not None and not (Path(init) / "model_index.json").is_file():
        raise FileNotFoundError(f"init={str(init)!r}: no saved shapes pipeline there (expected a directory with "
                                "model_index.json, as written by a finished diffusion-rl pretrain-shapes)")
    from grpo.checkpoint import (
        capture_rng_state,
        latest_checkpoint,
        load_checkpoint,
        random_state_from_json,
        random_state_to_json,
        restore_rng_state,
        save_checkpoint,
    )

    from .adapters import ModelConfig, SD3Adapter
    from .tiny_models import tiny_sd3_pipeline

    shapes = _shapes()
    rng = random.Random(seed)
    tiny = dict(sample_size=size, with_vae=False, with_t5=False, patch_size=2 if size <= 16 else 4)  # its size rule too
    if init is not None:
        from .adapters import load_pipeline

        pipe = load_pipeline(ModelConfig(kind="sd3", path=str(init)))  # the same loader (and errors) as a run
    else:
        words = sorted({w for p in shapes.sample_prompts(2000, rng=random.Random(seed + 1)) for w in p.lower().split()})
        pipe = tiny_sd3_pipeline(words=words, seed=seed, hidden=hidden, layers=layers, max_length=16, **tiny)
    adapter = SD3Adapter(pipe, ModelConfig(kind="sd3", height=size, width=size, max_sequence_length=1, tiny=tiny))
    modules = [pipe.transformer, pipe.text_encoder, pipe.text_encoder_2]
    params = [p for m in modules for p in m.parameters()]
    for m in modules:
        m.requires_grad_(True).train()
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    g = torch.Generator().manual_seed(seed)
    ckpt_root = Path(str(Path(out)) + ".ckpt")
    meta = {"steps": steps, "batch": batch, "size": size, "lr": lr, "seed": seed}  # what a resume must match
    named = dict(zip(("transformer", "text_encoder", "text_encoder_2"), modules))
    start = 0
    if (last := latest_checkpoint(ckpt_root)) is not None:
        st = load_checkpoint(last)
        if st["meta"] != meta:
            raise ValueError(f"{ckpt_root} was written by a run with {st['meta']}, not steps={steps} batch={batch} "
                             f"size={size} lr={lr} seed={seed}: rerun with those settings or delete it")
        for name, m in named.items():
            m.load_state_dict(st[name])
        opt.load_state_dict(st["optimizer"])
        sched.load_state_dict(st["scheduler"])
        rng.setstate(random_state_from_json(st["rng"]["data"]))
        g.set_state(st["rng"]["noise"])
        restore_rng_state(st["rng"]["global"])
        start = st["step"]
        print(f"resuming {ckpt_root} at step {start}/{steps}", flush=True)
    t0 = time.time()
    for it in range(start, steps):
        prompts = shapes.sample_prompts(batch, rng=rng)
        x0 = shapes.render(prompts, size=size, rng=rng) * 2 - 1  # seeded layouts: reproducible, resumable
        cond = adapter._encode(prompts)
        eps = torch.randn(x0.shape, generator=g)
        s = torch.sigmoid(torch.randn(batch, generator=g))
        xs = (1 - s.view(-1, 1, 1, 1)) * x0 + s.view(-1, 1, 1, 1) * eps
        loss = ((adapter.velocity(xs, s, cond) - (eps - x0)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if log_every and (it % log_every == 0 or it == steps - 1):
            print(f"pretrain step {it:5d}/{steps}  flow-matching loss {loss.item():.4f}  ({time.time() - t0:.0f}s)",
                  flush=True)
        if save_every and (it + 1) % save_every == 0 and it + 1 < steps:
            save_checkpoint(ckpt_root, it + 1, {
                **{name: m.state_dict() for name, m in named.items()},
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": it + 1, "meta": meta,
                "rng": {"data": random_state_to_json(rng.getstate()), "noise": g.get_state(),
                        "global": capture_rng_state()},
            }, keep_last=1)
    for m in modules:
        m.requires_grad_(False).eval()
    out = Path(out)
    pipe.save_pretrained(out, safe_serialization=True)
    shutil.rmtree(ckpt_root, ignore_errors=True)
    return out
