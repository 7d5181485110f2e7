"""``vla-rl deploy``: run a trained policy on a LeRobot ``Robot``, recording every episode as a LeRobotDataset.

    vla-rl deploy runs/smolvla_reach_one_cpu/policy --robot sims --task tabletop/reach_one --episodes 3 \\
        --fps 20 --max-episode-s 5 --joint-limits -1 1 --dataset runs/deploy_ds
    vla-rl deploy runs/x/policy --robot.type so100_follower --robot.port /dev/ttyACM0 --robot.id my_arm \\
        --robot.cameras "{front: {type: opencv, index_or_path: 0, width: 640, height: 480, fps: 30}}" \\
        --camera-map agentview=front --instruction "pick up the cube" --dataset runs/arm_ds

The robot is LeRobot's own flags (``--robot.type`` + ``--robot.<field>``, :mod:`vla_rl.robot_args`), checked against
its ``RobotConfig`` class before the policy loads; the policy's cameras, state and action sizes against the robot's
features before it connects.

Per control tick (``1 / fps`` seconds, the robot's rate; a tick that overruns is not made up):

    obs    = robot.get_observation()                  # {"<joint>": float, ..., "<camera>": uint8 [H, W, 3]}
    batch  = {"observation.state": [1, D] (the robot's float features, in its order),
              "observation.images.<policy camera>": [1, H, W, 3] (camera_map: policy camera -> robot camera),
              "task": [instruction]}
    if the action queue is empty:                     # a decision point: every n_action_steps ticks
        s = policy.sample_chunk(batch, stochastic, generator)   # actions [1, K, A], record, log-probs [1, S]
        queue = s.actions[0, :n_action_steps]          # (what the policy's select_action queues)
    a      = clip(queue.pop(0), joint_limits.low, joint_limits.high)
    robot.send_action({name_i: a_i})                  # the robot's action_features order
    frame  = observation + action + task (+ the rl.* sampling data, below)   # LeRobot's build_dataset_frame

``stochastic=False`` (deployment): the deterministic chunk (ODE / Gaussian mean), the same actions as the policy's
``select_action``. ``stochastic=True`` (the real-world RL loop, :mod:`vla_rl.robot_loop`): chunks sampled through
the flow SDE (:mod:`grpo.flow_sde`), and with ``rl`` tags given the episode's frames also carry what GRPO needs to
recompute the log-probs (:func:`sampling_features`): on a chunk's first frame ``rl.decision`` = True, the chunk's
record (``rl.record.<key>``: the denoising chain ``[T+1, K, A_max]`` and step mask for a flow head), its old
log-probs ``rl.old_logp [S]`` and stochastic-step mask ``rl.step_mask [S]``; on the other frames zeros; on every
frame ``rl.chunk`` (the chunk the action comes from) and the episode's tags ``rl.round``, ``rl.episode``,
``rl.group``, ``rl.init_seed``.

An episode ends at ``max_episode_s`` (or ``max_steps``), or when the robot reports success (``robot.last_info``, the
simulated robot). Then ``judge(info) -> bool`` (the operator's y/n, :mod:`vla_rl.robot_loop`) marks success, if given;
else the robot's own report does. Every frame has ``next.success`` (LeRobot's name): True on the last frame of a
successful episode. An episode's frames are written (``add_frame`` + ``save_episode``) when it ends, after the judge.

Ctrl-C (SIGINT) stops the loop: the robot is sent the hold-still action (:func:`hold_action`: its current joint
positions for an arm commanded in positions, as LeRobot's are; zeros for the delta-action sims robot) and
disconnected, the dataset finalized -- nothing is left half-written. Plain deploy keeps the interrupted
episode's finished ticks; an RL episode (``rl`` given) is dropped, as it was neither finished nor judged. Camera
frames are stored as ``image`` features (exact PNG bytes, no FFmpeg needed), so SRPO can score the episodes later
from the dataset and the RL update sees the very pixels the policy saw.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from grpo.config import MAX_SEED

SUCCESS_KEY = "next.success"  # per frame: True on the last frame of a successful episode (LeRobot's pusht name)
EPISODE_TAGS = ("rl.round", "rl.episode", "rl.group", "rl.init_seed")  # per-episode int64 tags of RL episodes
RECORD_PREFIX = "rl.record."
TORCH_TO_FEATURE = {torch.float32: "float32", torch.float64: "float64", torch.bool: "bool", torch.int64: "int64",
                    torch.int32: "int32"}


@dataclass
class DeployConfig:
    fps: float = 20.0  # control ticks per second (the robot's rate)
    max_episode_s: float = 10.0  # wall-clock limit of one episode
    max_steps: int = 0  # tick limit of one episode (0: only max_episode_s)
    episodes: int = 1  # episodes to run
    joint_limits: tuple[list[float], list[float]] | None = None  # (low[A], high[A]) actions are clipped to; None: none
    camera_map: dict[str, str] = field(default_factory=dict)  # policy camera -> robot camera (default: same name)
    task: str = ""  # instruction given to the policy (empty: the robot's own, e.g. the simulated task's)
    stop_on_success: bool = True  # end an episode when the robot reports success
    seed: int = 0  # the policy's noise (deterministic chunks are drawn from it) and the sim robot's initial states
    realtime: bool = True  # sleep to hold fps (False: as fast as possible, for tests)
    stochastic: bool = False  # sample chunks with the policy's exploration noise (flow SDE)
                              # instead of deterministically


def clip_action(a: np.ndarray, limits: tuple[Sequence[float], Sequence[float]] | None) -> np.ndarray:
    """``a`` clipped to ``limits = (low[A], high[A])`` (scalars broadcast); ``None``: unchanged."""
    if limits is None:
        return a
    lo, hi = (np.broadcast_to(np.asarray(x, dtype=np.float32), a.shape) for x in limits)
    if np.any(lo > hi):
        raise ValueError(f"joint limits have low > high: low={lo.tolist()}, high={hi.tolist()}")
    return np.clip(a, lo, hi)


def check_joint_limits(limits, names: Sequence[str]) -> None:
    """``limits`` is None or ``(low, high)`` with 1 or ``len(names)`` values each, low <= high (else ValueError)."""
    if limits is None:
        return
    if len(limits) != 2 or any(len(x) not in (1, len(names)) for x in limits):
        raise ValueError(f"joint limits need [low, high] with 1 or {len(names)} values each ({names}); got {limits}")
    clip_action(np.zeros(len(names), np.float32), limits)  # low > high raises


def robot_joints(robot) -> list[str]:
    """The robot's float observation features (its proprio state), in its order."""
    return [k for k, v in robot.observation_features.items() if v is float]


def observation_to_batch(obs: dict[str, Any], robot, cameras: Sequence[str], camera_map: dict[str, str],
                         task: str) -> dict:
    """A robot observation as a policy batch of one (module docstring)."""
    from .policy import IMAGE_PREFIX, STATE_KEY

    feats = robot.observation_features
    batch: dict[str, Any] = {STATE_KEY: torch.tensor([[float(obs[k]) for k in robot_joints(robot)]],
                                                     dtype=torch.float32),
                             "task": [task]}
    for cam in cameras:
        rc = camera_map.get(cam, cam)
        if rc not in obs:
            raise KeyError(f"policy camera {cam!r} maps to robot camera {rc!r}, which the robot does not have; "
                           f"its cameras: {sorted(k for k, v in feats.items() if isinstance(v, tuple))}")
        batch[IMAGE_PREFIX + cam] = torch.as_tensor(np.asarray(obs[rc], dtype=np.uint8))[None]
    return batch


def dataset_features(robot) -> dict:
    """The robot's observation and action features as LeRobotDataset features (cameras as images) + ``next.success``."""
    from lerobot.datasets.utils import hw_to_dataset_features

    return {**hw_to_dataset_features(robot.observation_features, "observation", use_video=False),
            **hw_to_dataset_features(robot.action_features, "action", use_video=False),
            SUCCESS_KEY: {"dtype": "bool", "shape": (1,), "names": None}}


def _feature(t: torch.Tensor) -> dict:
    """The LeRobot feature of one row of ``t`` (``[B, ...]``)."""
    if t.dtype not in TORCH_TO_FEATURE:
        raise ValueError(f"cannot record a {t.dtype} sampling tensor; expected one of {list(TORCH_TO_FEATURE)}")
    return {"dtype": TORCH_TO_FEATURE[t.dtype], "shape": tuple(t.shape[1:]) or (1,), "names": None}


def sampling_features(sample) -> dict:
    """The ``rl.*`` per-frame features that hold a chunk's sampling data (module docstring), shaped from one
    ``HeadSample`` of the policy (``sample_chunk`` on a batch of one)."""
    one = {"dtype": "int64", "shape": (1,), "names": None}
    return {**{k: dict(one) for k in EPISODE_TAGS}, "rl.chunk": dict(one),
            "rl.decision": {"dtype": "bool", "shape": (1,), "names": None},
            "rl.old_logp": _feature(sample.logp), "rl.step_mask": _feature(sample.step_mask),
            **{RECORD_PREFIX + k: _feature(v) for k, v in sample.record.items()}}


def _sampling_values(sample, feats: dict) -> dict[str, np.ndarray]:
    """Row 0 of ``sample`` as the ``rl.*`` frame values of a chunk's first frame."""
    vals = {"rl.old_logp": sample.logp, "rl.step_mask": sample.step_mask,
            **{RECORD_PREFIX + k: v for k, v in sample.record.items()}}
    return {k: v[0].detach().cpu().numpy().reshape(feats[k]["shape"]) for k, v in vals.items()}


def _zeros_like_values(vals: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.zeros_like(v) for k, v in vals.items()}


def run_episode(policy, robot, cfg: DeployConfig, task: str, generator: torch.Generator, ds=None,
                rl: dict[str, int] | None = None, judge: Callable[[dict], bool] | None = None,
                log: list[dict] | None = None) -> dict:
    """One episode of ``policy`` on the connected ``robot`` (module docstring), written to ``ds`` (an open
    LeRobotDataset, or None) when it ends.

    ``rl``: the episode's tags (``round``, ``episode``, ``group``, ``init_seed``): record the sampling data (``ds`` must
    have :func:`sampling_features`). ``judge(info) -> bool``: marks success after the episode (else the robot's report).
    Returns ``info = {"steps", "seconds", "success", "robot_success", "clipped", "stopped"}`` (also appended to ``log``
    at the start, so a caller sees it when the episode raises). A KeyboardInterrupt (or any error) is re-raised after
    the finished ticks are saved (plain deploy, success False) or dropped (``rl``: an unjudged episode)."""
    from lerobot.datasets.utils import build_dataset_frame

    names = list(robot.action_features)
    dev = next(policy.parameters()).device
    cams = policy.cfg.cameras if policy.cfg.use_images else []
    n_exec = int(policy.cfg.n_action_steps)
    feats = ds.features if ds is not None else None
    info: dict[str, Any] = {"steps": 0, "seconds": 0.0, "success": False, "robot_success": False, "clipped": 0,
                            "stopped": "max_episode_s"}
    if log is not None:
        log.append(info)
    frames: list[dict] = []
    queue: list[np.ndarray] = []
    chunk, rl_vals, blank = -1, {}, {}
    policy.reset()
    period = 1.0 / cfg.fps
    t0 = time.perf_counter()
    completed = False
    try:
        while True:
            tick = time.perf_counter()
            if tick - t0 >= cfg.max_episode_s or (cfg.max_steps and info["steps"] >= cfg.max_steps):
                info["stopped"] = "max_steps" if cfg.max_steps and info["steps"] >= cfg.max_steps else "max_episode_s"
                break
            obs = robot.get_observation()
            decision = not queue
            if decision:  # a new chunk: what select_action does, keeping the sample's record
                batch = observation_to_batch(obs, robot, cams, cfg.camera_map, task)
                sample = policy.sample_chunk({k: v.to(dev) if isinstance(v, torch.Tensor) else v
                                              for k, v in batch.items()},
                                             stochastic=cfg.stochastic, generator=generator)
                queue = list(sample.actions[0, :n_exec].float().cpu().numpy())
                chunk += 1
                if rl is not None:
                    rl_vals = _sampling_values(sample, feats)
                    blank = _zeros_like_values(rl_vals)
            raw = queue.pop(0)
            a = clip_action(raw, cfg.joint_limits)
            info["clipped"] += int(np.any(a != raw))
            sent = robot.send_action({n: float(v) for n, v in zip(names, a)})
            if ds is not None:
                frame = {**build_dataset_frame(feats, obs, "observation"), **build_dataset_frame(feats, sent, "action"),
                         SUCCESS_KEY: np.array([False]), "task": task}
                if rl is not None:
                    frame.update(rl_vals if decision else blank)
                    frame.update({"rl.chunk": np.array([chunk]), "rl.decision": np.array([decision]),
                                  **{f"rl.{k}": np.array([int(v)]) for k, v in rl.items()}})
                frames.append(frame)
            info["steps"] += 1
            last = getattr(robot, "last_info", {})
            if last.get("success"):
                info["robot_success"] = True
                if cfg.stop_on_success:
                    info["stopped"] = "success"
                    break
            if last.get("terminated") or last.get("truncated"):
                info["stopped"] = "env_done"
                break
            if cfg.realtime:
                time.sleep(max(0.0, period - (time.perf_counter() - tick)))
        completed = True
    except KeyboardInterrupt:
        info["stopped"] = "interrupted"
        raise
    finally:
        info["seconds"] = round(time.perf_counter() - t0, 3)
        if completed:  # (a judge that raises, e.g. the operator's input closed, drops the episode)
            info["success"] = bool(judge(dict(info)) if judge is not None else info["robot_success"])
        if ds is not None and frames and (completed or rl is None):
            frames[-1][SUCCESS_KEY] = np.array([info["success"]])
            for f in frames:
                ds.add_frame(f)
            ds.save_episode()
    return info


def create_dataset(root: str | Path, robot, fps: float, repo_id: str = "local/deploy", extra: dict | None = None):
    """A new LeRobotDataset at ``root`` with the robot's features (+ ``extra`` features); images, not videos."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset.create(repo_id, int(round(fps)), {**dataset_features(robot), **(extra or {})}, root=root,
                                 robot_type=robot.name, use_videos=False)


def run_deploy(policy, robot, cfg: DeployConfig, dataset_root: str | Path | None = None,
               repo_id: str = "local/deploy") -> dict:
    """Run ``cfg.episodes`` episodes of ``policy`` on the connected-or-not ``robot`` (module docstring).

    Returns ``{"episodes": [{"steps", "seconds", "success", "robot_success", "clipped", "stopped"}], "dataset": path
    or None, "interrupted": bool}``."""
    names = list(robot.action_features)
    check_joint_limits(cfg.joint_limits, names)
    connect_robot(robot)  # (first: a robot that cannot be reached leaves no dataset behind)
    try:
        ds = create_dataset(dataset_root, robot, cfg.fps, repo_id) if dataset_root is not None else None
    except BaseException:
        safe_stop(robot, names)
        raise
    policy.eval()
    summary: dict[str, Any] = {"episodes": [], "dataset": str(dataset_root) if dataset_root else None,
                               "interrupted": False}
    try:
        for ep in range(cfg.episodes):
            if ep > 0 and hasattr(robot, "reset_episode"):
                robot.reset_episode(cfg.seed + ep)
            task = cfg.task or getattr(robot, "instruction", "")
            gen = torch.Generator(device="cpu").manual_seed(cfg.seed + ep)
            run_episode(policy, robot, cfg, task, gen, ds, log=summary["episodes"])
    except KeyboardInterrupt:
        summary["interrupted"] = True
    finally:
        safe_stop(robot, names)
        if ds is not None:
            ds.finalize()
    return summary


def connect_robot(robot) -> None:
    """Connect ``robot`` unless it is; one that cannot be reached (a wrong ``--robot.port``, an unplugged camera:
    LeRobot raises ``ConnectionError`` / ``OSError``) is one ValueError line naming the robot and LeRobot's reason."""
    if robot.is_connected:
        return
    try:
        robot.connect()
    except OSError as e:  # (ConnectionError, TimeoutError, a serial port's own errors)
        raise ValueError(f"cannot connect the {robot.name} robot ({type(robot.config).__name__}): "
                         f"{' '.join(str(e).split())}") from None


def hold_action(robot, names: Sequence[str]) -> dict[str, float] | None:
    """The action that holds ``robot`` still. A robot commanded in absolute positions -- every action name is also a
    float observation, as LeRobot's arms name both ``"<motor>.pos"`` -- holds at its current positions (read now;
    None when they cannot be read: then nothing is sent). Any other (the sims robot: deltas) holds with zeros."""
    feats = robot.observation_features
    if names and all(feats.get(n) is float for n in names):
        try:
            obs = robot.get_observation()
            return {n: float(obs[n]) for n in names}
        except Exception:  # noqa: BLE001 - stopping: a failed read must not keep the robot connected
            return None
    return {n: 0.0 for n in names}


def safe_stop(robot, names: Sequence[str]) -> None:
    """Send the hold-still action (:func:`hold_action`) and disconnect, if connected."""
    if robot.is_connected:
        try:  # hold still, then release the hardware
            hold = hold_action(robot, names)
            if hold is not None:
                robot.send_action(hold)
        finally:
            robot.disconnect()


def add_parser(sub) -> None:
    d = sub.add_parser("deploy", help="run a trained policy on a LeRobot robot, recording each episode as a "
                                      "LeRobotDataset",
                       epilog="The robot, in LeRobot's own flags (lerobot-record's): --robot.type TYPE and one "
                       "--robot.FIELD VALUE per field of its RobotConfig, e.g. --robot.type so100_follower "
                       "--robot.port /dev/ttyACM0 --robot.id my_arm --robot.cameras \"{front: {type: opencv, "
                       "index_or_path: 0, width: 640, height: 480, fps: 30}}\". Checked against LeRobot's config class "
                       "before the policy loads or any hardware is touched. Default: --robot.type sims (the simulated "
                       "robot).")
    d.add_argument("policy", help="a saved policy directory (LeRobot layout or the built-in one), e.g. runs/x/policy")
    d.add_argument("--robot", default=None, metavar="TYPE", help="the same as --robot.type TYPE (the older spelling)")
    d.add_argument("--instruction", default="", help="the instruction given to the policy (needed for a real robot; "
                   "sims: default the task's own)")
    d.add_argument("--camera-map", nargs="*", default=[], metavar="POLICY=ROBOT",
                   help="policy camera -> robot camera, e.g. agentview=front wrist=wrist (default: the same name)")
    d.add_argument("--task", default="tabletop/reach_one", help="sims robot: the simulated task (= --robot.task)")
    d.add_argument("--image-size", type=int, default=32, help="sims robot: camera resolution")
    d.add_argument("--cameras", nargs="*", default=["agentview", "wrist"], help="sims robot: cameras")
    d.add_argument("--episodes", type=int, default=1, help="episodes to run")
    d.add_argument("--fps", type=float, default=20.0, help="control rate: one action every 1/fps seconds")
    d.add_argument("--max-episode-s", type=float, default=10.0, help="an episode stops after this many seconds")
    d.add_argument("--max-steps", type=int, default=0, help="an episode stops after this many actions (0: no limit)")
    d.add_argument("--joint-limits", type=float, nargs=2, metavar=("LOW", "HIGH"),
                   help="clip every action to [LOW, HIGH]")
    d.add_argument("--dataset", help="record the episodes to this new LeRobotDataset directory")
    d.add_argument("--seed", type=int, default=0, help="seeds the policy's noise and the sims robot's initial states")
    d.add_argument("--device", default="cpu", help="the policy's device: cpu, cuda, cuda:<i>")
    d.add_argument("--dry-run", action="store_true", help="check the flags, build the robot from its config (opening "
                   "no port or camera), print its LeRobot config and features as JSON, and exit; the policy is not "
                   "loaded")


def parse_camera_map(items: Sequence[str], key: str = "--camera-map") -> dict[str, str]:
    """``["agentview=front", ...]`` -> ``{"agentview": "front"}`` (each item ``POLICY=ROBOT``, names non-empty)."""
    out: dict[str, str] = {}
    for it in items:
        pol, eq, rob = it.partition("=")
        if not (eq and pol and rob):
            raise ValueError(f"{key} {it!r}: expected POLICY_CAMERA=ROBOT_CAMERA, e.g. agentview=front")
        out[pol] = rob
    return out


def check_policy_fits_robot(policy, robot, camera_map: dict[str, str], hint: str = "--camera-map {c}=<robot camera>"
                            ) -> None:
    """Before the robot connects: every camera the policy reads maps to a camera of the robot (``camera_map``),
    and the robot's float observations / actions have the policy's state / action sizes (where the policy states
    them). From the robot's features, which a LeRobot robot derives from its config without hardware. ``hint``: how
    to map a camera, ``{c}`` the policy's camera."""
    feats = robot.observation_features
    cams = sorted(k for k, v in feats.items() if isinstance(v, tuple))
    for c in (policy.cfg.cameras if policy.cfg.use_images else []):
        rc = camera_map.get(c, c)
        if rc not in cams:
            raise ValueError(f"the policy reads camera {c!r}, mapped to robot camera {rc!r}, which the {robot.name} "
                             f"robot does not have; its cameras: {cams or 'none'} (map it: {hint.format(c=c)})")
    n_state, n_act = len(robot_joints(robot)), len(robot.action_features)
    want_s, want_a = int(getattr(policy.cfg, "state_dim", 0)), int(getattr(policy.cfg, "action_dim", 0))
    if want_a and want_a != n_act:
        raise ValueError(f"the policy acts in {want_a} dimensions, the {robot.name} robot takes {n_act} "
                         f"({list(robot.action_features)})")
    if want_s and getattr(policy.cfg, "use_state", True) and want_s != n_state:
        raise ValueError(f"the policy reads a state of {want_s} values, the {robot.name} robot gives {n_state} "
                         f"({robot_joints(robot)})")


def cmd_deploy(args: argparse.Namespace) -> int:
    import lerobot.robots  # noqa: F401  (first: without lerobot, grpo.cli.run_command's one line names make lerobot)

    from grpo.preflight import check_flags

    from .policies import load_policy
    from .robot_args import parse_flag_values, robot_fields

    if args.dataset and Path(args.dataset).exists():
        raise ValueError(f"--dataset {args.dataset} exists; episodes are recorded to a new directory")
    check_flags(("--episodes", args.episodes, args.episodes >= 1, ">= 1"),
                ("--fps", args.fps, 0 < args.fps < math.inf, "a finite rate > 0"),
                ("--max-episode-s", args.max_episode_s, 0 < args.max_episode_s < math.inf, "finite > 0 seconds"),
                ("--max-steps", args.max_steps, args.max_steps >= 0, ">= 0 (0: no step limit)"),
                ("--image-size", args.image_size, args.image_size >= 1, ">= 1"),
                ("--seed", args.seed, 0 <= args.seed <= MAX_SEED, f"in [0, {MAX_SEED}]"))
    if args.joint_limits and not (all(map(math.isfinite, args.joint_limits))
                                  and args.joint_limits[0] <= args.joint_limits[1]):
        raise ValueError(f"--joint-limits {args.joint_limits[0]} {args.joint_limits[1]}: expected finite LOW <= HIGH")
    if not str(args.policy).strip():  # (Path("") is ".": it would be searched for a policy)
        raise ValueError("policy is empty (''); expected a saved policy directory, e.g. runs/x/policy")
    camera_map = parse_camera_map(args.camera_map)
    kind, raw = robot_fields(args.robot_flags, args.robot)
    kind = kind or "sims"
    from grpo.device import resolve_device

    resolve_device(args.device)  # a malformed name, or CUDA asked for where there is none: one line
    from lerobot.robots.utils import make_robot_from_config

    # the sims robot calibrates nothing, but LeRobot's Robot makes its calibration_dir: a temporary one
    with tempfile.TemporaryDirectory(prefix="vla-rl-sims-") if kind == "sims" else contextlib.nullcontext() as calib:
        rcfg = robot_config_of(kind, args.task, {"image_size": args.image_size, "cameras": tuple(args.cameras)},
                               args.seed, Path(calib) if calib else None, parse_flag_values(raw), flagged=list(raw),
                               type_key="--robot.type" if any(k == "type" for k, _ in args.robot_flags) else "--robot")
        if kind == "sims":
            import sims

            if rcfg.task not in sims.list_tasks():
                key = "--robot.task" if "task" in raw else "--task"
                raise ValueError(f"{key}={rcfg.task!r} is not a sims task; e.g. tabletop/reach_one, "
                                 "tabletop/pick_place")
        elif not args.instruction:
            raise ValueError(f"--instruction is empty: a {kind} robot has no instruction of its own; give the one the "
                             "policy was trained for, e.g. --instruction 'pick up the cube'")
        robot = make_robot_from_config(rcfg)  # (opens nothing: connect() does, in run_deploy)
    if args.dataset:
        from grpo.preflight import check_writable_dir

        check_writable_dir(args.dataset, "--dataset")
    if args.dry_run:  # the robot LeRobot would drive, from its config alone: no policy, no port, no camera opened
        import draccus

        feats = {k: "float" if v is float else list(v) for k, v in robot.observation_features.items()}
        print(json.dumps({"robot": draccus.encode(rcfg), "robot_class": type(robot).__name__,
                          "observation_features": feats, "action_features": list(robot.action_features)}, default=str))
        return 0
    policy = load_policy(args.policy).to(args.device)  # a missing / unreadable policy: run_command's one line
    check_policy_fits_robot(policy, robot, camera_map)
    limits = ([args.joint_limits[0]], [args.joint_limits[1]]) if args.joint_limits else None
    cfg = DeployConfig(fps=args.fps, max_episode_s=args.max_episode_s, max_steps=args.max_steps, episodes=args.episodes,
                       joint_limits=limits, camera_map=camera_map, task=args.instruction, seed=args.seed)
    print(json.dumps(run_deploy(policy, robot, cfg, args.dataset)))
    return 0


def make_robot(kind: str, task: str, env_kwargs: dict, seed: int, calibration_dir: Path | None,
               extra: dict | None = None,
               flagged=(), where: str = "--robot.", type_key: str = "--robot.type"):
    """A LeRobot robot by its registered type through LeRobot's ``make_robot_from_config`` (``sims``: the simulated one
    over ``task`` / ``env_kwargs`` / ``seed``, calibration files under ``calibration_dir``); ``extra``: other fields of
    its ``RobotConfig`` (a real arm's port, id, cameras), checked by :func:`vla_rl.robot_args.robot_config`
    (``flagged``,
    ``where``, ``type_key``: how its errors name them). A real arm's ``calibration_dir`` stays LeRobot's default (where
    ``lerobot-calibrate`` wrote it) unless ``extra`` sets it. Constructing the robot opens no port or camera."""
    from lerobot.robots.utils import make_robot_from_config

    return make_robot_from_config(robot_config_of(kind, task, env_kwargs, seed, calibration_dir, extra, flagged, where,
                                                  type_key))


def robot_config_of(kind: str, task: str, env_kwargs: dict, seed: int, calibration_dir: Path | None,
                    extra: dict | None = None, flagged=(), where: str = "--robot.", type_key: str = "--robot.type"):
    """The ``RobotConfig`` :func:`make_robot` builds (no hardware): ``sims`` gets ``task``, ``env_kwargs``, ``seed`` and
    ``calibration_dir`` as defaults that ``extra`` may override; a real arm only ``extra``."""
    from .robot_args import robot_config

    values = dict(extra or {})
    if kind == "sims":
        values = {"task": task, "env_kwargs": env_kwargs, "init_seed": seed,
                  **({"calibration_dir": calibration_dir} if calibration_dir is not None else {}), **values}
    return robot_config(kind, values, flagged, where, type_key)
