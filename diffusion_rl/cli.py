"""``diffusion-rl``: train and evaluate diffusion models with flat GRPO or BranchGRPO; pretrain the demo model; the
core's toy GRPO run.

    diffusion-rl train configs/diffusion/shapes_branch.yaml [key=value ...] [--dry-run]
    diffusion-rl eval runs/shapes_branch/checkpoints[/step_000040 | /best]   # best: highest eval reward so far
    diffusion-rl pretrain-shapes --out DIR [--steps 4000 ...]     # the colors-and-shapes demo model (pretrain_shapes)
    diffusion-rl toy configs/grpo/toy_flow.yaml [key=value ...] [--dry-run]   # grpo.demo: 2-D flow model, ~1 min
    diffusion-rl export runs/shapes_branch OUT [--merge]   (the LoRA as diffusers' load_lora_weights reads it)
    diffusion-rl serve-reward shapes_verifier --port 8000   (a reward over HTTP; a run uses
                                                             reward.name=http://127.0.0.1:8000)

Scale-out: one process per device, e.g. ``torchrun --nproc_per_node 8 -m diffusion_rl.cli train cfg.yaml`` or
``accelerate launch --multi_gpu --num_processes 8 -m diffusion_rl.cli train cfg.yaml``; the result matches one
process over the same global batch (see :mod:`diffusion_rl.trainer`). SIGTERM/SIGINT finish the iteration, save a
checkpoint and exit 0; rerunning the same command resumes. A reward that keeps raising (after ``reward.retries``)
stops the run with exit code 1 and the prompts of the batch it failed on. A reward server that stays down (after
``reward.remote.retries``) or answers wrongly stops the run with exit code 1 after saving a checkpoint of the
iterations done (:class:`grpo.loop.StopRun`); rerunning the same command resumes once the server is back.

``--dry-run`` prints the resolved config and the cost of one iteration (rollout NFE, backward passes) and exits;
``--dry-run --plan`` instead plans the full-size architecture without loading it (:mod:`diffusion_rl.plan`): parameters
per component, memory per GPU for DDP and FSDP, FLOPs and seconds per iteration.
A ``pool:`` section with ``enabled: true`` trains with pool-and-select exploration through a quantized rollout copy
(:class:`diffusion_rl.strategies.PoolStrategy`, e.g. ``configs/diffusion/shapes_pool_fp8.yaml``);
``train.loss=nft`` uses the DiffusionNFT objective instead of the clipped policy gradient.
Bad input (unknown key, missing weights, empty prompt file, unknown reward, split step beyond the schedule,
LoRA target matching nothing, a pool smaller than its train set, an unknown quantization format) stops at start with
a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from grpo.cli import ArgumentParser, add_config_command, omp_threads, parse_args, run_command
from grpo.config import dump_config, load_config
from grpo.distributed import end_of_job
from grpo.loop import StopRun
from grpo.monitors import RewardHackingError
from grpo.onpolicy import OnPolicyError
from grpo.preflight import (
    PLAN_FLAGS,
    check_new_output,
    check_plan_flags,
    check_plan_only,
    check_writable_dir,
    quiet_third_party_warnings,
)
from grpo.report import add_report_command, run_report
from grpo.retry import RetryError
from rewards.remote import add_serve_command, serve_command


def _build(path, overrides):
    from .trainer import DiffusionGRPOTrainer, DiffusionRLConfig

    cfg = load_config(DiffusionRLConfig, path, overrides)
    return cfg, DiffusionGRPOTrainer  # flat / tree / pool: the trainer's strategy (diffusion_rl.strategies)


def cost_line(cfg, c: dict) -> str:
    """The projected GPU cost of one iteration (:func:`diffusion_rl.strategies.projected_gpu_units`) as one line."""
    from .strategies import train_row_forwards

    speed, src = cfg.pool.speedup() if c.get("nfe_lowp") else (1.0, "")
    lowp = (f" + {c['nfe_lowp']:.0f} {cfg.pool.quant.format} calls / {speed:g} ({src})" if c.get("nfe_lowp") else "")
    return (f"projected GPU cost per iteration: {c['gpu_units']:.0f} full-precision forward passes = "
            f"{c['nfe_policy']:.0f} full-precision calls{lowp} + {train_row_forwards(cfg):g} x {c['backward']:.0f} "
            "trained rows (forward + backward)")


def _mode(cfg) -> str:
    loss = " + DiffusionNFT loss" if cfg.train.loss == "nft" else ""
    if cfg.pool.enabled and cfg.branch.enabled:
        q = cfg.pool.quant
        return (f"BranchGRPO x pool (trees grown by the {q.format} rollout copy, backend {q.backend}; "
                f"{cfg.pool.train_size} of {cfg.pool.pool_size} leaves per tree regenerated as a pruned tree){loss}")
    if cfg.pool.enabled:
        q = cfg.pool.quant
        return (f"pool-and-select GRPO (pool {cfg.pool.pool_size} -> train {cfg.pool.train_size} per prompt, "
                f"{q.format} rollout copy, backend {q.backend}){loss}")
    if cfg.branch.enabled and cfg.branch.lookahead_candidates:
        q = cfg.pool.quant
        return (f"BranchGRPO lookahead@1 ({cfg.branch.lookahead_candidates} candidates at the first split previewed by "
                f"the {q.format} rollout copy, backend {q.backend}; the best + worst {cfg.branch.branch_factors()[0]} "
                f"grown in full precision){loss}")
    return ("BranchGRPO" if cfg.branch.enabled else "flat GRPO") + loss


def main(argv: list[str] | None = None) -> int:
    quiet_third_party_warnings()
    ap = ArgumentParser(prog="diffusion-rl", description=__doc__.split("\n\n")[0],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = add_config_command(sub, "train",
                           lambda: __import__("diffusion_rl.config", fromlist=["DiffusionRLConfig"]).DiffusionRLConfig,
                           overrides="train.lr=1e-4", dry_run="print the resolved config and cost per iteration",
                           help="train from a YAML config")
    t.add_argument("--plan", action="store_true",
                   help="with --dry-run: memory per GPU (DDP/FSDP), FLOPs and s/iter of the "
                   "full-size architecture, traced on fake tensors without loading weights (diffusion_rl.plan)")
    t.add_argument("--arch", default=None, help="--plan: architecture name (default: inferred from model.path)")
    t.add_argument("--gpus", default="1,8", help="--plan: GPU counts to plan for, comma-separated")
    t.add_argument("--gpu-mem", type=float, default=80.0, help="--plan: memory of one GPU in GB (H100 SXM: 80)")
    t.add_argument("--peak-tflops", type=float, default=989.0, help="--plan: dense bf16 peak per GPU (H100 SXM: 989)")
    t.add_argument("--mfu", type=float, default=0.4, help="--plan: sustained fraction of the peak")
    e = sub.add_parser("eval", help="evaluate a checkpoint (a step_* directory or a checkpoints/ root)")
    e.add_argument("checkpoint")
    e.add_argument("overrides", nargs="*")
    s = sub.add_parser("pretrain-shapes",
                       help="pretrain the colors-and-shapes demo model (resumable; see its docstring)",
                       description="Pretrain the colors-and-shapes demo model (diffusion_rl.pretrain_shapes): a tiny "
                       "StableDiffusion3Pipeline trained by flow matching on renders of the shapes grammar, saved with "
                       "save_pretrained to --out; OUT.ckpt/ holds a resumable training state until it finishes.")
    s.add_argument("--out", default=None, help="output directory (default: $BRANCHLOOP_CACHE/shapes_sd3, else "
                   "~/.cache/branchloop/shapes_sd3)")
    s.add_argument("--steps", type=int, default=4000)
    s.add_argument("--size", type=int, default=32, help="image size (pixels)")
    s.add_argument("--batch", type=int, default=32)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (one-cycle schedule)")
    s.add_argument("--hidden", type=int, default=128, help="transformer width")
    s.add_argument("--layers", type=int, default=4, help="transformer blocks")
    s.add_argument("--init", default=None, help="continue training a saved shapes pipeline directory")
    s.add_argument("--save-every", type=int, default=500,
                   help="steps between resumable checkpoints in OUT.ckpt (0: none)")
    s.add_argument("--force", action="store_true", help="write into an existing non-empty OUT (refused otherwise)")
    add_config_command(sub, "toy", lambda: __import__("grpo.demo", fromlist=["ToyConfig"]).ToyConfig,
                       config=dict(nargs="?", default=None, help="a ToyConfig YAML (e.g. configs/grpo/toy_flow.yaml)"),
                       overrides="train.iterations=10", dry_run="print the resolved config and the cost per iteration",
                       help="the core's toy GRPO run (grpo.demo: a 2-D flow model, ~20 s of CPU)",
                       description="The core's tiny GRPO run end to end (grpo.demo): a conditional flow-matching model "
                       "on 2-D points, pretrained on a ring of modes, then GRPO towards each prompt's mode.")
    x = sub.add_parser("export", help="write a run's LoRA in the diffusers format (pipe.load_lora_weights(OUT))")
    x.add_argument("run_dir", help="a run directory, its checkpoints/ folder, or one step_* checkpoint")
    x.add_argument("out")
    x.add_argument("--merge", action="store_true", help="also save the pipeline with the LoRA fused, in OUT/merged")
    x.add_argument("--weights", choices=("auto", "ema", "live"), default="auto",
                   help="auto: the EMA weights when the run kept them (what its evaluation scored), else the live ones")
    x.add_argument("--force", action="store_true", help="replace an export already in OUT (refused otherwise)")
    add_report_command(sub)  # grpo.report: one offline HTML page for one or more runs
    add_serve_command(sub, "diffusion-rl")  # rewards.remote: serve-reward NAME --host --port
    args = parse_args(ap, argv, takes_overrides=("train", "toy"))  # key=value overrides may follow --dry-run
    commands = {"report": run_report, "train": lambda a: end_of_job(_train(a)), "pretrain-shapes": _pretrain_shapes,
                "toy": _toy,
                "export": _export, "eval": _eval, "serve-reward": serve_command}

    def dispatch() -> int:
        try:
            return commands[args.cmd](args)
        except (RetryError, OnPolicyError, RewardHackingError, StopRun) as err:  # a run stopped by a check: exit 1
            print(f"error: {err}", file=sys.stderr)
            return 1

    return run_command(dispatch)  # bad input (and a missing optional package): one line, exit 2


def _train(args) -> int:
    from .preflight import check_train_inputs

    check_plan_only(args, {**PLAN_FLAGS, "arch": None, "peak_tflops": 989.0})  # --gpus etc. without --plan: refused
    cfg, Trainer = _build(args.config, args.overrides)
    check_train_inputs(cfg, writes=not (args.dry_run or args.plan))  # before any model is built
    if args.plan:
        from .plan import build_plan, format_plan
        from .strategies import check_strategy

        check_strategy(cfg, 1)  # the strategy's own settings, as a dry run or a run checks them (was: planned anyway)
        gpus = check_plan_flags(args.gpus, args.gpu_mem, args.peak_tflops, args.mfu)
        print(format_plan(build_plan(cfg, args.arch), cfg, gpus, args.gpu_mem, args.peak_tflops, args.mfu))
        return 0
    if args.dry_run:
        print(dump_config(cfg))
        cfg.model.lora.enabled = cfg.model.lora.enabled  # the dry run builds the model to check weights and targets
        tr = Trainer(cfg, log=False)
        c = tr.cost_per_iteration()
        pool = f" ({c['nfe_pool']:.0f} of them in the quantized pool)" if "nfe_pool" in c else ""
        print(f"{_mode(cfg)}: per iteration NFE {c['nfe']:.0f} (rollout){pool}, backward passes {c['backward']:.0f}, "
              f"final samples {c['final_samples']}")
        print(cost_line(cfg, c))
        return 0
    tr = Trainer(cfg)
    main_rank = tr.dist.is_main
    c = tr.cost_per_iteration()
    if main_rank:
        print(f"{_mode(cfg)}; outputs: {tr.out.resolve()} (metrics.jsonl, tb/, images/, checkpoints/); per iteration "
              f"NFE {c['nfe']}, backward {c['backward']:.0f}; {tr.dist.world_size} process(es)", flush=True)
    try:
        res = tr.train()
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    if res.get("error"):  # a reward server stayed down: the checkpoint is saved, a rerun resumes
        if main_rank:
            print(f"error: {res['error']} (checkpoint of iteration {tr.iteration} saved; rerun the same command to "
                  "resume)", file=sys.stderr)
        return 1
    if main_rank and res["stopped"] is None:
        print(f"eval reward (ODE samples, {len(tr.prompts.eval_prompts)} prompts): before {res['eval_before']:.3f} -> "
              f"after {res['eval_after']:.3f} in {res['seconds']:.0f}s")
        cb, ca = res.get("eval_components_before", {}), res.get("eval_components_after", {})
        for k in ca:
            if k in cb:
                print(f"  {k.removeprefix('eval/')}: {cb[k]:.3f} -> {ca[k]:.3f}")
    return 0


def _pretrain_shapes(args) -> int:
    import torch

    from .preflight import check_pretrain_args
    from .pretrain_shapes import DEFAULT_DIR, pretrain

    check_pretrain_args(args, args.out or DEFAULT_DIR)
    torch.set_num_threads(omp_threads(2))
    out = pretrain(args.out or DEFAULT_DIR, args.steps, args.size, args.batch, lr=args.lr, seed=args.seed,
                   hidden=args.hidden,
                   layers=args.layers, init=args.init, save_every=args.save_every)
    print(f"saved to {out}")
    return 0


def _toy(args) -> int:
    from grpo.config import ConfigError, load_config
    from grpo.demo import ToyConfig, main as toy_main
    from grpo.preflight import check_sizes

    try:
        cfg = load_config(ToyConfig, args.config, list(args.overrides))
    except ConfigError:
        cfg = None  # toy_main reports it (one line, exit 2)
    if cfg is not None:
        check_sizes(("train.iterations", cfg.train.iterations, 0), ("grpo.group_size", cfg.grpo.group_size, 2))
        if not args.dry_run:
            from pathlib import Path

            from grpo.preflight import check_resumable, check_run_kind

            check_writable_dir(cfg.output_dir, "output_dir")
            check_run_kind(cfg.output_dir, ToyConfig)  # not another command's run directory
            if cfg.resume:  # a damaged checkpoint: one line naming it, left as it is (was: a traceback, or a JSON
                # error naming no file); the config's match is checked where the toy resumes (grpo.demo)
                check_resumable(Path(cfg.output_dir) / "checkpoints", keys=("config",))

    argv = ([args.config] if args.config else []) + list(args.overrides) + (["--dry-run"] if args.dry_run else [])
    return toy_main(argv)


def _export(args) -> int:
    from .export import export_run

    check_export_target(args.run_dir, args.out, args.force)
    info = export_run(args.run_dir, args.out, merge=args.merge, weights=args.weights)
    lo = info["lora"]
    print(f"exported {info['weights']} LoRA of {info['checkpoint']} (iteration {info['iteration']}): rank "
          f"{lo['rank']}, alpha {lo['alpha']}, {lo['tensors']} tensors -> {args.out} (load with {info['pipeline']}"
          f".load_lora_weights)" + (f"; merged pipeline -> {info['merged']}" if info["merged"] else ""))
    return 0


EXPORT_FILES = ("export.json", "pytorch_lora_weights.safetensors", "merged")  # what an export writes into OUT


def check_export_target(run_dir: str, out: str, force: bool) -> None:
    """OUT must be a writable directory outside the run (an export inside it would mix with the checkpoints that
    resume and ``eval`` read) and, unless ``force``, must not already hold an export (it would be overwritten)."""
    from pathlib import Path

    if not out.strip():
        raise ValueError("OUT is empty (expected a directory path for the export)")
    check_writable_dir(out, "OUT")
    run = Path(run_dir).expanduser().resolve()
    root = (run.parent.parent if run.name.startswith(("step_", "best"))
            else run.parent if run.name == "checkpoints" else run)
    target = Path(out).expanduser().resolve()
    if target == root or root in target.parents:
        raise ValueError(f"OUT={out!r} is inside the run directory {str(root)!r} (expected a separate directory)")
    # not into (or inside) another run, a checkpoint or a saved model, --force or not (was: --force wrote the LoRA
    # and export.json among another run's files, into a saved policy or pipeline)
    from grpo.preflight import check_not_inside_a_run

    check_not_inside_a_run(out, "OUT")
    if (target / "run_info.json").is_file():
        raise ValueError(f"OUT={out!r} is a run directory (it holds run_info.json); expected a separate directory for "
                         "the export")
    held = [n for n in EXPORT_FILES if (target / n).exists()] + sorted(
        p.name for p in target.glob("*_lora_weights.safetensors") if p.name not in EXPORT_FILES)
    if held and not force:
        raise ValueError(f"OUT={out!r} already holds an export ({', '.join(held)}); expected an empty or new directory "
                         "(pass --force to replace it)")
    check_new_output(target, "OUT", force)  # other files: not written among them either


# keys of a run that ``diffusion-rl eval`` reads nowhere: it writes no run directory, logs nothing, trains nothing,
# and scores ODE samples (train.eval_steps, sampler.shift / cfg_scale) rather than the rollouts' SDE, trees or pools
EVAL_IGNORES = ("output_dir", "resume", "log", "dist", "train.iterations", "train.lr", "train.lr_schedule",
                "train.inner_epochs", "train.eval_every", "train.save_every", "train.keep_last",
                "grpo", "branch", "pool", "sampler.num_steps", "sampler.sde", "sampler.eta", "sampler.same_init_noise",
                "sampler.timestep_fraction", "sampler.mix_window", "sampler.mix_stride", "sampler.sde_last_step",
                "train.prompts_per_iter", "train.weight_decay", "train.updates_per_iter", "train.ema_decay",
                "train.use_tracker", "train.tracker_buffer", "train.tracker_min_count", "train.log_images",
                "train.loss", "train.nft_beta", "train.nft_timesteps", "train.lr_min_ratio", "train.onpolicy_tol",
                "train.onpolicy_action")


def _eval(args) -> int:
    from grpo.checkpoint import load_checkpoint
    from grpo.config import _build as build_cfg  # noqa: PLC2701 - same typed loader, from a dict
    from grpo.preflight import resolve_checkpoint

    from .trainer import DiffusionGRPOTrainer, DiffusionRLConfig

    p = resolve_checkpoint(args.checkpoint)  # a truncated / corrupt checkpoint, a stale latest: one line naming it
    state = load_checkpoint(p)
    if "trainable" not in state:  # e.g. a vla-rl checkpoint
        other = " (a vla-rl checkpoint: use vla-rl eval)" if "policy_config" in state else ""
        raise ValueError(f"{state['__path__']} is not a diffusion-rl checkpoint (it holds no trainable weights){other}")
    cfg = build_cfg(DiffusionRLConfig, state["config"], "", str(p))
    if args.overrides:
        from grpo.config import (
            check_inactive_keys,
            check_seed,
            config_to_dict,
            given_keys,
            merge_overrides,
            parse_overrides,
        )

        over = parse_overrides(args.overrides)
        cfg = build_cfg(DiffusionRLConfig, merge_overrides(DiffusionRLConfig, config_to_dict(cfg), over), "", str(p))
        given = given_keys(DiffusionRLConfig, over)
        unused = sorted(k for k in given if k in EVAL_IGNORES or k.split(".", 1)[0] in EVAL_IGNORES)  # (was: accepted,
        if unused:  # doing nothing)
            raise ValueError(f"{p} + overrides: {unused[-1]} does nothing in eval (it reads the checkpoint, draws ODE "
                             "samples and prints; it writes no run and trains nothing); expected overrides of model, "
                             "sampler, prompts, reward, eval or seed (of sampler: shift and cfg_scale; of train: "
                             "eval_steps)")
        # what train refuses of the same keys: a seed out of range (was: an overflow line naming no key), a key the
        # checkpoint's mode ignores (was: accepted)
        check_seed(cfg, f"{p} + overrides")
        check_inactive_keys(cfg, given_keys(DiffusionRLConfig, over), f"{p} + overrides")
    tr = DiffusionGRPOTrainer(cfg, log=False)
    # eval trains nothing, so no monitor and no alarm (was: the alarm compared the pretrained model with the checkpoint
    # as if they were a run's evaluations, warned "at iteration 0 ... (iterations 0..0)", and with eval.action=stop
    # saved a checkpoint into the run it read: its `latest` then named a step_000000 that keep_last had pruned)
    tr.monitors = {}
    base = tr.evaluate()
    tr.adapter.load_trainable_state_dict(state["trainable"])
    if tr.ema is not None and "ema" in state:
        tr.ema = state["ema"]
    score = tr.evaluate()
    # every checkpoint holds the run's best record as it stood when saved; it is this checkpoint's own only at its
    # iteration (was: printed for any, e.g. the latest "kept as best for eval/reward -1.1294", the pretrained score)
    rec = state.get("best")
    kept = isinstance(rec, dict) and rec.get("iteration") == state["iteration"]
    print(f"{state['__path__']} (iteration {state['iteration']}): eval reward {score:.4f} "
          f"(pretrained model: {base:.4f}) on {len(tr.prompts.eval_prompts)} prompts"
          + (f"; kept as best for {rec['metric']} {rec['value']:.4f}" if kept else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
