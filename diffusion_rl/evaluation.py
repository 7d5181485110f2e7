"""Evaluation of :class:`diffusion_rl.trainer.DiffusionGRPOTrainer`: the mean reward of ODE samples on the fixed
evaluation prompts (:func:`evaluate_ode`, the trainer's ``evaluate``), the gold monitors with the reward-hacking
alarm on the same images (:func:`watch_monitors`), and the evaluation every ``train.eval_every`` iterations on the
ranks that evaluate, followed by keep-best (:func:`eval_everywhere`)."""

from __future__ import annotations

import torch

from grpo.distributed import any_rank, barrier
from grpo.loop import StopRun
from grpo.monitors import RewardHackingError
from grpo.runinfo import write_grid_captions
from rewards import RewardBatch
from rewards.remote import RemoteRewardError

from .sampling import ode_sample
from .trainer_protocol import DiffusionTrainerLike


@torch.no_grad()
def evaluate_ode(tr: DiffusionTrainerLike, tag: str | None = None, step: int = 0) -> float:
    """Mean reward of deterministic (ODE) samples on the fixed evaluation prompts (EMA weights if kept)."""
    backup = None
    if tr.ema is not None:
        backup = tr.adapter.trainable_state_dict()
        tr.adapter.load_trainable_state_dict(tr.ema)
    prompts = tr.prompts.eval_prompts
    tr.warm_prompts(prompts)
    gen = torch.Generator().manual_seed(tr.cfg.seed + 777)
    lat = ode_sample(tr.adapter, prompts, tr.cfg.train.eval_steps, gen, tr.cfg.sampler.shift,
                     tr.cfg.sampler.cfg_scale)
    try:
        out, images = tr.score(lat, prompts)
    except RemoteRewardError as e:  # the loop saves and stops (grpo.loop.StopRun); a rerun resumes
        if backup is not None:
            tr.adapter.load_trainable_state_dict(backup)
        raise StopRun(str(e)) from None
    if backup is not None:
        tr.adapter.load_trainable_state_dict(backup)
    if tag and tr.cfg.train.log_images and images.dim() == 4:
        # prompt and reward under each tile
        grid = tr.logger.log_images(step, tag, images[:16], nrow=8, captions=[
            f"{p} | reward {float(r):.3f}" for p, r in zip(prompts[:16], out.total[:16].float().tolist())])
        if grid is not None:  # the cells' prompts and rewards beside the grid, for the run report (grpo.report)
            write_grid_captions(grid, prompts[:16], out.total[:16].float().tolist(), nrow=8)
    named = {**(getattr(out, "components", None) or {}), **(getattr(out, "details", None) or {})}
    comps = {f"eval/{k}": float(v.float().mean()) for k, v in named.items()}
    if comps:
        tr.logger.log(step, comps)
        tr.last_eval_components = comps
    total = float(out.total.float().mean())
    watch_monitors(tr, images, prompts, step, total)
    return total


BEFORE, AFTER = "samples/before", "samples/after"  # the image-grid tags of the evaluations before and after training


def eval_everywhere(tr: DiffusionTrainerLike, tag: str | None, step: int) -> float:
    """An evaluation of the run at ``step``: :func:`evaluate_ode` on rank 0 (every rank under FSDP, whose sharded
    forward is a collective), logged as ``eval/reward``, then keep-best on every rank; the value (NaN on the ranks
    that do not evaluate). ``tag``: :data:`BEFORE` (the value is kept as ``tr.eval_before``), :data:`AFTER` (logged
    beside ``eval/reward_before``) or None (the loop's, every ``train.eval_every`` iterations; no image grid). A reward
    server that failed on any rank stops every rank (:class:`grpo.loop.StopRun`; in the loop, after a save)."""
    value, failed = float("nan"), None
    if tr.dist.is_main or tr.fsdp:
        try:
            value = tr.evaluate(tag, step)
            if tag == BEFORE:
                tr.eval_before, tr.eval_before_components = value, dict(tr.last_eval_components)
            tr.logger.log(step, {"eval/reward": value, **({"eval/reward_before": tr.eval_before} if tag == AFTER
                                                          else {})})
        except StopRun as e:
            failed = str(e)
    if any_rank(failed is not None):
        raise StopRun(failed or "the reward server failed on another rank")
    barrier()
    tr.keep_best(value)
    return value


def watch_monitors(tr: DiffusionTrainerLike, images: torch.Tensor, prompts: list[str], step: int, total: float) -> None:
    """Score the evaluation images with ``eval.monitors`` (logged as ``monitor/<name>``) and feed the alarm
    (:class:`grpo.monitors.HackingAlarm`; with ``eval.action=stop`` it raises after a checkpoint is saved)."""
    if not tr.monitors:
        return
    batch = RewardBatch(images=images, prompts=prompts, metadata=[{} for _ in prompts])
    vals = {n: float(fn(batch).total.float().mean()) for n, fn in tr.monitors.items()}
    tr.logger.log(step, {f"monitor/{n}": v for n, v in vals.items()})
    try:
        tr.alarm.observe(step, total, vals)
    except RewardHackingError:
        tr.save()
        raise
