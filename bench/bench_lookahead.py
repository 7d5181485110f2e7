"""Lookahead trees (issue 35, item 3): does a low-precision preview at a split point tell which full-precision
children to keep?

A lookahead tree is a full-precision BranchGRPO tree in which every split draws ``m`` candidate children, completes
each to a leaf with the cheap quantized rollout copy (the pool's emulated FP8 / NVFP4 copy, ``--format``), and keeps
only ``k`` of them (the best ``ceil(k/2)`` and worst ``floor(k/2)`` previews, Sol-RL's contrastive rule), which grow on
in full precision. This bench is the small experiment that decides whether to build it; nothing here trains.

Per prompt ``j`` (the shapes task with headroom, ``bench/big_shapes_task.py``; the shipped ``builtin:shapes_sd3``
model at its LoRA initialisation), splits ``s_1 < ... < s_D`` of ``T`` steps, ``s_{D+1} = T``. Node ids are m-ary heap
numbers (root 0, candidate ``c`` of node ``n``: ``n m + c + 1``); node ``n``'s noise over ``[s_d, T)`` is keyed by
``(seed, STREAM_CHILD, j 10^6 + n)`` (``diffusion_rl.sampling.keyed_noise``), so every arm sees the same candidates
under the same parent::

    depth d, parent x_{s_d} (full precision):  m candidates c, each with its own noise eps_c[s_d .. T)
        preview_q(c) = R(chain_q(x_{s_d}; eps_c))     quantized copy, steps s_d..T-1          (low precision)
        preview_f(c) = R(chain_f(x_{s_d}; eps_c))     the policy, the SAME noise              (full precision)
        keep k of m by the arm's rule; a kept child runs [s_d, s_{d+1}) in full precision with eps_c's first steps

Arms (each ends with a binary-like full-precision tree of ``k^D`` leaves, the structure a factor-``k`` BranchGRPO tree
trains):

* ``random``     keep k of m at random (keyed): distributed as the plain factor-k BranchGRPO tree. Also computes both
                 previews of every candidate: the predictiveness table (a) comes from this arm (unbiased parents).
* ``lookahead``  keep best + worst by ``preview_q`` (the method under test).
* ``oracle``     keep best + worst by ``preview_f`` (a perfect preview at full-precision cost: the upper bound of the
                 idea, separating the quantized copy's fidelity from the value of looking ahead at all).
* ``lookahead@1`` the preview at the first split only (random keep at the later ones): 1 / D-th of the previews'
                 cost at the split where the subtrees are largest. Added after the first run (seeds 0-1) as an
                 exploratory arm, not part of the decision rule below.
* ``tree x pool`` the built alternative (diffusion_rl/tree_pool.py): a tree of ``k^(D-1) x (k m)`` leaves (factors
                 ``k, ..., k, k m``) grown by the quantized copy, the best + worst ``k^D`` leaves' pruned tree
                 regenerated in full precision; about the same low-precision NFE as ``lookahead``.

(a) Predictiveness, per split depth (random arm): within each parent's ``m`` candidates, Spearman(preview_q,
preview_f) (average ranks; sibling groups with all-equal rewards skipped and counted), the pooled Pearson of the
parent-centred previews, top-1 agreement (argmax preview_q = argmax preview_f; chance 1/m), and best+worst pair
agreement (chance 1/(m(m-1))). For the kept sibling pairs of depths < D: how often the sign of the preview difference
(q, and f) matches the sign of the difference of their full-precision subtree means (what keeping a child is worth:
the subtree grows on with fresh noise after the child's segment).

(b) Value: per arm, the within-tree population std of the ``k^D`` full-precision leaf rewards (the spread GRPO learns
from) and of the fused (mean) node rewards at each depth (what BranchGRPO's depth-wise normalization divides by: the
signal of the segments of that depth), mean +- SE over prompts, paired differences against ``random``; cost per tree
as the trainer counts it (``diffusion_rl.strategies.projected_gpu_units``: NFE full precision + NFE low precision /
the format's published throughput ratio + 3 x trained row-steps, every node trained, and with BranchGRPO's pruning of
the bench_tree_pool tree+prune arm), and the full-precision ``m``-ary tree the lookahead avoids.

Decision rule, fixed before the first full run: build the lookahead tree only if (1) the preview predicts at the
split points (within-parent Spearman >= 0.5 and top-1 agreement clearly above chance at every depth, and the preview
ranks the kept siblings' full-precision subtrees better than a coin) and (2) its kept leaves carry more signal than
both the plain tree (``random``) and the built alternative at about the same low-precision NFE (``tree x pool``):
leaf reward std and depth-1 spread above each by more than 2 SE, paired over prompts. These are necessary conditions
for it to earn its projected cost; a training run would be the next test, not this bench.

    python bench/bench_lookahead.py --seed-list 0,1 --prompts 8      # the numbers of docs/RESULTS.md
    python bench/bench_lookahead.py --small                          # seconds: the test's mode
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from arm_runs import join_seeds, missing_arms, parse_seed_list, read_json_runs  # noqa: E402
from bench_branch_headroom import fmt, make_trainer  # noqa: E402
from big_shapes_task import TARGET_AREA  # noqa: E402
from claims_toy import mean_se  # noqa: E402

from diffusion_rl.adapters import cond_select  # noqa: E402
from diffusion_rl.branch import BranchConfig  # noqa: E402
from diffusion_rl.config import DiffusionRLConfig, TrainConfig  # noqa: E402
from diffusion_rl.pool_config import PoolConfig  # noqa: E402
from diffusion_rl.quant import QuantConfig  # noqa: E402
from diffusion_rl.sampling import SamplerConfig, guided_velocity, keyed_noise  # noqa: E402
from diffusion_rl.strategies import projected_gpu_units, tree_cost, tree_pool_cost  # noqa: E402
from diffusion_rl.tree_pool import tree_pool_rollout  # noqa: E402
from grpo.distributed import keyed_generator  # noqa: E402
from grpo.flow_sde import flow_chain, flow_sigmas  # noqa: E402
from grpo.selection import select_subset  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402
from grpo.tree import RolloutTree  # noqa: E402

ARMS = ("random", "lookahead", "oracle", "tree x pool", "lookahead@1")
STREAM_ROOT, STREAM_CHILD, STREAM_KEEP = 201, 202, 203  # this bench's noise / selection key streams
KEY = 10**6  # node key = prompt * KEY + heap id


def ranks(v: list[float]) -> list[float]:
    """Average ranks (ties share the mean of their positions), 0-based."""
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for t in range(i, j + 1):
            r[order[t]] = (i + j) / 2
        i = j + 1
    return r


def pearson(a: list[float], b: list[float]) -> float | None:
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    sa = math.sqrt(sum((x - ma) ** 2 for x in a))
    sb = math.sqrt(sum((y - mb) ** 2 for y in b))
    if sa == 0 or sb == 0:
        return None
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (sa * sb)


def pstd(v: list[float]) -> float:
    return statistics.pstdev(v) if len(v) > 1 else 0.0


class Grower:
    """Grows the arms' trees for one seed's prompts: chains of rows in full precision (the trainer's adapter) or in
    the quantized copy (its strategy's explorer), batched over every row of a depth."""

    def __init__(self, args, seed: int):
        D = len(args.splits)
        self.args, self.seed, self.D = args, seed, D
        self.k, self.m, self.T = args.keep, args.cands, args.steps
        self.bounds = [*args.splits, args.steps]
        wide = [self.k] * (D - 1) + [self.k * self.m]
        self.txp_tree = RolloutTree(args.steps, args.splits, wide)
        pool = PoolConfig(enabled=True, pool_size=self.txp_tree.num_leaves, train_size=self.k ** D,
                          select="best_worst", quant=QuantConfig(format=args.format))
        # the tree x pool trainer: its adapter is the policy, its strategy holds the quantized copy and the tree
        self.trainer = make_trainer(args, "lookahead", seed,
                                    branch=BranchConfig(enabled=True, split_steps=list(args.splits), branch=wide),
                                    pool=pool, group_size=self.k ** D, prompts_per_iter=args.prompts)
        self.adapter = self.trainer.adapter
        self.explorer = self.trainer.strategy.explorer
        self.sc = self.trainer.cfg.sampler
        self.mask = self.sc.sde_mask(0, force=tuple(args.splits))
        self.sigmas = flow_sigmas(self.T, self.sc.shift)
        self.prompts = self.trainer.prompts.sample(args.prompts, random.Random(10_000 + seed))
        self.cond = self.adapter.encode_prompts(self.prompts)
        self.shape = tuple(self.adapter.latent_shape)
        self.nfe = {"fp": 0, "lowp": 0}

    def score(self, latents: torch.Tensor, pidx: list[int]) -> list[float]:
        out, _ = self.trainer.score(latents, [self.prompts[j] for j in pidx])
        return [float(x) for x in out.total]

    @torch.no_grad()
    def chain(self, lowp: bool, x: torch.Tensor, pidx: list[int], keys: list[int], start: int, stop: int,
              stream: int = STREAM_CHILD, first: int | None = None) -> torch.Tensor:
        """Steps ``[start, stop)`` of rows ``x [R, ...]``; row ``r``'s noise of step ``i`` is row ``i - first`` of
        ``keyed_noise`` for ``keys[r]`` (``first``: the step its noise starts at, default ``start``)."""
        if stop <= start or not len(pidx):
            return x
        first = start if first is None else first
        model = self.explorer if lowp else self.adapter
        noise = keyed_noise((self.T - first, *self.shape), self.seed, 0, stream, keys)  # [R, T - first, ...]
        cond = cond_select(self.cond, pidx)
        self.nfe["lowp" if lowp else "fp"] += (stop - start) * len(pidx)
        return flow_chain(lambda i, z: guided_velocity(model, z, self.sigmas[i], cond, None, 1.0).float(), x,
                          self.sigmas, kind=self.sc.sde, eta=self.sc.eta, steps=range(start, stop),
                          sde_mask=self.mask, noise=lambda i: noise[:, i - first], keep=False)[0]

    def grow(self, arm: str) -> dict:
        """One arm's trees over all prompts: leaf rewards ``[P][k^D]`` in heap order, and (random arm) the previews of
        every candidate with their parent and depth."""
        P, k, m, D, b = len(self.prompts), self.k, self.m, self.D, self.bounds
        self.nfe = {"fp": 0, "lowp": 0}
        pidx = list(range(P))
        x = keyed_noise(self.shape, self.seed, 0, STREAM_ROOT, pidx)
        x = self.chain(False, x, pidx, [j * KEY for j in pidx], 0, b[0], stream=STREAM_ROOT, first=0)
        frontier = [(j, 0, x[j]) for j in pidx]  # (prompt, heap id, latent at the next split)
        groups = []  # per (depth, parent): {"d", "j", "q": [m], "f": [m], "kept": [k candidate positions]}
        for d in range(D):
            cand = [(j, n * m + c + 1, z) for j, n, z in frontier for c in range(m)]
            cj, ck = [j for j, _, _ in cand], [j * KEY + h for j, h, _ in cand]
            xs = torch.stack([z for _, _, z in cand])
            q = f = None
            if arm in ("random", "lookahead") or (arm == "lookahead@1" and d == 0):
                q = self.score(self.chain(True, xs, cj, ck, b[d], self.T), cj)
            if arm in ("random", "oracle"):
                f = self.score(self.chain(False, xs, cj, ck, b[d], self.T), cj)
            kept = []
            for g, (j, n, _) in enumerate(frontier):
                sl = slice(g * m, (g + 1) * m)
                if arm == "random" or (arm == "lookahead@1" and d > 0):
                    sel = torch.randperm(m, generator=keyed_generator(self.seed, STREAM_KEEP, j * KEY + n))[:k]
                    sel = sel.sort().values.tolist()
                else:
                    sel = select_subset(torch.tensor((f if arm == "oracle" else q)[sl]), k, "best_worst").tolist()
                groups.append({"d": d, "j": j, "q": None if q is None else q[sl], "f": None if f is None else f[sl],
                               "kept": sel})
                kept += [g * m + c for c in sel]
            rows = [cand[i] for i in kept]
            kj, kk = [j for j, _, _ in rows], [j * KEY + h for j, h, _ in rows]
            z = self.chain(False, torch.stack([z for _, _, z in rows]), kj, kk, b[d], b[d + 1])
            frontier = [(j, h, z[i]) for i, (j, h, _) in enumerate(rows)]
        leaves = self.score(torch.stack([z for _, _, z in frontier]), [j for j, _, _ in frontier])
        L = k ** D
        return {"leaves": [leaves[j * L:(j + 1) * L] for j in pidx], "groups": groups, "nfe": dict(self.nfe)}

    def tree_x_pool(self) -> dict:
        """The built alternative: :func:`diffusion_rl.tree_pool.tree_pool_rollout` at this bench's sizes; the
        regenerated leaves scored, arranged as ``[P][k^D]`` in leaf order, with their pruned tree."""
        def score(latents, pidx):
            return torch.tensor(self.score(latents, pidx.tolist()))
        tp = tree_pool_rollout(self.adapter, self.explorer, self.prompts, self.txp_tree, self.sc,
                               self.trainer.cfg.pool, score, seed=self.seed, iteration=0)
        r = self.score(tp.rollout.final, tp.rollout.final_prompt_idx.tolist())
        n = self.k ** self.D
        return {"leaves": [r[j * n:(j + 1) * n] for j in range(len(self.prompts))], "selected": tp.selected.tolist(),
                "nfe": {"fp": tp.nfe_policy, "lowp": tp.nfe_lowp}}


def depth_spreads(leaves: list[float], k: int, D: int) -> list[float]:
    """Population std of the fused (mean) rewards of the ``k^d`` nodes of depth ``d = 1..D`` of a full k-ary tree
    whose leaves (heap order) hold ``leaves``."""
    out = []
    for d in range(1, D + 1):
        w = k ** (D - d)
        out.append(pstd([statistics.fmean(leaves[i * w:(i + 1) * w]) for i in range(k ** d)]))
    return out


def txp_spreads(tree: RolloutTree, selected: list[int], leaves: list[float]) -> list[float]:
    """The same for a tree x pool pruned tree: per depth, the std of the present nodes' means over their selected
    leaves (``leaves`` in ``selected`` order)."""
    r = dict(zip(selected, leaves))
    out = []
    for d in range(1, tree.depth + 1):
        vals = [statistics.fmean(r[i] for i in tree.leaf_descendants(n) if i in r) for n in tree.nodes_at_depth(d)
                if any(i in r for i in tree.leaf_descendants(n))]
        out.append(pstd(vals))
    return out


def run_seed(args, seed: int) -> dict:
    t0 = time.perf_counter()
    g = Grower(args, seed)
    res = {"seed": seed, "prompts": g.prompts, "arms": {}}
    for arm in args.arms:
        t = time.perf_counter()
        out = g.tree_x_pool() if arm == "tree x pool" else g.grow(arm)
        if arm == "tree x pool":
            out["spreads"] = [txp_spreads(g.txp_tree, s, lv) for s, lv in zip(out["selected"], out["leaves"])]
        else:
            out["spreads"] = [depth_spreads(lv, g.k, g.D) for lv in out["leaves"]]
        out["wall"] = time.perf_counter() - t
        res["arms"][arm] = out
        print(f"  seed {seed} {arm:<11} NFE fp {out['nfe']['fp']}, lowp {out['nfe']['lowp']} ({out['wall']:.0f} s)",
              flush=True)
    res["wall"] = time.perf_counter() - t0
    return res


def costs(args) -> dict[str, dict[str, float]]:
    """Per tree: NFE per precision, trained row-steps and projected units (all nodes trained / with tree+prune's
    pruning), from the configs the trainer would run (``diffusion_rl.strategies``)."""
    k, m, D, T = args.keep, args.cands, len(args.splits), args.steps
    b = [*args.splits, T]
    look_lowp = sum(k ** d * m * (T - b[d]) for d in range(D))  # m previews per parent, each to the end
    look_fpp = look_lowp  # the oracle's previews, in full precision

    prune_kw = dict(width_prune="topk_per_parent", prune_k=1, depth_window=min(2, len(args.splits)))

    def cfg(prune: bool, branch: list[int], pool: bool = False):
        bc = BranchConfig(enabled=True, split_steps=list(args.splits), branch=branch, **(prune_kw if prune else {}))
        pc = PoolConfig(enabled=pool, pool_size=math.prod(branch) if pool else 16, train_size=k ** D if pool else 4,
                        quant=QuantConfig(format=args.format))
        return DiffusionRLConfig(sampler=SamplerConfig(num_steps=T, eta=args.eta), branch=bc, pool=pc,
                                 grpo=GRPOConfig(group_size=k ** D), train=TrainConfig(prompts_per_iter=1))
    out = {}
    wide = [k] * (D - 1) + [k * m]
    for prune in (False, True):
        c = cfg(prune, [k])
        base = tree_cost(c)
        tag = "+prune" if prune else ""
        for arm, lowp, extra_fp in (("random", 0, 0), ("lookahead", look_lowp, 0), ("oracle", 0, look_fpp),
                                    ("lookahead@1", m * (T - b[0]), 0)):
            fp = base["nfe_policy"] + extra_fp
            out.setdefault(arm, {}).update({"nfe_fp": fp, "nfe_lowp": lowp, f"backward{tag}": base["backward"],
                                            f"units{tag}": projected_gpu_units(c, fp, lowp, base["backward"])})
        tp = tree_pool_cost(cfg(prune, wide, pool=True))  # expectation over random leaves, backward a bound (prune)
        out.setdefault("tree x pool", {}).update({"nfe_fp": tp["nfe_policy"], "nfe_lowp": tp["nfe_lowp"],
                                                  f"backward{tag}": tp["backward"], f"units{tag}": tp["gpu_units"]})
    out[f"fp {m}-ary tree"] = {"nfe_fp": RolloutTree(T, args.splits, m).nfe(), "nfe_lowp": 0}
    return out


def report(args, runs: list[dict]) -> None:
    k, m, D = args.keep, args.cands, len(args.splits)
    nprompt = sum(len(r["prompts"]) for r in runs)
    print(f"\nlookahead trees on the big-shapes task: {args.steps} steps, splits {args.splits}, {m} candidates per "
          f"split -> keep {k} (best+worst), {k ** D} full-precision leaves per tree; previews in {args.format}; "
          f"seeds {[r['seed'] for r in runs]}, {nprompt} prompts in all; mean +- SE over prompts\n")
    print("(a) predictiveness of the low-precision preview, per split depth (random arm's candidates)\n")
    hdr = ("| depth | split step | preview steps | sibling groups | flat groups "
           "| Spearman(q, f) within parent | Pearson, parent-centred | top-1 agreement | best+worst agreement "
           "| sign q vs subtree | sign f vs subtree |")
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    for d in range(D):
        gs = [g for r in runs if "random" in r["arms"] for g in r["arms"]["random"]["groups"] if g["d"] == d]
        sp, cq, cf, top, bw = [], [], [], [], []
        flat = 0
        for g in gs:
            q, f = g["q"], g["f"]
            if len(set(q)) == 1 or len(set(f)) == 1:
                flat += 1
                continue
            sp.append(pearson(ranks(q), ranks(f)))
            mq, mf = statistics.fmean(q), statistics.fmean(f)
            cq += [v - mq for v in q]
            cf += [v - mf for v in f]
            top.append(float(max(range(m), key=lambda i: (q[i], -i)) == max(range(m), key=lambda i: (f[i], -i))))
            bw.append(float(select_subset(torch.tensor(q), 2, "best_worst").tolist()
                            == select_subset(torch.tensor(f), 2, "best_worst").tolist()))
        # kept sibling pairs: preview difference vs subtree-mean difference (depths < D)
        sq, sf = [], []
        if d < D - 1:
            for r in runs:
                if "random" not in r["arms"]:
                    continue
                a = r["arms"]["random"]
                dgs = [g for g in a["groups"] if g["d"] == d]
                w = k ** (D - d - 1)  # leaves below a kept child of depth d
                for i, g in enumerate(dgs):
                    lv = a["leaves"][g["j"]]
                    per_tree = len(dgs) // len(a["leaves"])
                    base = (i % per_tree) * k * w
                    sub = [statistics.fmean(lv[base + c * w: base + (c + 1) * w]) for c in range(k)]
                    for c1 in range(k):
                        for c2 in range(c1 + 1, k):
                            ds = sub[c1] - sub[c2]
                            if ds == 0:
                                continue
                            i1, i2 = g["kept"][c1], g["kept"][c2]
                            for vals, acc in ((g["q"], sq), (g["f"], sf)):
                                dv = vals[i1] - vals[i2]
                                acc.append(0.5 if dv == 0 else float((dv > 0) == (ds > 0)))
        pc = pearson(cq, cf) if len(cq) > 2 else None
        print(f"| {d + 1} | {args.splits[d]} | {args.steps - args.splits[d]} | {len(gs)} | {flat} "
              f"| {fmt(sp) if sp else '-'} | {'-' if pc is None else f'{pc:.2f}'} "
              f"| {fmt(top) if top else '-'} (chance {1 / m:.2f}) | {fmt(bw) if bw else '-'} (chance "
              f"{1 / (m * (m - 1)):.2f}) | {fmt(sq) if sq else '-'} | {fmt(sf) if sf else '-'} |")
    cost = costs(args)
    cost_cfg = DiffusionRLConfig(pool=PoolConfig(quant=QuantConfig(format=args.format)))  # the units' lowp ratio
    print("\n(b) training signal of the kept full-precision leaves, and cost per tree (projected GPU units: "
          f"{args.format} at its published ratio; '+prune': tree+prune's width/depth pruning of the trained rows)\n")
    hdr = ("| arm | NFE fp | NFE lowp | units | units +prune | leaf reward std | "
           + " | ".join(f"depth-{d} spread" for d in range(1, D)) + " | mean leaf reward |")
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    per = {}
    for arm in args.arms:
        leaves = [lv for r in runs for lv in r["arms"][arm]["leaves"]]
        spreads = [s for r in runs for s in r["arms"][arm]["spreads"]]
        nfe_fp = statistics.fmean(r["arms"][arm]["nfe"]["fp"] / len(r["prompts"]) for r in runs)
        nfe_lp = statistics.fmean(r["arms"][arm]["nfe"]["lowp"] / len(r["prompts"]) for r in runs)
        if arm == "random":  # its previews (both precisions) are the measurement of table (a), not the method
            nfe_fp, nfe_lp = nfe_fp - nfe_lp, 0.0
        per[arm] = {"std": [pstd(lv) for lv in leaves], "sp": spreads, "mean": [statistics.fmean(lv) for lv in leaves]}
        u, up = (projected_gpu_units(cost_cfg, nfe_fp, nfe_lp, cost[arm][f"backward{t}"]) for t in ("", "+prune"))
        print(f"| {arm} | {nfe_fp:.0f} | {nfe_lp:.0f} | {u:.0f} | {up:.0f} | {fmt(per[arm]['std'], 3)} | "
              + " | ".join(fmt([s[d] for s in spreads], 3) for d in range(D - 1))
              + f" | {fmt(per[arm]['mean'], 3)} |")
    full = cost[f"fp {m}-ary tree"]
    print(f"| fp {m}-ary tree (reference) | {full['nfe_fp']:.0f} | 0 | - | - | - | " + " | ".join("-" for _ in
                                                                                          range(D - 1)) + " | - |")
    if "random" in per:
        print("\npaired differences over prompts (arm - random):")
        for arm in (a for a in args.arms if a != "random"):
            ds = [a - b for a, b in zip(per[arm]["std"], per["random"]["std"])]
            dd = [a[0] - b[0] for a, b in zip(per[arm]["sp"], per["random"]["sp"])]
            m_, se = mean_se(ds)
            rel = m_ / max(1e-9, statistics.fmean(per["random"]["std"]))
            print(f"  {arm:<11} leaf std {m_:+.3f} +- {se:.3f} ({rel:+.0%}), depth-1 spread {fmt(dd, 3)}")
    if "lookahead" in per and "tree x pool" in per:
        ds = [a - b for a, b in zip(per["lookahead"]["std"], per["tree x pool"]["std"])]
        dd = [a[0] - b[0] for a, b in zip(per["lookahead"]["sp"], per["tree x pool"]["sp"])]
        print(f"  lookahead - tree x pool: leaf std {fmt(ds, 3)}, depth-1 spread {fmt(dd, 3)}")
    walls = ", ".join(f"seed {r['seed']} {sum(r['arms'][a]['wall'] for a in args.arms):.0f} s" for r in runs)
    print(f"\nwall: {walls}")
    print("(NFE per tree as measured; units = NFE fp + NFE lowp / the format's published ratio + 3 x the trained "
          "row-steps of a k-ary tree of these splits (tree x pool: its pruned tree's, in expectation), "
          "diffusion_rl.strategies.projected_gpu_units)")


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 (or --seed-list)")
    ap.add_argument("--seed-list", default=None, help="comma-separated seeds instead of 0..N-1")
    ap.add_argument("--prompts", type=int, default=8, help="prompts (trees) per seed")
    ap.add_argument("--steps", type=int, default=10, help="denoising steps")
    ap.add_argument("--splits", default="0,2,4", help="split steps (comma-separated, increasing, < --steps)")
    ap.add_argument("--cands", type=int, default=4, help="m: candidate children previewed per split")
    ap.add_argument("--keep", type=int, default=2, help="k: children kept per split (best ceil(k/2) + worst)")
    ap.add_argument("--format", default="nvfp4", choices=("fp8", "nvfp4"), help="the quantized copy's format")
    ap.add_argument("--eta", type=float, default=0.7, help="SDE noise level")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {', '.join(ARMS)}")
    ap.add_argument("--model-path", default="builtin:shapes_sd3")
    ap.add_argument("--target-area", type=float, default=TARGET_AREA, help="the task's object area in px^2")
    ap.add_argument("--out", default="/tmp/bench_lookahead", help="trainer output dir (nothing is written)")
    ap.add_argument("--json-out", default=None, help="also write the per-seed results to this JSON file")
    ap.add_argument("--report-from", default=None, help="comma-separated --json-out files: print their tables only "
                    "(a seed's arms from several runs are joined; an arm in two runs must have the same leaves)")
    ap.add_argument("--small", action="store_true", help="seconds: 4 steps, splits 0,2, 2 prompts")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--small" in argv:
        ap.set_defaults(steps=4, splits="0,2", prompts=2)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    problems = []
    try:
        args.splits = [int(s) for s in args.splits.split(",")]
    except ValueError:
        problems.append(f"--splits {args.splits!r}: expected comma-separated step indices like 0,2,4")
        args.splits = [0]
    if args.splits != sorted(set(args.splits)) or args.splits[0] < 0 or args.splits[-1] >= args.steps:
        problems.append(f"--splits {args.splits}: expected increasing steps in [0, --steps {args.steps})")
    if not 2 <= args.keep < args.cands:
        problems.append(f"--keep {args.keep} / --cands {args.cands}: expected 2 <= keep < cands")
    args.arms = [a.strip() for a in args.arms.split(",")]
    if [a for a in args.arms if a not in ARMS] or not args.arms:
        problems.append(f"--arms {','.join(args.arms)!r}: expected a subset of {', '.join(ARMS)}")
    for flag, v, ok in (("--seeds", args.seeds, args.seeds >= 1), ("--prompts", args.prompts, args.prompts >= 1),
                        ("--steps", args.steps, args.steps >= 2), ("--eta", args.eta, args.eta > 0),
                        # (was: the task's ValueError traceback once the model was loaded)
                        ("--target-area", args.target_area, 0 < args.target_area < float("inf"))):
        if not ok:
            problems.append(f"{flag} {v}: out of range")
    try:
        seeds = parse_seed_list(args.seed_list, args.seeds)
    except ValueError as e:
        problems.append(str(e))
    if args.report_from is None:  # the trainers' folder, before the first run (was: a symlink loop there failed late)
        from grpo.preflight import check_writable_dir

        try:
            check_writable_dir(args.out, "--out")
        except ValueError as e:
            problems.append(str(e))
    if args.json_out is not None and not args.json_out.strip():  # (was: the results written nowhere)
        problems.append(f"--json-out {args.json_out!r} is empty (expected a file path in an existing folder)")
    if problems:
        print(f"bench_lookahead: {problems[0]}", file=sys.stderr)
        return 2
    # the training-side settings make_trainer reads (nothing trains here)
    args.lr, args.eval_steps, args.eval_prompts = 1e-3, args.steps, 1
    runs = []
    if args.report_from is not None:  # (an empty one is refused by read_json_runs)
        try:
            runs = join_seeds(read_json_runs(args.report_from), "leaves", "leaf rewards")
        except (OSError, ValueError, KeyError) as e:
            print(f"bench_lookahead: {e}" if "--report-from" in str(e) else
                  f"bench_lookahead: --report-from {args.report_from!r}: {e}", file=sys.stderr)
            return 2
        if missing_arms("bench_lookahead", runs, args.arms):
            return 2
        report(args, runs)
        return 0
    for s in seeds:
        runs.append(run_seed(args, s))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(runs))
    report(args, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
