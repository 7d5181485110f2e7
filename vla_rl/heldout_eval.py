"""Held-out evaluation of :class:`vla_rl.trainer.VLARLTrainer`: the deterministic policy on the ``rl.eval_split``
states on rank 0 (:func:`run_eval`, the trainer's ``run_eval``) and its results on every rank (:func:`eval_everywhere`,
with keep-best and the reward-hacking stop)."""

from __future__ import annotations

import time

import numpy as np

from grpo.distributed import broadcast_object
from grpo.monitors import RewardHackingError

from .rollout import EvalResult, evaluate, tile_videos, video_name
from .trainer_protocol import VLATrainerLike


def run_eval(tr: VLATrainerLike, tag: str, step: int, videos: bool = True) -> EvalResult:
    """The deterministic policy on the held-out states (``rl.eval_split``): ``tr.evals[tag]``, logged (with
    ``rl.num_videos`` videos) at ``step``; the training reward since the last evaluation feeds the alarm."""
    t0 = time.time()
    res = evaluate(tr.policy, tr.pool, tr.cfg.env.tasks, tr.eval_seeds, tr.cfg.env.max_episode_steps,
                   record_frames=videos and tr.cfg.rl.num_videos > 0)
    tr.evals[tag] = {"iteration": tr.iteration, "success_rate": res.success_rate, "mean_length": res.mean_length,
                     "per_task": res.per_task, "episodes": len(res.episodes)}
    if tr.logger:
        scal = {"eval/success_rate": res.success_rate, "eval/episode_length": res.mean_length}
        scal.update({f"eval/success_rate/{k}": v for k, v in res.per_task.items()})
        tr.logger.log(step, scal)
        if videos and tr.cfg.rl.num_videos > 0:
            picks = res.episodes[: tr.cfg.rl.num_videos]
            tr.logger.log_video(step, f"rollouts/{tag}_{video_name(picks)}",
                                tile_videos([e.frames for e in picks]),
                                fps=15)
    tr.report(f"eval[{tag}] success {res.success_rate:.3f} ({len(res.episodes)} held-out episodes), "
              f"mean length {res.mean_length:.1f}, {time.time() - t0:.1f}s")
    if tr.rewards_since_eval:  # the training reward since the last evaluation beside the real success
        r = float(np.mean(tr.rewards_since_eval))
        tr.rewards_since_eval = []
        if tr.logger:
            tr.logger.log(step, {"monitor/train_reward": r, "monitor/success_rate": res.success_rate})
        tr.alarm.observe(step, r, {"success_rate": res.success_rate},
                         say=print if tr.dist.is_main else (lambda m: None))
    return res


def eval_everywhere(tr: VLATrainerLike, tag: str, step: int, videos: bool = True) -> None:
    """``run_eval`` on rank 0; every rank gets its results (``tr.evals``). A reward-hacking stop raised on
    rank 0 (``eval.action: stop``) is broadcast with them and raised on every rank, after the best checkpoint is
    kept."""
    stop = None
    if tr.dist.is_main:
        try:
            tr.run_eval(tag, step, videos)
        except RewardHackingError as e:
            stop = str(e)
    tr.evals, stop = broadcast_object((tr.evals, stop))
    tr.keep_best(tr.evals[tag]["success_rate"])
    if stop is not None:
        raise RewardHackingError(stop)
