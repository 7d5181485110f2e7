"""How far can SRPO's rule go with a *perfect* encoder? SRPO's progress value computed on simulator-state latents.

    python bench/diag_progress_ceiling.py --split test --seeds 2 --tasks reach_one,reach,push --groups 24 \
        --group-size 6

The bench (``bench/bench_progress.py``) measures learned and pretrained image encoders; this diagnostic replaces the
image encoder by the simulator's own state, so that what is left is the rule: SRPO's distance of a failure to the
batch's success centres (siiRL's ``compute_embodied_reward``: StandardScaler + DBSCAN on the successes, min-max over the
failures, :func:`rewards.srpo.srpo_progress`), with the reference rule ``task`` (SRPO's) or ``group`` (ours). The
failures and the expert references are the bench's, episode for episode (same base policy, states, noise seed: its
``rollouts``); every env is wrapped to record the state after reset and after every step, and the latents are those
states at the frames SRPO samples (``--num-frames``, the last one included), pooled as SRPO pools (``--pooling``).

Latents (per frame; m, the tabletop env's accessors):

- ``gripper`` ``[3]``: the grip point (proprioception: what a real robot knows of itself without a camera);
- ``scene`` ``[3 + 3 n + 2 g]``: the grip point, every object's position (blocks, or balls, in slot order) and the
  goal / bin centre where the task has one -- all a perfect object-centric image encoder could read off a frame,
  but not which object the instruction names;
- ``relation`` ``[3 (+ 2)]``: the named object minus the grip point (and, with a goal, the goal minus the named
  object's xy) -- the instruction-relevant relation, layout-invariant; what a frame-only encoder cannot know on a
  task with distractors (``reach``: 3 balls) and must infer from the scene on one without;
- ``relation_start``: ``relation`` over its length at the episode's first frame -- the relation relative to where
  the episode started, as the simulator's progress measures it (``1 - d / d0``), so that the distance to a success
  (``relation ~ 0``) is ``d / d0`` (PROGRESSOR-style: progress relative to the start).

No encoder is trained and nothing here is a shipped reward: these are upper bounds of what the rule can recover from
a latent that holds the state exactly. Spearman as in the bench: within each task over its failures, within each
group (mean over groups with >= 3 failures not all tied), and over all failures pooled (mean +- SE over seeds, and
the SE with the initial states' bootstrap spread, :func:`bench_progress.states_se`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

LATENTS = ("gripper", "scene", "relation", "relation_start")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_progress", Path(__file__).parent / "bench_progress.py")
    bp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bp)
    return bp


def state_latents(env) -> dict[str, np.ndarray]:
    """``gripper``, ``scene`` and ``relation`` (module docstring; ``relation_start`` is derived per trace, in
    :func:`pooled`) for the current state of a :class:`sims.tabletop.env.TabletopEnv`."""
    e = env.unwrapped
    lay, task = e.layout, e.task
    grip = np.asarray(e.grip_pos(), np.float64).copy()
    objs = [np.asarray(e.block_pos(i), np.float64) for i in range(task.n_blocks)]
    objs += [np.asarray(e.target_pos(i), np.float64) for i in range(task.n_targets)]
    goal = [np.asarray(g, np.float64) for g in (lay.goal, lay.bin) if g is not None]
    named = np.asarray(e.target_pos(lay.target) if task.n_targets else e.block_pos(lay.target), np.float64)
    rel = [named - grip]
    if task.name == "stack":
        rel.append(np.asarray(e.block_pos(lay.other), np.float64)[:2] - named[:2])
    elif goal:
        rel.append(goal[0][:2] - named[:2])
    return {"gripper": grip, "scene": np.concatenate([grip, *objs, *goal]), "relation": np.concatenate(rel)}


class StateTrace(gym.Wrapper):
    """Records :func:`state_latents` after ``reset`` and after every ``step`` (``self.trace``: one dict per frame,
    aligned with the episode's frames)."""

    def __init__(self, env):
        super().__init__(env)
        self.trace: list[dict[str, np.ndarray]] = []

    def reset(self, **kw):
        out = self.env.reset(**kw)
        self.trace = [state_latents(self.env)]
        return out

    def step(self, action):
        out = self.env.step(action)
        self.trace.append(state_latents(self.env))
        return out


def traced_pool():
    """The bench's tabletop :class:`vla_rl.rollout.EnvPool` (32 px agentview + wrist) whose envs are
    :class:`StateTrace` wrappers; ``pool.last``: the envs of the latest ``get`` (in the order of its specs)."""
    from vla_rl.rollout import EnvPool

    class TracedPool(EnvPool):  # (as bench_progress.measured_pool: the pool keeps the envs, get wraps them)
        last: list = []

        def get(self, name: str, n: int) -> list:
            self.last = [StateTrace(e) for e in super().get(name, n)]
            return self.last

        def discard(self, name: str, env) -> None:
            super().discard(name, env.env if isinstance(env, StateTrace) else env)

    return TracedPool({"image_size": 32, "cameras": ["agentview", "wrist"]}, "agentview")


def expert_trace(task: str, init_seed: int, max_steps: int) -> list[dict[str, np.ndarray]] | None:
    """The states of the bench's expert reference from ``init_seed`` (``record_expert_episodes(task, 1, init_seed,
    ..., hold_steps=0, noise=0.0)``: the first of states ``init_seed .. init_seed + 2`` where the noiseless expert
    succeeds, up to its first success); None when it succeeds on none (the bench then has no reference either)."""
    import sims

    env = StateTrace(sims.make(f"tabletop/{task}", image_size=32, cameras=("agentview",)))
    rng = np.random.default_rng([0, init_seed])  # noise 0: the expert's actions do not depend on it
    try:
        for s in range(init_seed, init_seed + 3):
            _, info = env.reset(seed=s, options={"init_seed": s})
            if info.get("success", False):
                continue  # the recorder keeps only episodes whose first success is after the first frame
            for _ in range(max_steps):
                _, _, term, trunc, info = env.step(np.asarray(env.unwrapped.expert_action(rng=rng, noise=0.0),
                                                              np.float32))
                if info.get("success", False):
                    return list(env.trace)
                if term or trunc:
                    break
    finally:
        env.close()
    return None


def reach_progress(trace: list[dict[str, np.ndarray]]) -> float:
    """The reach tasks' simulator progress (``sims.tabletop.tasks``: ``1 - d / d0``, clipped to [0, 1]) recomputed
    from a trace's first and last ``relation`` (the named ball minus the grip point): a check that the trace holds
    the episode's own states."""
    d0 = max(float(np.linalg.norm(trace[0]["relation"])), 1e-3)
    return float(np.clip(1.0 - np.linalg.norm(trace[-1]["relation"]) / d0, 0.0, 1.0))


def pooled(trace: list[dict[str, np.ndarray]], key: str, num_frames: int, pooling: str) -> np.ndarray:
    """SRPO's frame sampling (:func:`rewards.srpo.sample_frames`) and pooling on a state trace: ``[D']``."""
    from rewards.srpo import pool_frames, sample_frames

    x = torch.as_tensor(np.stack([t["relation" if key == "relation_start" else key] for t in trace]),
                        dtype=torch.float64)
    if key == "relation_start":
        x = x / max(float(torch.linalg.vector_norm(x[0])), 1e-3)
    return pool_frames(sample_frames(x, num_frames)[None], pooling)[0].numpy()


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(prog="diag_progress_ceiling.py", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=("val", "test"), default="test", help="the bench's initial states")
    p.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (the bench's policy noise seeds)")
    p.add_argument("--tasks", default="reach_one,reach,push", help="comma-separated tabletop tasks")
    p.add_argument("--groups", type=int, default=24, help="groups (initial states) per task")
    p.add_argument("--group-size", type=int, default=6, help="policy episodes per group")
    p.add_argument("--num-frames", type=int, default=6, help="SRPO frames per episode (the recipe's 6)")
    p.add_argument("--pooling", choices=("mean", "last", "mean_last", "concat"), default="last",
                   help="SRPO pooling of the sampled frames' latents")
    p.add_argument("--json-out", default=None, help="write the rows and the summary to this JSON file")
    a = p.parse_args(argv)
    bp = _bench()
    a.tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    bad = [t for t in a.tasks if t not in bp.TASKS]
    if bad or not a.tasks:
        p.error(f"--tasks {a.tasks}: expected tabletop tasks among {', '.join(bp.TASKS)}")
    if min(a.seeds, a.groups, a.num_frames) < 1 or a.group_size < 2:
        p.error(f"--seeds {a.seeds} / --groups {a.groups} / --num-frames {a.num_frames} / --group-size "
                f"{a.group_size}: expected >= 1, >= 1, >= 1 and >= 2")
    bp.bad_sizes(p, a)  # (was: a task named twice scored twice; 1e9 episodes or frames filled the memory)
    if a.json_out is not None:
        from grpo.preflight import check_not_in_a_checkpoint, check_writable_file

        try:
            check_writable_file(a.json_out, "--json-out")
            check_not_in_a_checkpoint(a.json_out, "--json-out")  # (was: written among a run's checkpoints)
        except ValueError as e:
            p.error(str(e))
    import vla_rl
    from rewards.srpo import SRPOConfig, srpo_progress
    from vla_rl.policy import SmallVLA, policy_config_from_dict

    torch.set_num_threads(1)
    t_start = time.time()
    meta = json.loads((Path(vla_rl.__file__).parent / "assets/tabletop_base/config.json").read_text())["policy"]
    meta["flow"]["eta"] = 0.7
    policy = SmallVLA.from_pretrained("builtin:tabletop_base", policy_config_from_dict(meta)).eval()
    states = [bp.SPLITS[a.split] + g for g in range(a.groups)]
    print(f"failures: the bench's ({a.split} states {states[0]}..{states[-1]}, {a.group_size} base-policy episodes "
          f"each, one expert reference per state); SRPO {a.num_frames} frames, pooling {a.pooling}", flush=True)
    rules = ("task", "group")
    rows = []
    pool = traced_pool()
    try:
        for seed in range(a.seeds):
            for task in a.tasks:
                eps = bp.rollouts(policy, task, states, a.group_size, seed, 32, pool)
                traces = [list(env.trace) for env in pool.last]
                refs = [t for t in (expert_trace(task, s, bp.MAX_STEPS[task]) for s in states) if t is not None]
                if len(traces) + len(refs) != len(eps) or any(len(tr) != len(e["video"])
                                                              for tr, e in zip(traces + refs, eps)):
                    raise RuntimeError(f"seed {seed} {task}: the state traces do not match the bench's episodes")
                fail = np.array([not e["success"] for e in eps])
                prog = np.array([e["progress"] for e in eps])
                if task in ("reach", "reach_one"):  # the traces are the episodes' states: their progress, recomputed
                    again = np.array([reach_progress(tr) for tr in traces + refs])
                    if not np.allclose(again[fail], prog[fail], atol=1e-5):
                        raise RuntimeError(f"seed {seed} {task}: the traced states' progress differs from the "
                                           "episodes' (the traces do not belong to these episodes)")
                groups = np.array([e["group"] for e in eps])
                succ = torch.as_tensor(~fail)
                line = []
                for key in LATENTS:
                    z = torch.as_tensor(np.stack([pooled(tr, key, a.num_frames, a.pooling) for tr in traces + refs]))
                    for rule in rules:
                        cfg = SRPOConfig(num_frames=a.num_frames, pooling=a.pooling, reference=rule)
                        val = srpo_progress(z, ["t"] * len(eps), succ, cfg, groups.tolist()).progress.numpy()
                        within = [bp.spearman(val[fail & (groups == g)], prog[fail & (groups == g)])
                                  for g in np.unique(groups)]
                        within = [w for w in within if np.isfinite(w)]
                        rows.append({"seed": seed, "task": task, "encoder": f"{key}/{rule}",
                                     "within_task": bp.spearman(val[fail], prog[fail]),
                                     "within_group": float(np.mean(within)) if within else float("nan"),
                                     "groups_scored": len(within), "failures": int(fail.sum()),
                                     "srpo_progress": val[fail].astype(float).tolist(),
                                     "sim_progress": prog[fail].tolist(), "groups": groups[fail].tolist()})
                        line.append(f"{key}/{rule} {rows[-1]['within_task']:+.2f}")
                print(f"seed {seed} {task}: {int(fail.sum())} failures (sim progress median "
                      f"{np.median(prog[fail]):.3f}, {int((prog[fail] == 0).sum())} at 0), {len(refs)} expert "
                      f"references; " + ", ".join(line), flush=True)
    finally:
        pool.close()
    a.encoders, a.reference = [f"{k}/{r}" for k in LATENTS for r in rules], "per row (latent/rule)"
    summary = bp.summarize(rows, a, a.seeds)
    print(bp.table(summary, a))
    print(f"wall {time.time() - t_start:.0f} s")
    if a.json_out is not None:
        Path(a.json_out).write_text(json.dumps({"args": vars(a), "rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
