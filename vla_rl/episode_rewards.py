"""The rewards of :class:`vla_rl.trainer.VLARLTrainer`'s episodes over the global batch (binary success, SRPO, the
simulator's progress (``rl.reward: sim_progress``) or a reward server: :func:`episode_rewards`, the trainer's
``rewards``) and the iteration's rollout and reward numbers (:func:`rollout_scalars`)."""

from __future__ import annotations

import numpy as np
import torch

from grpo.distributed import all_reduce_floats, any_rank, gather_cpu
from grpo.loop import StopRun
from rewards.base import RewardBatch, RewardOutput
from rewards.remote import RemoteReward, RemoteRewardError, build_remote_reward, check_served, is_url
from rewards.sim_progress import SimProgressReward, sim_progress_metadata
from rewards.srpo import SRPOReward
from rewards.success import episode_metadata, success_reward

from .credit import spearman
from .rollout import EpisodeSpec, RolloutBatch
from .srpo_encoders import build_scene_encoder, build_trajectory_encoder
from .trainer_protocol import VLATrainerLike


def build_episode_reward(cfg, policy, device) -> tuple[SRPOReward | None, RemoteReward | None]:
    """``(srpo, remote)`` for ``rl.reward``: SRPO with its trajectory encoder on ``device`` (``rl.reward: srpo``), a
    reward server client (``rl.reward: http://HOST:PORT``, scoring each rank's episodes: videos + metadata) checked
    to answer (one line, exit 2), or neither (binary success)."""
    srpo = None
    if cfg.rl.reward == "srpo":  # built on the device; its module init must not shift the seeded CPU stream
        with torch.random.fork_rng(devices=[]):  # that SFT draws from (the run's numbers are the same as before)
            srpo = SRPOReward(cfg.srpo, build_trajectory_encoder(cfg.srpo, policy), device=device,
                              scene_encoder=build_scene_encoder(cfg.srpo, policy))
    remote = build_remote_reward(cfg.rl.reward, cfg.rl.remote, "rl.reward") if is_url(cfg.rl.reward) else None
    if remote is not None:  # before the first expensive step: one line, exit 2
        check_served(remote, cfg.rl.reward, {}, "rl.reward")
    return srpo, remote


def episode_rewards(tr: VLATrainerLike, batch: RolloutBatch, specs: list[EpisodeSpec] | None = None):
    """The reward of every episode of the *global* batch ``specs`` (``RewardOutput``, ``[E]``), identical on every
    rank; ``batch`` holds this rank's episodes (with ``specs=None``: the whole batch, one process)."""
    specs = specs if specs is not None else [e.spec for e in batch.episodes]
    tasks = [s.env_name for s in specs]
    success = gather_cpu(batch.success)
    if len(success) != len(specs):
        raise RuntimeError(f"gathered {len(success)} episodes for a global batch of {len(specs)}")
    if tr.remote is not None:
        return remote_rewards(tr.remote, batch)
    if tr.cfg.rl.reward == "srpo":
        proprio = tr.cfg.srpo.encoder == "proprio"  # reads the states only: the videos are not stacked
        emb = tr.srpo.embed(None if proprio else [np.stack(e.frames) for e in batch.episodes],  # [local E, D]
                            [np.stack(e.states) for e in batch.episodes] if proprio else None)
        scenes = None  # reference=predicted: the initial frames' scene features, [E, F] (frame 0 only is stacked)
        if tr.cfg.srpo.reference == "predicted":
            scenes = gather_cpu(tr.srpo.embed_scenes([np.stack(e.frames[:1]) for e in batch.episodes]))
        return tr.srpo.from_embeddings(gather_cpu(emb),
                                       episode_metadata(tasks, success, [s.group_id for s in specs]), scenes)
    if tr.cfg.rl.reward == "sim_progress":
        meta = sim_progress_metadata(tasks, success, env_progress(batch), [s.group_id for s in specs])
        return SimProgressReward(tr.cfg.srpo.progress_max, tr.cfg.rl.sim_progress_noise)(RewardBatch(metadata=meta))
    return success_reward(RewardBatch(metadata=episode_metadata(tasks, success)))


def env_progress(batch: RolloutBatch) -> torch.Tensor:
    """The simulator's own progress of every episode of the global batch (the final state's ``info["progress"]``),
    float32 ``[E]`` on the CPU, gathered over ranks (a collective: every rank calls it)."""
    return gather_cpu(torch.tensor([e.progress for e in batch.episodes], dtype=torch.float32, device="cpu"))


def remote_rewards(remote, batch: RolloutBatch) -> RewardOutput:
    """Each rank's episodes scored by the reward server, then gathered: ``videos`` uint8 ``[T_i, H, W, 3]``,
    ``prompts`` the instructions, ``metadata`` ``{"task", "success", "group", "init_seed", "seed"}``. A server that
    stays down raises :class:`grpo.loop.StopRun` on every rank (the step restores its state; the loop saves)."""
    eps = batch.episodes
    meta = episode_metadata([e.spec.env_name for e in eps], batch.success, [e.spec.group_id for e in eps])
    for m, e in zip(meta, eps):
        m.update(init_seed=int(e.spec.init_seed), seed=int(e.spec.seed))
    failed, out = None, None
    try:
        out = remote(RewardBatch(videos=[np.stack(e.frames) for e in eps],
                                 prompts=[e.instruction for e in eps],
                                 metadata=meta))
    except RemoteRewardError as e:
        failed = str(e)
    if any_rank(failed is not None):
        raise StopRun(failed or "the reward server failed on another rank")
    return RewardOutput(gather_cpu(out.total), {k: gather_cpu(v) for k, v in out.components.items()},
                        {k: gather_cpu(v) for k, v in out.details.items()})


def rollout_scalars(tr: VLATrainerLike, batch: RolloutBatch, specs: list[EpisodeSpec], rew, succ: torch.Tensor,
                    kept: int, t_roll: float, t_rew: float) -> dict[str, float]:
    """The iteration's rollout and reward numbers over the global batch (collectives: every rank calls it)."""
    lengths = gather_cpu(torch.tensor([e.length for e in batch.episodes], dtype=torch.float32, device="cpu"))
    env_steps = int(all_reduce_floats([batch.env_steps])[0])
    t_roll_max = float(gather_cpu(torch.tensor([t_roll], dtype=torch.float64, device="cpu")).max())  # slowest
    scal: dict[str, float] = {
        "rollout/success_rate": float(succ.float().mean()), "reward/mean": float(rew.total.nan_to_num().mean()),
        "rollout/episode_length": float(lengths.mean()),
        "rollout/groups_kept": kept, "rollout/env_steps": env_steps, "time/rollout_s": t_roll_max,
        "time/reward_s": t_rew, "throughput/rollout_episodes_per_s": len(specs) / max(t_roll_max, 1e-9),
        "throughput/rollout_env_steps_per_s": env_steps / max(t_roll_max, 1e-9),
    }
    last = tr.srpo.last if tr.srpo is not None else None
    if last is not None and last.predictor:  # srpo.reference=predicted: the regression's gate, per iteration
        scal["reward/srpo_predicted_groups"] = last.predicted_groups
        scal["reward/srpo_predictor_layouts"] = sum(n for _, n in last.predictor.values())
        r2 = [r for r, _ in last.predictor.values() if np.isfinite(r)]
        if r2:
            scal["reward/srpo_predictor_r2_loo"] = float(np.mean(r2))
    fail = ~succ
    if (tr.cfg.rl.reward == "sim_progress" or (tr.srpo is not None and tr.srpo.last is not None)) and fail.any():
        scal["reward/srpo_failure_mean"] = float(rew.total[fail].mean())
        if int(fail.sum()) >= 3:  # diagnostic only: does the failures' progress reward agree with the env's?
            # (SRPO's latent progress; sim_progress: 1 unless rl.sim_progress_noise degrades it)
            prog = rew.details.get("sim_progress")  # what rl.reward=sim_progress graded, already gathered
            prog = env_progress(batch) if prog is None else prog
            scal["reward/srpo_vs_env_progress_spearman"] = spearman(rew.total[fail], prog[fail])
    return scal
