"""``vla-rl``: train (SFT then GRPO) and evaluate the built-in VLA on ``sims`` tasks; the World-VLA-Loop; demos.

    vla-rl train configs/vla/tabletop_reach.yaml [key=value ...]      # resumes from the latest checkpoint
    vla-rl train configs/vla/tabletop_reach.yaml --dry-run            # resolved config + cost per iteration
    vla-rl train configs/vla/smolvla_reach_one.yaml --plan           # memory / FLOPs / s/iter at full size (vla_rl.plan)
    vla-rl eval runs/vla_reach [--episodes 32] [--video] [--device cpu]  # held-out success of the latest checkpoint
    vla-rl loop configs/world_models/loop_reach_one.yaml [key=value ...] [--dry-run | --plan]   # World-VLA-Loop (vla_rl.wm_loop)
    vla-rl record-demos tabletop/pick_place 50 demos/pick_place.hdf5 [--noise 0.1 ...]  # scripted-expert HDF5 demos
    vla-rl robot-loop configs/robot/loop_sims.yaml [key=value ...]   # real-world RL on a LeRobot robot (make lerobot)
    vla-rl libero-demos OUT.hdf5 LIBERO/datasets/libero_spatial/*_demo.hdf5 --suite libero_spatial  # LIBERO's demos
    vla-rl fit-encoder configs/vla/fit_progress_encoder.yaml [key=value ...]  # SRPO's progress encoder (srpo.encoder=progress)
    vla-rl serve-reward rewards.success:success_reward --port 8000   # a reward over HTTP (rl.reward=http://127.0.0.1:8000)

Bad input (an unknown config key, a missing file, a bad value) stops at start with one line on stderr and exit code 2.

Devices: ``device=auto`` (the default: ``cuda`` if available, else ``cpu``), ``device=cpu``, ``device=cuda:1`` as a
training override; ``eval --device`` (default ``auto``) places the evaluated policy, whatever device the run trained on.

Scale-out: one process per device, ``torchrun --nproc_per_node 2 -m vla_rl.cli train cfg.yaml`` or ``accelerate
launch -m vla_rl.cli train cfg.yaml``; each rank rolls out its share of the episodes (vla_rl.trainer's docstring).
"""  # noqa: E501  (printed by vla-rl --help as written)

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from pathlib import Path

from grpo.cli import ArgumentParser, add_config_command, omp_threads, parse_args, run_command
from grpo.config import MAX_EPISODES, MAX_SEED
from grpo.distributed import end_of_job
from grpo.preflight import (
    PLAN_FLAGS,
    check_flags,
    check_hdf5_demo_file,
    check_new_output,
    check_not_in_a_checkpoint,
    check_plan_only,
    check_writable_dir,
    check_writable_file,
    quiet_third_party_warnings,
)


def _setup_threads() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(omp_threads(1))


def cmd_train(args: argparse.Namespace) -> int:
    from grpo.config import ConfigError, dump_config, load_config

    from .rollout import cost_per_iteration
    from .trainer import VLARLConfig, VLARLTrainer

    check_plan_only(args, {**PLAN_FLAGS, "peak_tflops": None})  # --gpus etc. without --plan: refused
    try:
        cfg = load_config(VLARLConfig, args.config, args.overrides)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from .preflight import check_vla_inputs

    check_vla_inputs(cfg, writes=not (args.dry_run or args.plan))  # before any env, model or file is made
    if args.plan:  # the full-size policy on the meta device / fake tensors (vla_rl.plan)
        from .plan import plan_text

        print(plan_text(cfg, False, args.gpus, args.gpu_mem, args.peak_tflops, args.mfu))
        return 0
    if args.dry_run:
        print(dump_config(cfg))
        cost = cost_per_iteration(cfg)
        print("per RL iteration (upper bounds): " + ", ".join(f"{k} {v}" for k, v in cost.items()))
        if cfg.policy.kind == "lerobot":
            from .policies.factory import checkpoint_memory

            print(f"policy: LeRobot {cfg.policy.type}; " + checkpoint_memory(cfg.policy, cfg.grpo.kl_coef > 0))
        print(f"SFT: {cfg.sft.steps} steps x batch {cfg.sft.batch_size} on {cfg.sft.demos_per_task} demos/task; "
              f"evaluation: {cfg.rl.eval_episodes} held-out episodes/task x {len(cfg.env.tasks)} task(s); "
              + cfg.rl.split_line())
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
    from grpo.monitors import RewardHackingError
    from grpo.onpolicy import OnPolicyError

    try:
        res = tr.train()
    except (OnPolicyError, RewardHackingError) as e:  # a run stopped by a check: one line, exit 1
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    res.pop("policy", None)
    if res.get("error"):  # a reward server stayed down: the checkpoint is saved, a rerun resumes
        if tr.dist.is_main:
            print(f"error: {res['error']} (checkpoint of iteration {res['iterations']} saved; rerun the same command "
                  "to resume)", file=sys.stderr)
        return 1
    if tr.dist.is_main:
        print(json.dumps(res))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from grpo.checkpoint import load_checkpoint
    from grpo.config import ConfigError, build_config
    from grpo.device import resolve_device
    from grpo.metrics import MetricsLogger

    from .policy import policy_config_from_dict
    from .rollout import EnvPool, evaluate, tile_videos
    from .trainer import VLARLConfig

    _setup_threads()
    if not 0 <= args.episodes <= MAX_EPISODES:
        raise ValueError(f"--episodes={args.episodes}: expected 1..{MAX_EPISODES} (or 0: the config's "
                         "rl.eval_episodes)")
    from grpo.preflight import resolve_checkpoint

    st = load_checkpoint(resolve_checkpoint(args.checkpoint))  # a truncated / corrupt checkpoint: one line naming it
    if "policy_config" not in st:  # e.g. a diffusion-rl or vla-rl loop checkpoint
        other = " (a diffusion-rl checkpoint: use diffusion-rl eval)" if "trainable" in st else ""
        raise ValueError(f"{st['__path__']} is not a vla-rl train checkpoint (it holds no policy_config){other}")
    try:  # the device is this evaluation's, not the run's (a GPU run's checkpoint evaluates on a CPU machine);
        # the checkpoint's config is the full resolved one, so its inactive keys are not refused (build_config)
        cfg = build_config(VLARLConfig, {**st["config"], "device": args.device}, source=str(st["__path__"]))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from .preflight import check_env_options

    check_env_options(cfg.env.tasks, cfg.env.kwargs, "env.kwargs")  # before the policy or any env is built
    from .policies import make_policy

    # the policy rebuilt by the factory with the checkpoint's vocabulary, in the run's directory (a LeRobot policy's
    # tiny backbone, if any, is there)
    ck = Path(st["__path__"]).resolve()
    run_dir = next((p for p in [ck, *ck.parents] if (p / "checkpoints").is_dir()), Path(cfg.output_dir))
    if args.video:  # where the video goes, before the episodes run (was: "File exists" after the evaluation)
        check_writable_dir(run_dir / "eval", "--video (RUN/eval)")
    policy = make_policy(policy_config_from_dict(st["policy_config"]), workdir=run_dir, vocabulary=st.get("vocab"))
    from .policies.base import load_checkpoint_weights

    load_checkpoint_weights(policy, st["model"], st["__path__"])  # the checkpoint's CPU tensors
    policy.to(resolve_device(cfg.device))
    policy.set_mixed_precision(cfg.dist.mixed_precision)
    policy.eval()
    n = args.episodes or cfg.rl.eval_episodes
    seeds = cfg.rl.heldout_seeds(n)  # the checkpoint's rl.eval_split (validation unless the run said test)
    pool = EnvPool(cfg.env.kwargs, cfg.env.video_camera)
    res = evaluate(policy, pool, cfg.env.tasks, seeds, cfg.env.max_episode_steps, record_frames=args.video)
    out = {"checkpoint": st["__path__"], "iteration": st["trainer"]["iteration"], "success_rate": res.success_rate,
           "mean_length": res.mean_length, "per_task": res.per_task, "episodes": len(res.episodes),
           "eval_split": cfg.rl.eval_split, "eval_states": seeds[0]}
    if "best" in st:  # checkpoints/best: the metric, value and iteration it was kept for
        out["best"] = st["best"]
    if args.video:
        # beside the evaluated checkpoint's run, not in the output_dir it was trained in (was: a moved or copied run's
        # video went to the original's directory, recreated if gone)
        logger = MetricsLogger(run_dir / "eval", tensorboard=False)
        out["video"] = str(logger.log_video(int(out["iteration"]), "rollouts/eval",
                                            tile_videos([e.frames for e in res.episodes[:4]]), fps=15))
        logger.close()
    pool.close()
    print(json.dumps(out))
    return 0


def _cmd_deploy(args: argparse.Namespace) -> int:
    from .deploy import cmd_deploy

    return cmd_deploy(args)


def _cmd_robot_loop(args: argparse.Namespace) -> int:
    from .robot_loop import cmd_robot_loop

    _setup_threads()
    return cmd_robot_loop(args)


def cmd_loop(args: argparse.Namespace) -> int:
    from .wm_loop import run_loop_command

    check_plan_only(args, {**PLAN_FLAGS, "peak_tflops": None})  # --gpus etc. without --plan: refused
    _setup_threads()
    plan = None
    if args.plan:  # the loop's models on the meta device / fake tensors (vla_rl.plan)
        from .plan import plan_text

        def plan(cfg) -> str:
            return plan_text(cfg, True, args.gpus, args.gpu_mem, args.peak_tflops, args.mfu)
    return run_loop_command(args.config, args.overrides, args.dry_run, plan)


def cmd_fit_encoder(args: argparse.Namespace) -> int:
    """Train SRPO's progress encoder (world_models.progress_encoder) from demos / scripted episodes; one safetensors
    file."""
    from grpo.config import ConfigError, dump_config, load_config
    from world_models.progress_encoder import FitEncoderConfig, check_fit_inputs, fit_encoder

    try:
        cfg = load_config(FitEncoderConfig, args.config, args.overrides)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    check_fit_inputs(cfg)  # before anything is recorded or trained
    from .preflight import check_policy_files

    check_policy_files("data.policy", cfg.data.policy)  # a saved policy there (was: expert data collected first)
    if not args.dry_run:
        check_new_output(cfg.output, "output", args.force)
    if args.dry_run:
        print(dump_config(cfg))
        return 0
    _setup_threads()
    rollout = None
    if cfg.data.policy_per_task:  # the policy's own rollouts (world_models imports no frontend: they are injected)
        from .policies.factory import load_policy
        from .preflight import check_policy_fits_tasks
        from .srpo_encoders import policy_rollout

        d = cfg.data
        policy = load_policy(d.policy).eval()
        # its action / state sizes are the tasks' (was: a tabletop policy on robosuite/Lift: every episode raised at
        # step 0, counted as a failure, and the encoder was written); before any episode is recorded
        check_policy_fits_tasks("data.policy", d.policy, policy, d.policy_tasks or d.expert_tasks, d.env_kwargs)
        if d.policy_image_size and d.policy_image_size != d.image_size:  # the policy sees its own size; the encoder
            # gets its camera at data.image_size as the env's extra view
            rollout = policy_rollout(policy, "srpo", d.policy_image_size, cfg.seed,
                                     {**d.env_kwargs, "extra_view": ("srpo", d.camera, d.image_size)})
        else:
            rollout = policy_rollout(policy, d.camera, d.image_size, cfg.seed, d.env_kwargs)
    path, losses = fit_encoder(cfg, rollout=rollout)
    print(json.dumps({"output": str(path), "steps": len(losses),
                      "final_loss": round(float(sum(losses[-10:]) / len(losses[-10:])), 5)}))
    return 0


def _check_hdf5_name(out: str, hint: str = "") -> None:
    """A robomimic-style demo file is named ``*.hdf5`` / ``*.h5`` (what ``sft.demo_path`` and LIBERO's tools read)."""
    if Path(out).suffix.lower() not in (".hdf5", ".h5"):
        raise ValueError(f"out={out!r}: expected a .hdf5 (or .h5) file{hint}")


def cmd_record_demos(args: argparse.Namespace) -> int:
    """Scripted-expert demos of a ``sims`` task to robomimic-style HDF5 (``sims.demos.record_demos``)."""
    import sims
    from sims.config import IMAGE_RANGE

    check_flags(("n", args.n, args.n >= 1, ">= 1"), ("n", args.n, args.n <= MAX_EPISODES, f"at most {MAX_EPISODES}"),
                ("--image-size", args.image_size, IMAGE_RANGE[0] <= args.image_size <= IMAGE_RANGE[1],
                 f"in [{IMAGE_RANGE[0]}, {IMAGE_RANGE[1]}] pixels"),
                ("--noise", args.noise, 0 <= args.noise < math.inf, "a finite number >= 0"),
                ("--drop-prob", args.drop_prob, 0.0 <= args.drop_prob <= 1.0, "in [0, 1]"),
                ("--seed-offset", args.seed_offset, 0 <= args.seed_offset <= MAX_SEED, f"in [0, {MAX_SEED}]"))
    tasks = sims.list_tasks()
    if args.task not in tasks:
        known = [t for t in tasks if not t.startswith("libero/")] + (["libero/<suite>/<i>"] if len(tasks) > 20 else [])
        raise ValueError(f"unknown task {args.task!r}; known: {', '.join(known)}")
    if args.format == "lerobot":  # a LeRobotDataset is a directory, created by lerobot itself: never replaced
        check_writable_dir(args.out, "out")
        check_new_output(args.out, "out", force=None)
    else:
        _check_hdf5_name(args.out, " (or --format lerobot for a LeRobotDataset directory)")
        check_writable_file(args.out, "out")
        check_not_in_a_checkpoint(args.out, "out")
        check_new_output(args.out, "out", args.force)
    cams = () if args.cameras == ["none"] else tuple(args.cameras)
    summary = sims.record_demos(args.task, args.n, args.out,
                                env_kwargs={"image_size": args.image_size, "cameras": cams},
                                seed_offset=args.seed_offset, noise=args.noise, wrong_object=args.wrong_object,
                                drop_prob=args.drop_prob, only_success=args.only_success, fmt=args.format)
    print(json.dumps({k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool))}))
    return 0


def cmd_libero_demos(args: argparse.Namespace) -> int:
    """LIBERO's per-task demo files -> one demo file for ``sft.demo_path`` (``vla_rl.libero_demos.convert``)."""
    from .libero_demos import convert, task_index

    if bool(args.suite) == bool(args.env_names):
        raise ValueError("give exactly one of --suite or --env-names")
    if args.env_names and len(args.env_names) != len(args.inputs):
        raise ValueError(f"--env-names has {len(args.env_names)} names for {len(args.inputs)} inputs")
    missing = [f for f in args.inputs if not Path(f).is_file()]
    if missing:
        raise FileNotFoundError(f"no such LIBERO demo file(s): {', '.join(missing[:5])}")
    if args.per_task is not None and args.per_task < 1:
        raise ValueError(f"--per-task={args.per_task}: expected >= 1 (demos kept per task; leave it out for all)")
    if args.image_size is not None:  # (was: the env's "image_size must be in [16, 1024]", naming no flag)
        from sims.config import IMAGE_RANGE

        if not args.replay or not IMAGE_RANGE[0] <= args.image_size <= IMAGE_RANGE[1]:
            raise ValueError(f"--image-size={args.image_size}: expected in [{IMAGE_RANGE[0]}, {IMAGE_RANGE[1]}] "
                             "pixels, with --replay")
    if args.env_names:  # names the demo file records for each task (was: any string accepted without --replay)
        import sims

        known = set(sims.list_tasks())
        bad = [n for n in args.env_names if not n.startswith("libero/") or n not in known]
        if bad:
            raise ValueError(f"--env-names {bad}: expected LIBERO task names libero/<suite>/<i> (e.g. "
                             "libero/libero_spatial/0)")
    for f in args.inputs:  # before anything is converted or written
        check_hdf5_demo_file("inputs", f, "one of LIBERO's *_demo.hdf5 files")
    _check_hdf5_name(args.out)
    check_writable_file(args.out, "out")
    check_not_in_a_checkpoint(args.out, "out")  # (as record-demos: was written among a checkpoint's files)
    check_new_output(args.out, "out", args.force)
    if any(Path(args.out).resolve() == Path(f).resolve() for f in args.inputs):
        raise ValueError(f"out={args.out!r} is one of the inputs (expected a new path)")
    names = args.env_names or [f"libero/{args.suite}/{task_index(args.suite, f)}" for f in args.inputs]
    env_kwargs = None if args.image_size is None else {"image_size": args.image_size}
    print(f"wrote {convert(args.out, list(zip(names, args.inputs)), args.per_task, args.replay, env_kwargs)}")
    return 0


def _add_plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plan", action="store_true",
                   help="memory per GPU, FLOPs and s/iter of the full-size models, traced "
                   "on the meta device / fake tensors without loading weights (vla_rl.plan); nothing is written")
    p.add_argument("--gpus", default="1,8", help="--plan: GPU counts to plan for, comma-separated")
    p.add_argument("--gpu-mem", type=float, default=80.0, help="--plan: memory of one GPU in GB (H100 SXM: 80)")
    p.add_argument("--peak-tflops", type=float, default=None, help="--plan: dense peak per GPU (default: H100 SXM, "
                   "494 TF32 or 989 bf16 by dist.mixed_precision)")
    p.add_argument("--mfu", type=float, default=0.4, help="--plan: sustained fraction of the peak")


def main(argv: list[str] | None = None) -> int:
    quiet_third_party_warnings()
    p = ArgumentParser(prog="vla-rl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = add_config_command(sub, "train", lambda: __import__("vla_rl.config", fromlist=["VLARLConfig"]).VLARLConfig,
                           overrides="rl.iterations=10", dry_run="print the resolved config and the cost per iteration",
                           help="SFT on a few demos, then GRPO (per the config)")
    _add_plan_args(t)
    e = sub.add_parser("eval", help="evaluate the latest checkpoint of a run on held-out initial states")
    e.add_argument("checkpoint", help="a run directory, its checkpoints/ folder, or one step_* checkpoint")
    e.add_argument("--episodes", type=int, default=0, help="held-out episodes per task (default: the config's)")
    e.add_argument("--video", action="store_true", help="also write a video of the first episodes")
    e.add_argument("--device", default="auto",
                   help="where the policy runs: auto (cuda if available), cpu, cuda, cuda:<i>")
    lp = add_config_command(sub, "loop", lambda: importlib.import_module("vla_rl.wm_loop").WorldLoopConfig,
                            config=dict(help="a loop YAML (e.g. configs/world_models/loop_reach_one.yaml)"),
                            overrides="cycles=2 vla.rl.lr=5e-4", dry_run="print the resolved config and exit",
                            help="World-VLA-Loop: world model from sim data, GRPO of the VLA inside it, repeat",
                            description="World-VLA-Loop (vla_rl.wm_loop): train the world model on simulator data, RL "
                            "the VLA inside it, check the policy in the real simulator, add its failures and "
                            "near-successes to the data, fine-tune, repeat. Outputs: <output_dir>/history.json, "
                            "metrics.jsonl, cycle_<c>/.")
    _add_plan_args(lp)
    d = sub.add_parser("record-demos", help="record scripted-expert demos of a sims task to robomimic-style HDF5")
    d.add_argument("task", help="e.g. tabletop/pick_place")
    d.add_argument("n", type=int, help="number of episodes")
    d.add_argument("out", help="output .hdf5 path")
    d.add_argument("--image-size", type=int, default=64)
    d.add_argument("--cameras", nargs="*", default=["agentview", "wrist"],
                   help="cameras to record; none (or the flag with no names): no images")
    d.add_argument("--noise", type=float, default=0.0, help="Gaussian noise std on the motion components")
    d.add_argument("--wrong-object", action="store_true", help="solve the task for another object (failure data)")
    d.add_argument("--drop-prob", type=float, default=0.0, help="per-step chance of opening the gripper while carrying")
    d.add_argument("--seed-offset", type=int, default=0, help="init_seed of the first episode")
    d.add_argument("--only-success", action="store_true", help="keep successful episodes only")
    d.add_argument("--format", choices=["hdf5", "lerobot"], default="hdf5",
                   help="hdf5: robomimic-style file; lerobot: a LeRobotDataset v3.0 directory (needs lerobot: make "
                        "lerobot)")
    d.add_argument("--force", action="store_true", help="replace an existing HDF5 out (refused otherwise; a "
                   "LeRobotDataset directory is never replaced)")
    lb = sub.add_parser("libero-demos", help="convert LIBERO's per-task demo files into one demo file (sft.demo_path)",
                        description="Convert LIBERO's demo files (one robomimic-style HDF5 per task) into the one-file "
                        "layout vla_rl.demos reads (vla_rl.libero_demos).")
    lb.add_argument("out", help="output .hdf5 path")
    lb.add_argument("--force", action="store_true", help="replace an existing out (refused otherwise)")
    lb.add_argument("inputs", nargs="+", help="LIBERO *_demo.hdf5 files")
    lb.add_argument("--suite", help="LIBERO suite (e.g. libero_spatial): task indices from LIBERO's benchmark order")
    lb.add_argument("--env-names", nargs="+",
                    help="explicit env names (libero/<suite>/<i>), one per input, instead of --suite")
    lb.add_argument("--per-task", type=int, default=None, help="demos kept per task (default: all)")
    lb.add_argument("--replay", action="store_true",
                    help="re-run each demo in sims' LIBERO env and store what it renders "
                    "(successes only) instead of copying the stored frames")
    lb.add_argument("--image-size", type=int, default=None, help="with --replay: the env's image size")
    fe = add_config_command(sub, "fit-encoder", lambda: __import__("world_models.progress_encoder",
                                                                   fromlist=["FitEncoderConfig"]).FitEncoderConfig,
                            config=dict(help="a fit-encoder YAML (e.g. configs/vla/fit_progress_encoder.yaml)"),
                            overrides="train.steps=200 output=enc.safetensors",
                            dry_run="print the resolved config and exit",
                            help="train SRPO's progress encoder (srpo.encoder=progress) from demos and scripted "
                            "episodes; writes one .safetensors file",
                            description="Train SRPO's progress encoder (world_models.progress_encoder): per frame, the "
                            "fraction of the episode still to go, learned from successful demos / scripted-expert "
                            "episodes (no simulator progress labels). Use the file with srpo.encoder=progress "
                            "srpo.encoder_path=FILE.")
    fe.add_argument("--force", action="store_true", help="replace an existing output file (refused otherwise)")
    from grpo.report import add_report_command, run_report

    from .deploy import add_parser as add_deploy_parser

    add_report_command(sub)  # grpo.report: one offline HTML page for one or more runs (train or loop)
    add_deploy_parser(sub)  # vla-rl deploy: a policy on a LeRobot robot (vla_rl.deploy)
    from .robot_loop import add_parser as add_robot_loop_parser

    add_robot_loop_parser(sub)  # vla-rl robot-loop: real-world RL on a LeRobot robot (vla_rl.robot_loop)
    from rewards.remote import add_serve_command, serve_command

    add_serve_command(sub, "vla-rl")  # vla-rl serve-reward NAME: a reward over HTTP (rewards.remote)
    from .robot_args import split_robot_flags

    argv, robot_flags = split_robot_flags(sys.argv[1:] if argv is None else argv)  # LeRobot's --robot.<field> <value>
    # key=value overrides may follow --dry-run
    args = parse_args(p, argv, takes_overrides=("train", "loop", "robot-loop", "fit-encoder"))
    if robot_flags and args.cmd not in ("deploy", "robot-loop"):
        p.error(f"{args.cmd} takes no --robot.<field> flags (only deploy and robot-loop do): "
                f"{' '.join('--robot.' + k for k, _ in robot_flags)}")
    args.robot_flags = robot_flags
    cmd = {"train": lambda a: end_of_job(cmd_train(a)), "eval": cmd_eval, "loop": cmd_loop,
           "record-demos": cmd_record_demos, "libero-demos": cmd_libero_demos, "report": run_report,
           "deploy": _cmd_deploy, "robot-loop": _cmd_robot_loop, "fit-encoder": cmd_fit_encoder,
           "serve-reward": serve_command}[args.cmd]
    return run_command(lambda: cmd(args))


if __name__ == "__main__":
    raise SystemExit(main())
