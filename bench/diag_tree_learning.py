"""Why a BranchGRPO iteration learns less than a flat GRPO one (issue 35 item 1): one iteration's gradient, measured.

Every variant starts from the same base and LoRA initialisation (``bench_branch_headroom.make_trainer``, checked)
and is NOT updated: for ``K`` iterations (each its own prompt(s) and noise) the bench runs the trainer's whole
iteration -- rollout, reward, credit, the clipped surrogate's backward -- and keeps the LoRA gradient ``g_k`` instead
of stepping (the optimizer's ``step`` is replaced by a copy of the gradients; clipping scales but does not turn
them). The reference direction ``G`` is the mean of flat GRPO's gradients over ``--k-ref`` further iterations (other
prompts, other noise): an estimate of the policy gradient of the expected reward at the start. Per variant::

    cos1   = mean_k cos(g_k, G)        how much of ONE iteration's update points along the expected gradient
    cosbar = cos(mean_k g_k, G)        the variant's expected direction against flat's (bias of the credit)
    snr    = |mean_k g_k|^2 / (K / (K - 1) * mean_k |g_k - mean g|^2)   signal over ONE iteration's noise
    leaf std = within-group std of the rewards (flat: the 16 samples; tree: the 16 leaves)

With Adam (one step per iteration, the benches' setting) a step's size is set by the learning rate, not by the
gradient's norm, so progress per iteration follows ``cos1``: an iteration whose gradient is more noise than signal
moves the LoRA as far, in a worse direction. ``--depths`` also splits BranchGRPO's gradient by the depth of the
trained node-steps (the loss restricted to one depth's rows; the advantages unchanged).

    python bench/diag_tree_learning.py --task big --k 12 --k-ref 24     # docs/RESULTS.md, issue 35 item 1
    python bench/diag_tree_learning.py --small                          # seconds
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from bench_branch_headroom import TASKS, _splits, check_same_start, make_trainer  # noqa: E402
from big_shapes_task import TARGET_AREA  # noqa: E402

from diffusion_rl.branch import BranchConfig  # noqa: E402


def variants(splits: list[int]) -> dict[str, tuple[BranchConfig, int, int]]:
    """``name -> (branch section, group size, prompts per update)``: flat GRPO, BranchGRPO (the reference's credit),
    its named credit options, and 2 trees of half the leaves with 2 prompts (the same 2^len(splits) leaves per
    update)."""
    L = 2 ** len(splits)
    tree = dict(enabled=True, split_steps=list(splits), branch=[2], fusion="mean")
    return {
        "flat GRPO": (BranchConfig(enabled=False), L, 1),
        "BranchGRPO": (BranchConfig(**tree), L, 1),
        "tree population std": (BranchConfig(**tree, depth_norm="population"), L, 1),
        "tree parent/leaf credit": (BranchConfig(**tree, adv_baseline="parent", adv_scale="leaf"), L, 1),
        "tree 2 prompts x half": (BranchConfig(**{**tree, "split_steps": list(splits[:-1])}), L // 2, 2),
    }


def flat_grad(trainer) -> torch.Tensor:
    return torch.cat([p.grad.detach().flatten().clone() if p.grad is not None else torch.zeros(p.numel())
                      for p in trainer.params])


def probe(trainer, k: int, depth: int | None = None, skip: int = 0) -> tuple[list[torch.Tensor], list[float]]:
    """``k`` iterations' gradients at the trainer's (unchanged) weights and their within-group reward stds; ``skip``
    iterations' prompts are drawn first (and their iteration indices skipped), so the draws are other ones;
    ``depth``: the loss restricted to that depth's tree nodes."""
    grads: list[torch.Tensor] = []
    opt = trainer.optimizer
    opt.step = lambda *a, **kw: grads.append(flat_grad(trainer))  # keep the gradient, never step
    for _ in range(skip):
        trainer.prompts.sample(trainer.cfg.train.prompts_per_iter, trainer.rng)
    trainer.iteration += skip
    if depth is not None:
        tree, credit = trainer.strategy.tree, trainer.strategy.credit
        of = torch.tensor([n.depth == depth for n in tree.nodes])

        def masked(ro, prompts, rewards, components, iteration):
            adv, keep = credit(ro, prompts, rewards, components, iteration)
            return adv, keep & of.repeat(len(prompts))
        trainer.strategy.credit = masked
    stds = []
    before = [p.detach().clone() for p in trainer.params]
    for _ in range(k):
        trainer.step()
        r = trainer.last_rewards.view(-1, trainer.cfg.grpo.group_size)
        stds.append(float(r.std(dim=1).mean()))
    if not all(torch.equal(a, p) for a, p in zip(before, trainer.params)):
        raise RuntimeError("the probe changed the weights")
    return grads, stds


def cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a @ b / (a.norm() * b.norm() + 1e-30))


def summary(grads: list[torch.Tensor], G: torch.Tensor) -> dict[str, float]:
    mean = torch.stack(grads).mean(0)
    noise = statistics.fmean(float((g - mean).norm() ** 2) for g in grads) * len(grads) / max(1, len(grads) - 1)
    c = [cos(g, G) for g in grads]
    return {"cos1": statistics.fmean(c), "cos1_se": statistics.stdev(c) / math.sqrt(len(c)) if len(c) > 1 else 0.0,
            "cosbar": cos(mean, G), "snr": float(mean.norm() ** 2) / max(noise, 1e-30),
            "gnorm": statistics.fmean(float(g.norm()) for g in grads), "cos_each": c}


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="big", help="the reward: " + "; ".join(f"{k} = {v}" for k, v in TASKS.items()))
    ap.add_argument("--seed", type=int, default=0, help="base seed (LoRA initialisation, prompts, noise)")
    ap.add_argument("--k", type=int, default=12, help="iterations (gradients) per variant")
    ap.add_argument("--k-ref", type=int, default=24, help="flat GRPO iterations whose mean gradient is the reference")
    ap.add_argument("--depths", action="store_true", help="also BranchGRPO's gradient split by trained depth")
    ap.add_argument("--only", default=None, help="comma-separated subset of the variants (flat GRPO is always run)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--splits", type=_splits, default=[0, 2, 4, 6])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eta", type=float, default=0.7)
    ap.add_argument("--target-area", type=float, default=TARGET_AREA)
    ap.add_argument("--small", action="store_true", help="seconds: 6 steps, splits 0,2,4, k 2, k-ref 2")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--small" in argv:
        ap.set_defaults(steps=6, splits=[0, 2, 4], k=2, k_ref=2)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    vs = variants(args.splits)
    only = list(vs) if args.only is None else ["flat GRPO", *[s.strip() for s in args.only.split(",")]]
    problems = [f"--only {args.only!r}: expected names among {', '.join(vs)}" for n in only if n not in vs][:1]
    problems += [f"--task {args.task!r}: expected one of {', '.join(TASKS)}"] if args.task not in TASKS else []
    problems += [f"--k {args.k} / --k-ref {args.k_ref}: expected >= 2"] if min(args.k, args.k_ref) < 2 else []
    problems += ([f"--lr {args.lr} / --eta {args.eta} / --target-area {args.target_area}: expected finite numbers > 0"]
                 if not all(0 < v < float("inf") for v in (args.lr, args.eta, args.target_area)) else [])
    problems += [f"--seed {args.seed}: expected an integer in [0, 2**32 - 1]"] if not 0 <= args.seed < 2**32 else []
    problems += ([f"--splits {args.splits}: every split step must be < --steps {args.steps}"]
                 if args.splits[-1] >= args.steps else [])
    if problems:
        print(f"diag_tree_learning: {problems[0]}", file=sys.stderr)
        return 2
    args.eval_steps, args.eval_prompts, args.out = 2, 1, "/tmp/diag_tree_learning"
    args.model_path = "builtin:shapes_sd3"
    t0 = time.perf_counter()

    def build(name):
        bc, g, p = vs[name]
        return make_trainer(args, name, args.seed, branch=bc, group_size=g, prompts_per_iter=p)

    ref = build("flat GRPO")
    G_list, _ = probe(ref, args.k_ref, skip=args.k)
    G = torch.stack(G_list).mean(0)
    rows = {}
    for name in dict.fromkeys(only):
        tr = build(name)
        check_same_start({"ref": ref, name: tr})
        t = time.perf_counter()
        grads, stds = probe(tr, args.k)
        rows[name] = {**summary(grads, G), "leaf_std": statistics.fmean(stds),
                      "s_per_it": (time.perf_counter() - t) / args.k}
    if args.depths:
        n_depth = len(args.splits)
        for d in range(1, n_depth + 1):
            tr = build("BranchGRPO")
            grads, stds = probe(tr, args.k, depth=d)
            rows[f"  BranchGRPO, depth {d} only"] = {**summary(grads, G), "leaf_std": statistics.fmean(stds),
                                                     "s_per_it": float("nan")}
    print(f"\nOne iteration's gradient at the start, {args.task} task, seed {args.seed}: {args.k} iterations per "
          f"variant, reference = mean of {args.k_ref} other flat GRPO iterations' gradients; {args.steps} steps, "
          f"splits {args.splits} x2\n")
    hdr = "| variant | cos(g_k, G) | cos(mean g, G) | signal/noise per iteration | leaf std | s/iter (probe) |"
    print(hdr)
    print("|---|---|---|---|---|---|")
    for n, r in rows.items():
        print(f"| {n} | {r['cos1']:.3f} +- {r['cos1_se']:.3f} | {r['cosbar']:.3f} | {r['snr']:.3f} "
              f"| {r['leaf_std']:.3f} | {r['s_per_it']:.2f} |")
    base = rows.get("BranchGRPO")
    if base is not None:  # the tree variants with BranchGRPO's tree and prompts roll out the same leaves: paired
        print("\npaired with BranchGRPO (the same rollouts, other credit), cos(g_k, G) minus BranchGRPO's:")
        for n, r in rows.items():
            if n not in ("BranchGRPO", "flat GRPO", "tree 2 prompts x half") and len(r["cos_each"]) == len(
                    base["cos_each"]):
                d = [a - b for a, b in zip(r["cos_each"], base["cos_each"])]
                print(f"  {n.strip()}: {statistics.fmean(d):+.3f} +- {statistics.stdev(d) / math.sqrt(len(d)):.3f}")
    print(f"\n(wall {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
