"""``vla-rl``: train (SFT then GRPO) and evaluate the built-in VLA on ``sims`` tasks.

    vla-rl train configs/vla/tabletop_reach.yaml [key=value ...]      # resumes from the latest checkpoint
    vla-rl train configs/vla/tabletop_reach.yaml --dry-run            # resolved config + cost per iteration
    vla-rl eval runs/vla_reach [--episodes 32] [--video] [--device cpu]  # held-out success of the latest checkpoint

Devices: ``device=auto`` (the default: ``cuda`` if available, else ``cpu``), ``device=cpu``, ``device=cuda:1`` as a
training override; ``eval --device`` (default ``auto``) places the evaluated policy, whatever device the run trained on.

Scale-out: one process per device, ``torchrun --nproc_per_node 2 -m vla_rl.cli train cfg.yaml`` or ``accelerate
launch -m vla_rl.cli train cfg.yaml``; each rank rolls out its share of the episodes (vla_rl.trainer's docstring).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _setup_threads() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))


def cmd_train(args: argparse.Namespace) -> int:
    from grpo.config import ConfigError, dump_config, load_config

    from .trainer import VLARLConfig, VLARLTrainer, cost_per_iteration

    try:
        cfg = load_config(VLARLConfig, args.config, args.overrides)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(dump_config(cfg))
        cost = cost_per_iteration(cfg)
        print("per RL iteration (upper bounds): " + ", ".join(f"{k} {v}" for k, v in cost.items()))
        if cfg.policy.kind == "lerobot":
            from .policies.factory import checkpoint_memory

            print(f"policy: LeRobot {cfg.policy.type}; " + checkpoint_memory(cfg.policy, cfg.grpo.kl_coef > 0))
        print(f"SFT: {cfg.sft.steps} steps x batch {cfg.sft.batch_size} on {cfg.sft.demos_per_task} demos/task; "
              f"evaluation: {cfg.rl.eval_episodes} held-out episodes/task x {len(cfg.env.tasks)} task(s)")
        return 0
    if cfg.policy.kind == "lerobot":
        from .policies.lerobot import require_lerobot

        try:
            require_lerobot()
        except ImportError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    _setup_threads()
    tr = VLARLTrainer(cfg)  # under torchrun / accelerate launch: one rank each (see vla_rl.trainer's docstring)
    try:
        res = tr.train()
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    res.pop("policy", None)
    if tr.dist.is_main:
        print(json.dumps(res))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from grpo.checkpoint import load_checkpoint
    from grpo.config import ConfigError, load_config
    from grpo.device import resolve_device
    from grpo.metrics import MetricsLogger

    from .policy import SmallVLA, policy_config_from_dict
    from .rollout import EnvPool, evaluate, tile_videos
    from .tokenizer import WordTokenizer
    from .trainer import VLARLConfig

    _setup_threads()
    path = Path(args.checkpoint)
    if (path / "checkpoints").is_dir():
        path = path / "checkpoints"
    try:
        st = load_checkpoint(path)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import tempfile

    import yaml

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(st["config"], f)
    try:  # the device is this evaluation's, not the run's (a GPU run's checkpoint evaluates on a CPU machine)
        cfg = load_config(VLARLConfig, f.name, [f"device={args.device}"])
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        os.unlink(f.name)
    pcfg = policy_config_from_dict(st["policy_config"])
    if pcfg.kind == "builtin":
        policy = SmallVLA(pcfg, WordTokenizer(st["vocab"]))
    else:  # a LeRobot policy: rebuilt by the factory in the run's directory (its tiny backbone, if any, is there)
        from .policies import make_policy

        ck = Path(st["__path__"]).resolve()
        run_dir = next((p for p in [ck, *ck.parents] if (p / "checkpoints").is_dir()), Path(cfg.output_dir))
        policy = make_policy(pcfg, workdir=run_dir)
    policy.load_state_dict(st["model"])  # the checkpoint's CPU tensors
    policy.to(resolve_device(cfg.device))
    policy.set_mixed_precision(cfg.dist.mixed_precision)
    policy.eval()
    n = args.episodes or cfg.rl.eval_episodes
    seeds = [cfg.rl.eval_seed_offset + i for i in range(n)]
    pool = EnvPool(cfg.env.kwargs, cfg.env.video_camera)
    res = evaluate(policy, pool, cfg.env.tasks, seeds, cfg.env.max_episode_steps, record_frames=args.video)
    out = {"checkpoint": st["__path__"], "iteration": st["trainer"]["iteration"], "success_rate": res.success_rate,
           "mean_length": res.mean_length, "per_task": res.per_task, "episodes": len(res.episodes)}
    if args.video:
        logger = MetricsLogger(Path(cfg.output_dir) / "eval", tensorboard=False)
        out["video"] = str(logger.log_video(int(out["iteration"]), "rollouts/eval",
                                            tile_videos([e.frames for e in res.episodes[:4]]), fps=15))
        logger.close()
    pool.close()
    print(json.dumps(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vla-rl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="SFT on a few demos, then GRPO (per the config)")
    t.add_argument("config")
    t.add_argument("overrides", nargs="*", help="key=value overrides, e.g. rl.iterations=10")
    t.add_argument("--dry-run", action="store_true", help="print the resolved config and the cost per iteration")
    e = sub.add_parser("eval", help="evaluate the latest checkpoint of a run on held-out initial states")
    e.add_argument("checkpoint", help="a run directory, its checkpoints/ folder, or one step_* checkpoint")
    e.add_argument("--episodes", type=int, default=0, help="held-out episodes per task (default: the config's)")
    e.add_argument("--video", action="store_true", help="also write a video of the first episodes")
    e.add_argument("--device", default="auto", help="where the policy runs: auto (cuda if available), cpu, cuda, cuda:<i>")
    from .deploy import add_parser as add_deploy_parser

    add_deploy_parser(sub)  # vla-rl deploy: a policy on a LeRobot robot (vla_rl.deploy)
    args, extra = p.parse_known_args(argv)  # key=value overrides may follow --dry-run
    bad = [e for e in extra if e.startswith("-") or args.cmd != "train"]
    if bad:
        p.error(f"unrecognized arguments: {' '.join(bad)}")
    if args.cmd == "train":
        args.overrides = list(args.overrides) + extra
    if args.cmd == "deploy":
        from .deploy import cmd_deploy

        return cmd_deploy(args)
    return cmd_train(args) if args.cmd == "train" else cmd_eval(args)


if __name__ == "__main__":
    raise SystemExit(main())
