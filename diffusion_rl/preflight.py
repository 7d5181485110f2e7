"""What ``diffusion-rl`` commands check before building a model (grpo.preflight): image sizes, group size, the
output directory, pretrain-shapes' flags. Each failure is one line (ValueError)."""

from __future__ import annotations

import math
from pathlib import Path

from grpo.config import MAX_SEED, MAX_WIDTH
from grpo.preflight import (
    check_new_output,
    check_path_exists,
    check_resumable,
    check_run_kind,
    check_sizes,
    check_writable_dir,
)


def check_train_inputs(cfg, writes: bool = True) -> None:
    """A ``DiffusionRLConfig``'s checks (``writes``: the output directory too; a dry run writes nothing)."""
    check_sizes(("model.height", cfg.model.height, 1), ("model.width", cfg.model.width, 1),
                ("train.iterations", cfg.train.iterations, 0), ("sampler.num_steps", cfg.sampler.num_steps, 1))
    if not cfg.branch.enabled:
        check_sizes(("grpo.group_size", cfg.grpo.group_size, 2))
    if writes:
        check_writable_dir(cfg.output_dir, "output_dir")
        check_run_kind(cfg.output_dir, type(cfg))  # not another command's run directory
        probe_reward(cfg)
        if cfg.resume:
            check_resumable(Path(cfg.output_dir) / "checkpoints", cfg)


MAX_PRETRAIN_SIZE = 256  # pretrain-shapes' largest --size (pixels)


def check_pretrain_args(args, out: str | Path | None = None) -> None:
    """``diffusion-rl pretrain-shapes`` flags; ``out``: where the model goes (``--out`` or the default folder), a new
    path (or an empty folder) unless ``--force``, beside a resumable state ``OUT.ckpt`` that is complete when there."""
    check_sizes(("--steps", args.steps, 1), ("--size", args.size, 8), ("--batch", args.batch, 1),
                ("--hidden", args.hidden, 1), ("--layers", args.layers, 1), ("--save-every", args.save_every, 0))
    for flag, v, hi in (("--hidden", args.hidden, MAX_WIDTH // 2), ("--layers", args.layers, 256),
                        ("--batch", args.batch, 65_536)):  # (was: 1e6 started and filled the memory)
        if v > hi:
            raise ValueError(f"{flag}={v}: expected at most {hi} (the demo model: --hidden 128 --layers 4 --batch 32)")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        raise ValueError(f"--lr={args.lr}: expected a finite number > 0")
    if args.lr > 1:  # (was: 1e300 ran until AdamW's step overflowed float32, a traceback)
        raise ValueError(f"--lr={args.lr}: expected a peak learning rate in (0, 1] (the demo model's: 1e-3)")
    if args.size > MAX_PRETRAIN_SIZE:  # the position table grows with the square of the side: 100000 px asks 80 GB
        raise ValueError(f"--size={args.size}: expected at most {MAX_PRETRAIN_SIZE} pixels (the demo model is 32)")
    if not 0 <= args.seed <= MAX_SEED:
        raise ValueError(f"--seed={args.seed}: expected an integer in [0, {MAX_SEED}]")
    check_path_exists("--init", args.init, "a saved shapes pipeline directory")
    if args.out is not None and not args.out.strip():
        raise ValueError("--out is empty (expected a directory path; leave --out out for the default cache folder)")
    from .tiny_models import check_tiny_sd3_width

    if args.init is None:  # (--init continues a saved pipeline: its own width)
        check_tiny_sd3_width(args.hidden, "--hidden")
    out = out or args.out
    if out:
        check_writable_dir(out, "--out")
        check_new_output(out, "--out", getattr(args, "force", False))  # a finished model is never overwritten
        check_resumable(Path(str(out) + ".ckpt"), advice="move it away (or delete it) to pretrain from step 0")


def probe_reward(cfg) -> None:
    """Call a custom ``module:attr`` reward once on random images of the run's size and its first prompts; ask a
    reward server (``reward.name=http://...``) for ``GET /health`` (with its retries)."""
    from rewards.remote import build_remote_reward, check_served

    remote = build_remote_reward(cfg.reward.name, cfg.reward.remote, "reward.name")
    if remote is not None:
        check_served(remote, cfg.reward.name, dict(cfg.reward.kwargs), "reward.name")
        return
    if ":" not in cfg.reward.name:
        return
    import torch

    from grpo.preflight import check_custom_reward
    from rewards import RewardBatch, build_reward, check_output

    prompts = (list(getattr(cfg.prompts, "prompts", None) or []) or ["a probe prompt"])[:2] * 2
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(len(prompts), 3, cfg.model.height, cfg.model.width, generator=gen)
    check_custom_reward(cfg.reward.name, dict(cfg.reward.kwargs), build_reward,
                        RewardBatch(images=images, prompts=prompts),
                        check_output)
