"""``vla-rl deploy``: run a trained policy on a LeRobot ``Robot``, recording every episode as a LeRobotDataset.

    vla-rl deploy runs/smolvla_reach_one_cpu/policy --robot sims --task tabletop/reach_one --episodes 3 \\
        --fps 20 --max-episode-s 5 --joint-limits -1 1 --dataset runs/deploy_ds

Per control tick (``1 / fps`` seconds, the robot's rate; a tick that overruns is not made up):

    obs    = robot.get_observation()                  # {"<joint>": float, ..., "<camera>": uint8 [H, W, 3]}
    batch  = {"observation.state": [1, D] (the robot's float features, in its order),
              "observation.images.<policy camera>": [1, H, W, 3] (camera_map: policy camera -> robot camera),
              "task": [instruction]}
    a      = policy.select_action(batch)              # pops the action queue; a new chunk every n_action_steps ticks
    a      = clip(a, joint_limits.low, joint_limits.high)
    robot.send_action({name_i: a_i})                  # the robot's action_features order
    dataset.add_frame(observation + action + task)    # LeRobot's build_dataset_frame

An episode ends at ``max_episode_s`` (or ``max_steps``), or when the robot reports success (``robot.last_info``, the
simulated robot; a real robot's operator marks success instead). Ctrl-C (SIGINT) stops the loop: the robot is sent
``safe_action`` (zeros: hold still, for the delta-action robots here) and disconnected, the episode so far is saved
and the dataset finalized -- nothing is left half-written. Camera frames are stored as ``image`` features (exact
PNG bytes, no FFmpeg needed), so SRPO can score the episodes later from the dataset.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch


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


def clip_action(a: np.ndarray, limits: tuple[Sequence[float], Sequence[float]] | None) -> np.ndarray:
    """``a`` clipped to ``limits = (low[A], high[A])`` (scalars broadcast); ``None``: unchanged."""
    if limits is None:
        return a
    lo, hi = (np.broadcast_to(np.asarray(x, dtype=np.float32), a.shape) for x in limits)
    if np.any(lo > hi):
        raise ValueError(f"joint limits have low > high: low={lo.tolist()}, high={hi.tolist()}")
    return np.clip(a, lo, hi)


def observation_to_batch(obs: dict[str, Any], robot, cameras: Sequence[str], camera_map: dict[str, str], task: str) -> dict:
    """A robot observation as a policy batch of one (module docstring)."""
    from .policy import IMAGE_PREFIX, STATE_KEY

    feats = robot.observation_features
    joints = [k for k, v in feats.items() if v is float]
    batch: dict[str, Any] = {STATE_KEY: torch.tensor([[float(obs[k]) for k in joints]], dtype=torch.float32), "task": [task]}
    for cam in cameras:
        rc = camera_map.get(cam, cam)
        if rc not in obs:
            raise KeyError(f"policy camera {cam!r} maps to robot camera {rc!r}, which the robot does not have; "
                           f"its cameras: {sorted(k for k, v in feats.items() if isinstance(v, tuple))}")
        batch[IMAGE_PREFIX + cam] = torch.as_tensor(np.asarray(obs[rc], dtype=np.uint8))[None]
    return batch


def dataset_features(robot) -> dict:
    from lerobot.datasets.utils import hw_to_dataset_features

    return {**hw_to_dataset_features(robot.observation_features, "observation", use_video=False),
            **hw_to_dataset_features(robot.action_features, "action", use_video=False)}


def run_deploy(policy, robot, cfg: DeployConfig, dataset_root: str | Path | None = None, repo_id: str = "local/deploy") -> dict:
    """Run ``cfg.episodes`` episodes of ``policy`` on the connected-or-not ``robot`` (module docstring).

    Returns ``{"episodes": [{"steps", "seconds", "success", "clipped", "stopped"}], "dataset": path or None,
    "interrupted": bool}``."""
    from lerobot.datasets.utils import build_dataset_frame

    ds = None
    feats = dataset_features(robot)
    if dataset_root is not None:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset

        ds = LeRobotDataset.create(repo_id, int(round(cfg.fps)), feats, root=dataset_root, robot_type=robot.name,
                                   use_videos=False)
    names = list(robot.action_features)
    if cfg.joint_limits is not None and any(len(x) not in (1, len(names)) for x in cfg.joint_limits):
        raise ValueError(f"joint limits need 1 or {len(names)} values each ({names}); got {cfg.joint_limits}")
    policy.eval()
    dev = next(policy.parameters()).device
    summary: dict[str, Any] = {"episodes": [], "dataset": str(dataset_root) if dataset_root else None, "interrupted": False}
    if not robot.is_connected:
        robot.connect()
    period = 1.0 / cfg.fps
    try:
        for ep in range(cfg.episodes):
            if ep > 0 and hasattr(robot, "reset_episode"):
                robot.reset_episode(cfg.seed + ep)
            task = cfg.task or getattr(robot, "instruction", "")
            policy.reset()
            gen = torch.Generator(device="cpu").manual_seed(cfg.seed + ep)
            info = {"steps": 0, "seconds": 0.0, "success": False, "clipped": 0, "stopped": "max_episode_s"}
            summary["episodes"].append(info)
            t0 = time.perf_counter()
            try:
                while True:
                    tick = time.perf_counter()
                    if tick - t0 >= cfg.max_episode_s or (cfg.max_steps and info["steps"] >= cfg.max_steps):
                        info["stopped"] = "max_steps" if cfg.max_steps and info["steps"] >= cfg.max_steps else "max_episode_s"
                        break
                    obs = robot.get_observation()
                    batch = observation_to_batch(obs, robot, policy.cfg.cameras if policy.cfg.use_images else [],
                                                 cfg.camera_map, task)
                    raw = policy.select_action({k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in batch.items()},
                                               generator=gen)[0].float().cpu().numpy()
                    a = clip_action(raw, cfg.joint_limits)
                    info["clipped"] += int(np.any(a != raw))
                    sent = robot.send_action({n: float(v) for n, v in zip(names, a)})
                    if ds is not None:
                        frame = {**build_dataset_frame(feats, obs, "observation"), **build_dataset_frame(feats, sent, "action"),
                                 "task": task}
                        ds.add_frame(frame)
                    info["steps"] += 1
                    last = getattr(robot, "last_info", {})
                    if last.get("success"):
                        info["success"] = True
                        if cfg.stop_on_success:
                            info["stopped"] = "success"
                            break
                    if last.get("terminated") or last.get("truncated"):
                        info["stopped"] = "env_done"
                        break
                    if cfg.realtime:
                        time.sleep(max(0.0, period - (time.perf_counter() - tick)))
            finally:
                info["seconds"] = round(time.perf_counter() - t0, 3)
                if ds is not None and ds.episode_buffer is not None and ds.episode_buffer["size"] > 0:
                    ds.save_episode()
    except KeyboardInterrupt:
        summary["interrupted"] = True
        if summary["episodes"]:
            summary["episodes"][-1]["stopped"] = "interrupted"
    finally:
        if robot.is_connected:
            try:  # hold still, then release the hardware
                robot.send_action({n: 0.0 for n in names})
            finally:
                robot.disconnect()
        if ds is not None:
            ds.finalize()
    return summary


def add_parser(sub) -> None:
    d = sub.add_parser("deploy", help="run a trained policy on a LeRobot robot, recording each episode as a LeRobotDataset")
    d.add_argument("policy", help="a saved policy directory (LeRobot layout or a SmallVLA), e.g. runs/x/policy")
    d.add_argument("--robot", default="sims", help="a registered LeRobot robot type (sims: the simulated robot)")
    d.add_argument("--task", default="tabletop/reach_one", help="sims robot: the simulated task")
    d.add_argument("--image-size", type=int, default=32, help="sims robot: camera resolution")
    d.add_argument("--cameras", nargs="*", default=["agentview", "wrist"], help="sims robot: cameras")
    d.add_argument("--episodes", type=int, default=1)
    d.add_argument("--fps", type=float, default=20.0)
    d.add_argument("--max-episode-s", type=float, default=10.0)
    d.add_argument("--max-steps", type=int, default=0)
    d.add_argument("--joint-limits", type=float, nargs=2, metavar=("LOW", "HIGH"), help="clip every action to [LOW, HIGH]")
    d.add_argument("--dataset", help="record the episodes to this new LeRobotDataset directory")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--device", default="cpu")


def cmd_deploy(args: argparse.Namespace) -> int:
    try:
        from lerobot.robots.utils import make_robot_from_config  # noqa: F401
    except ImportError as e:
        print(f"error: vla-rl deploy needs lerobot (make lerobot, then .venv-lerobot/bin/vla-rl): {e}", file=sys.stderr)
        return 2
    from .policies import load_policy

    if args.dataset and Path(args.dataset).exists():
        print(f"error: --dataset {args.dataset} exists; episodes are recorded to a new directory", file=sys.stderr)
        return 2
    try:
        policy = load_policy(args.policy).to(args.device)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    robot = make_robot(args.robot, args.task, {"image_size": args.image_size, "cameras": tuple(args.cameras)}, args.seed,
                       Path(args.dataset or ".").resolve().parent / ".calibration")
    limits = ([args.joint_limits[0]], [args.joint_limits[1]]) if args.joint_limits else None
    cfg = DeployConfig(fps=args.fps, max_episode_s=args.max_episode_s, max_steps=args.max_steps, episodes=args.episodes,
                       joint_limits=limits, seed=args.seed)
    print(json.dumps(run_deploy(policy, robot, cfg, args.dataset)))
    return 0


def make_robot(kind: str, task: str, env_kwargs: dict, seed: int, calibration_dir: Path):
    """A LeRobot robot by its registered type through LeRobot's ``make_robot_from_config`` (``sims``: the simulated one)."""
    from lerobot.robots.config import RobotConfig
    from lerobot.robots.utils import make_robot_from_config

    if kind == "sims":
        import sims.lerobot_robot  # noqa: F401  (registers the "sims" robot config)
    cls = RobotConfig.get_choice_class(kind)
    kw = dict(task=task, env_kwargs=env_kwargs, init_seed=seed) if kind == "sims" else {}
    return make_robot_from_config(cls(calibration_dir=calibration_dir, **kw))
