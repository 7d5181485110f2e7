"""The rollout and its reward for :class:`diffusion_rl.trainer.DiffusionGRPOTrainer` (the trainer's ``step``), with
the rollout made in parts and scored in the background under ``reward.overlap > 1``; the reward the trainer calls
(:func:`build_train_reward`) and its call with retries (:func:`reward_images`)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import torch

from grpo.loop import Phase, no_phase
from grpo.retry import call_with_retry
from rewards import RewardBatch, build_reward
from rewards.base import concat_outputs
from rewards.remote import RemoteReward, build_remote_reward

from .config import RewardConfig
from .sampling import Rollout, concat_rollouts
from .trainer_protocol import DiffusionTrainerLike


def build_train_reward(rc: RewardConfig, reward_fn: Callable | None) -> tuple[Callable, RemoteReward | None, str]:
    """``(reward, server client or None, name)``: ``reward_fn`` when given (any ``batch -> output with .total [B]``),
    else a reward server's client (``reward.name`` or ``reward.remote.url`` is ``http://HOST:PORT``; it retries per
    request) or the registered reward ``reward.name`` built with ``reward.kwargs``."""
    if reward_fn is not None:
        return reward_fn, None, getattr(reward_fn, "__name__", type(reward_fn).__name__)
    remote = build_remote_reward(rc.name, rc.remote, "reward.name")
    if remote is not None:
        return remote, remote, remote.name
    return build_reward(rc.name, **rc.kwargs), None, rc.name


def reward_images(tr: DiffusionTrainerLike, images: torch.Tensor, prompts: list[str]) -> Any:
    """The reward of decoded ``images`` ``[B, 3, H, W]`` (video ``[B, F, 3, H, W]``) for ``prompts`` (``B``); an
    in-process reward that raises is retried ``reward.retries`` times (a server retries each request itself)."""
    batch = RewardBatch(images=images, prompts=prompts, metadata=[{} for _ in prompts])
    if tr.remote is not None:
        return tr.reward_fn(batch)
    rc = tr.cfg.reward
    return call_with_retry(tr.reward_fn, batch, retries=rc.retries, backoff_s=rc.retry_backoff_s,
                           what=f"reward {tr.reward_name!r}", describe=lambda b: list(dict.fromkeys(b.prompts)))


def rollout_and_score(tr: DiffusionTrainerLike, prompts: list[str],
                      phase: Phase = no_phase) -> tuple[Rollout, Any, float]:
    """The iteration's rollout and the reward of its final samples: ``(rollout, reward output, rollout seconds)``.

    ``reward.overlap = K > 1``: the rollout is made in ``K`` parts (flat: contiguous shares of the sample rows,
    tree: of the trees; each with the noise of its global indices, so the samples are the ones of one rollout up
    to the float rounding of smaller batches); each part is decoded here and its reward computed on a background
    thread while the next part rolls out, then the parts are joined in order (:func:`concat_rollouts`, one record
    per step, so the update is the one of a rollout made in one piece): with a reward server the scoring time of
    all parts but the last hides behind the rollout. A given ``K`` gives the same numbers with the reward
    in-process or served."""
    t0 = time.perf_counter()
    K = tr.cfg.reward.overlap
    if K == 1:
        ro = tr.rollout(prompts, tr.iteration)
        t_roll = time.perf_counter() - t0
        phase("reward")
        out, _ = tr.score(ro.final, [prompts[i] for i in ro.final_prompt_idx.tolist()])
        return ro, out, t_roll
    if tr.scorer is None:  # an in-process reward is called from one thread at a time
        tr.scorer = ThreadPoolExecutor(K if tr.remote is not None else 1, thread_name_prefix="reward")
    parts, futures = [], []
    for k in range(K):
        part = tr.strategy.rollout(prompts, tr.iteration, part=(k, K))
        images = tr.adapter.decode(part.final)
        futures.append(tr.scorer.submit(reward_images, tr, images,
                                           [prompts[i] for i in part.final_prompt_idx.tolist()]))
        parts.append(part)
    t_roll = time.perf_counter() - t0
    phase("reward")
    errors = [f.exception() for f in futures]  # waits for every part (none is left running)
    if any(e is not None for e in errors):
        raise next(e for e in errors if e is not None)
    outs = [f.result() for f in futures]
    return concat_rollouts(parts), concat_outputs(outs), t_roll
