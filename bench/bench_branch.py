"""Flat GRPO vs BranchGRPO vs BranchGRPO + pruning vs BranchGRPO-Mix, side by side, same model, same leaves.

Every mode produces the same number of final samples per prompt (16 leaves, 20 steps by default) from the same
denoiser (a tiny SD3 transformer built in code; the shapes demo model when ``--model shapes`` and its weights
exist). Per iteration it measures rollout NFE, backward passes (trained row-steps), wall time, and the reward
curve against wall clock, then prints the ratios to flat GRPO.

    python bench/bench_branch.py [--iterations 4] [--prompts 1] [--steps 20] [--reward redness|shapes_verifier]
    python bench/bench_branch.py --model shapes --budget-s 60      # + reward at equal wall clock on the demo task

The tree: splits at steps 10, 13, 16, 18 with branch factor 2 -> 16 leaves, NFE 10 + 2*3 + 4*3 + 8*2 + 16*2 = 76
per prompt against 16 * 20 = 320 for flat GRPO (late splits keep the shared prefix long; that is where the saving
comes from). Pruning: top-1 leaf per last-split parent (width) and a sliding window of 2 depths (depth).
Mix: only a 4-step SDE window (plus the split steps) is stochastic and trained; the rest are ODE steps.

Equal wall clock (``--model shapes --budget-s 60``): after the timed iterations every mode restarts from the same
untrained LoRA and trains for the same
seconds and its evaluation reward (ODE samples on fixed prompts, and the all-correct accuracy) is reported. By default
(``--budget-prompts scaled``) a tree mode spends its per-iteration saving on more prompts per update,
``P_mode = round(P * wall_flat / wall_mode)``, so all modes make about as many optimizer updates in the budget and the
tree's updates average over more prompts. ``--budget-prompts same`` keeps one prompt per update and spends the saving
on ~3x more updates instead: with Adam every update moves the LoRA by about ``lr`` whatever the evidence behind it,
so 3x the single-prompt updates at the same ``lr`` is 3x the noise-driven drift (measured: the evaluation reward of
BranchGRPO then wanders below the pretrained model's).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import types
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from diffusion_rl.adapters import LoraSettings, ModelConfig  # noqa: E402
from diffusion_rl.branch import BranchConfig  # noqa: E402
from diffusion_rl.config import DiffusionRLConfig, RewardConfig, TrainConfig  # noqa: E402
from diffusion_rl.prompts import PromptConfig  # noqa: E402
from diffusion_rl.sampling import SamplerConfig  # noqa: E402
from diffusion_rl.trainer import DiffusionGRPOTrainer  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402


def redness(batch):
    """Bench-only closed-form reward (used when no reward registry is installed): red minus green/blue."""
    im = batch.images
    return types.SimpleNamespace(total=im[:, 0].mean((1, 2)) - im[:, 1:].mean((1, 2, 3)), components={})


def _mse(x: torch.Tensor) -> str:
    """``mean +- standard error`` of per-seed values (just the value for one seed)."""
    if x.numel() == 1:
        return f"{x.item():.3f}"
    return f"{x.mean().item():.3f} +- {(x.std() / x.numel() ** 0.5).item():.3f}"


def modes(steps: int, credit: str = "depth") -> dict[str, tuple[BranchConfig, dict]]:
    splits = [steps // 2, steps // 2 + 3, steps // 2 + 6, steps - 2]
    tree = dict(enabled=True, split_steps=splits, branch=[2], fusion="mean")
    if credit == "parent":  # sibling-relative credit, leaf-std scale (see diffusion_rl.branch.BranchConfig)
        tree.update(adv_baseline="parent", adv_scale="leaf")
    return {
        "flat GRPO": (BranchConfig(enabled=False), {}),
        "BranchGRPO": (BranchConfig(**tree), {}),
        "Branch+prune": (BranchConfig(**tree, width_prune="topk_per_parent", prune_k=1,
                                     depth_window=min(2, len(splits))), {}),
        "Branch-Mix": (BranchConfig(**tree), {"mix_window": 4}),
    }


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=1, help="prompts per iteration")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--leaves", type=int, default=16)
    ap.add_argument("--size", type=int, default=16, help="image size of the tiny pixel-space SD3")
    ap.add_argument("--reward", default=None, help="default: redness (tiny model), shapes_verifier (--model shapes)")
    ap.add_argument("--out", default="runs/bench_branch")
    ap.add_argument("--model", choices=["tiny", "shapes"], default="tiny",
                    help="tiny: random tiny SD3 at --size; shapes: the shipped pretrained demo model (32x32) + shapes "
                         "prompts")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="> 0: after the timed iterations, train each mode for this many more seconds of wall clock "
                         "and report the evaluation reward (ODE samples, fixed prompts) at equal wall clock")
    ap.add_argument("--budget-prompts", choices=["scaled", "same"], default="scaled",
                    help="prompts per update in the equal-wall-clock phase: 'scaled' (default) spends a mode's saving "
                         "on more prompts per update, P_mode = round(P * wall_flat / wall_mode), so every mode makes "
                         "about as many optimizer updates as flat GRPO; 'same' keeps P and spends it on more updates")
    ap.add_argument("--seeds", type=int, default=1,
                    help="repeat the equal-wall-clock phase with seeds 0..N-1 (training noise, prompts, evaluation "
                         "prompts and noise) and report the mean and standard error over seeds")
    ap.add_argument("--model-path", default="builtin:shapes_sd3", help="the shapes pipeline (--model shapes)")
    ap.add_argument("--eval-prompts", type=int, default=64, help="fixed evaluation prompts (--model shapes)")
    ap.add_argument("--shape-width", type=float, default=0.0,
                    help="shapes_verifier graded shape credit, as the demo config (0: exact shape credit)")
    ap.add_argument("--tree-credit", choices=["depth", "parent"], default="depth",
                    help="depth: BranchGRPO Eq. 7 (the default of branch:); parent: adv_baseline=parent, "
                         "adv_scale=leaf")
    args = ap.parse_args(argv)
    low = [f"--{k.replace('_', '-')} {getattr(args, k)}" for k, lo in (
        ("iterations", 1), ("prompts", 1), ("steps", 17), ("size", 8), ("seeds", 1), ("eval_prompts", 1))
        if getattr(args, k) < lo]
    if low:  # (was: a ZeroDivisionError after writing the first mode's run, or a config's traceback)
        ap.error(f"{', '.join(low)}: expected --iterations, --prompts, --seeds, --eval-prompts >= 1, --size >= 8 and "
                 "--steps >= 17 (the bench tree splits at steps/2, +3, +6 and steps-2)")
    if not (0 <= args.budget_s < float("inf") and 0 <= args.shape_width < float("inf")):
        ap.error(f"--budget-s {args.budget_s} / --shape-width {args.shape_width}: expected finite numbers >= 0")
    from grpo.preflight import check_writable_dir

    try:
        check_writable_dir(args.out, "--out")
    except ValueError as e:
        ap.error(str(e))
    if args.leaves != 16:  # (was: exit 1, after the other checks)
        ap.error(f"--leaves {args.leaves}: expected 16 (the bench tree is fixed: 4 splits x branch 2)")
    if args.reward is None:
        args.reward = "shapes_verifier" if args.model == "shapes" else "redness"
    from rewards import available_rewards

    if args.reward != "redness" and args.reward not in available_rewards():  # (was: a traceback after the first mode)
        ap.error(f"--reward {args.reward!r}: expected redness or one of {', '.join(available_rewards())}")
    results = {}
    flat_wall = 1.0
    for name, (bc, samp) in modes(args.steps, args.tree_credit).items():
        if args.model == "shapes":
            model = ModelConfig(kind="sd3", path=args.model_path, height=32, width=32, max_sequence_length=1,
                                lora=LoraSettings(rank=8, alpha=16))
            prompts = PromptConfig(source="shapes", num_eval=args.eval_prompts)
        else:
            model = ModelConfig(kind="sd3", height=args.size, width=args.size,
                                tiny={"with_vae": False, "hidden": 64, "layers": 2},
                                lora=LoraSettings(rank=4, alpha=8))
            prompts = PromptConfig(source="list", prompts=["a red circle", "a blue square", "a green triangle"],
                                   num_eval=2)
        cfg = DiffusionRLConfig(
            seed=0, output_dir=f"{args.out}/{name.replace(' ', '_').replace('+', '_')}", resume=False,
            model=model,
            sampler=SamplerConfig(num_steps=args.steps, eta=0.7, **samp), branch=bc,
            grpo=GRPOConfig(group_size=args.leaves, clip_low=0.2),
            train=TrainConfig(
                iterations=args.iterations, prompts_per_iter=args.prompts, lr=5e-4 if args.model == "shapes" else 1e-2,
                log_images=False, save_every=10**9),
            reward=RewardConfig(name=args.reward, kwargs={"shape_width": args.shape_width}
                                if args.reward == "shapes_verifier" else {}),
            prompts=prompts)
        tr = DiffusionGRPOTrainer(cfg, reward_fn=redness if args.reward == "redness" else None)
        tr.step()  # warm-up (allocations, prompt cache), not timed
        rows, t0 = [], time.perf_counter()
        for _ in range(args.iterations):
            s = tr.step()
            rows.append((time.perf_counter() - t0, s["reward/mean"], s["cost/nfe_rollout"], s["cost/backward"],
                         s["time/iter_s"], s["cost/nfe_train"]))
        if args.budget_s > 0:
            # the budget starts every mode from the same untrained LoRA (not from after its timed iterations, whose
            # number of trained samples differs per mode), so "before" is the same number for every mode (per seed)
            tr.logger.close()
            wall = sum(r[4] for r in rows) / len(rows)
            if name == "flat GRPO":
                flat_wall = wall
            for seed in range(args.seeds):
                tr = DiffusionGRPOTrainer(dataclasses.replace(cfg, seed=seed),
                                          reward_fn=redness if args.reward == "redness" else None)
                if args.budget_prompts == "scaled" and name != "flat GRPO":
                    tr.cfg.train.prompts_per_iter = max(1, round(args.prompts * flat_wall / wall))
                before = tr.evaluate()
                acc0 = tr.last_eval_components.get("eval/accuracy", float("nan"))
                t1 = time.perf_counter()
                iters = 0
                while time.perf_counter() - t1 < args.budget_s:
                    tr.step()
                    iters += 1
                after = tr.evaluate()
                acc1 = tr.last_eval_components.get("eval/accuracy", float("nan"))
                results.setdefault("_budget", {}).setdefault(name, []).append(
                    (before, after, iters, tr.cfg.train.prompts_per_iter, acc0, acc1))
                print(f"  {name} seed {seed}: {before:.3f} -> {after:.3f}, all-correct {acc0:.3f} -> {acc1:.3f} "
                      f"({iters} updates)", flush=True)
                if seed < args.seeds - 1:
                    tr.logger.close()
        tr.logger.close()
        n = len(rows)
        results[name] = {"nfe": sum(r[2] for r in rows) / n, "backward": sum(r[3] for r in rows) / n,
                         "wall": sum(r[4] for r in rows) / n, "nfe_train": sum(r[5] for r in rows) / n,
                         "curve": [(round(r[0], 2), round(r[1], 4)) for r in rows]}
        print(f"  {name}: done ({results[name]['wall']:.2f} s/iter)", flush=True)
    budget = results.pop("_budget", None)
    flat = results["flat GRPO"]
    print(f"\n{args.prompts} prompt(s)/iter, {args.leaves} final samples per prompt, {args.steps} steps, "
          f"{args.iterations} timed iterations per mode ("
          + ("the shipped shapes SD3, 32x32 pixels" if args.model == "shapes"
             else f"tiny SD3 transformer, {args.size}x{args.size} pixels")
          + ", 1 CPU thread)\n")
    hdr = f"| {'mode':<13} | NFE/iter | backward/iter | wall s/iter | NFE x fewer | backward x fewer | wall x faster |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for name, r in results.items():
        print(f"| {name:<13} | {r['nfe']:8.0f} | {r['backward']:13.0f} | {r['wall']:11.2f} | "
              f"{flat['nfe'] / r['nfe']:11.2f} | {flat['backward'] / max(r['backward'], 1):16.2f} | "
              f"{flat['wall'] / r['wall']:13.2f} |")
    print("\nreward vs wall clock (seconds since the first timed iteration, mean reward of the iteration's samples):")
    for name, r in results.items():
        print(f"  {name:<13} " + "  ".join(f"{t:6.1f}s:{v:+.3f}" for t, v in r["curve"]))
    if budget:
        n_eval = args.eval_prompts if args.model == "shapes" else 2
        print(f"\nequal wall clock: evaluation reward (ODE samples on {n_eval} fixed prompts) after "
              f"{args.budget_s:.0f} s of training per mode (prompts per update: {args.budget_prompts})")
        for name, runs in budget.items():
            b, a, it, p, acc0, acc1 = (torch.tensor([r[i] for r in runs], dtype=torch.float64) for i in range(6))
            acc = f", all-correct {_mse(acc0)} -> {_mse(acc1)}" if bool((acc0 == acc0).all()) else ""
            print(f"  {name:<13} {_mse(b)} -> {_mse(a)}  ({it.mean():.0f} updates x {p.mean():.0f} prompt(s){acc})")
        if args.seeds > 1:
            print(f"  (mean +- standard error over {args.seeds} seeds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
