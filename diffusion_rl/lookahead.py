"""Lookahead@1: a full-precision BranchGRPO tree whose first split keeps the children a low-precision preview finds
best and worst (issue 35, item 3; the measurement that motivated it: docs/RESULTS.md, "Lookahead trees").

The plain tree has factors ``k, k_2, ..., k_D`` at split steps ``s_1 < ... < s_D`` of ``T`` steps. With
``branch.lookahead_candidates = m > k`` its nodes are indexed in the *wide* tree ``W`` (factors ``m, k_2, ..., k_D``,
:meth:`~diffusion_rl.branch.BranchConfig.lookahead_tree`; ``N = |W|`` nodes). Per prompt ``p``::

    root         x_{s_1} in full precision (steps [0, s_1), the plain tree's root segment)
    candidates   the m depth-1 nodes c of W; candidate c's noise on its own segment [s_1, s_2) is the node's keyed
                 noise (seed, iteration, STREAM_TREE_NODE, p N + c) -- exactly what the tree rollout draws for c --
                 and on [s_2, T) a preview-only stream (seed, iteration, STREAM_LOOKAHEAD, p N + c)
    preview      q_{p,c} = R(chain_q(x_{s_1}; eps_c))   the quantized rollout copy (pool.quant, NVFP4 / FP8; the
                 pool's and tree x pool's copy), steps s_1..T-1, scored by the run's reward        [P', m]
    keep         K_p = select_subset(q_p, k, "best_worst"): the best ceil(k/2) and worst floor(k/2) candidates
    grow         branch.tree_rollout(policy, W, present = root + K_p + their whole subtrees): the kept children
                 and everything below them in full precision, each node from its own keyed noise, so the kept
                 paths are bit for bit the full-precision rollout of W restricted to them (tested); per-step
                 latents and log pi_old stored, the trained log-probs exact
    credit       BranchGRPO's (grpo.tree.tree_advantages with ``present``) on the kept tree: it has the plain
                 tree's shape (k children at the first split), so its credit equals the plain tree's for the same
                 leaf rewards; width / depth pruning apply among the kept nodes (``lookahead@1+prune``)

Cost per prompt: the plain tree's ``RolloutTree.nfe()`` full-precision calls + ``m (T - s_1)`` low-precision calls
(x2 with CFG), the plain tree's backward rows (:func:`diffusion_rl.strategies.lookahead_cost`). Selection is
deterministic (best_worst) and the noise keyed per node, so any split of the prompts over processes and any resume
reproduce one process's run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from grpo.flow_sde import flow_chain, flow_sigmas
from grpo.selection import select_subset
from grpo.tree import RolloutTree

from .adapters import cond_select
from .branch import tree_rollout
from .pool_rollout import _finite_rows
from .sampling import STREAM_TREE_NODE, Rollout, SamplerConfig, guided_velocity, keyed_noise

STREAM_LOOKAHEAD = 111  # key stream of the previews' noise after the candidate's own segment (distinct from 1..5, 101)


@dataclass
class LookaheadRollout:
    rollout: Rollout  # the kept trees in full precision (records, present leaves as ``final``), extra as documented
    preview_rewards: torch.Tensor  # [P', m] the candidates' preview rewards (low precision)
    kept: torch.Tensor  # [P', k] the kept candidates (0..m-1), ascending
    present: torch.Tensor  # [P', N] bool, the kept tree per prompt in the wide tree's node ids
    selected: torch.Tensor  # [P', L_kept] the kept leaves' positions in W.leaves, ascending (the rewards' order)
    nfe_lowp: int  # the previews' denoiser calls (a CFG pair counts 2)
    nfe_policy: int  # the kept tree's full-precision calls
    seconds_preview: float
    nonfinite_previews: int = 0


def kept_present(tree: RolloutTree, kept: torch.Tensor) -> torch.Tensor:
    """``[P', N]`` bool: the root, the kept depth-1 candidates ``kept [P', k]`` (positions among the root's
    children) and every node below them."""
    present = torch.zeros(kept.shape[0], len(tree), dtype=torch.bool, device="cpu")
    present[:, 0] = True
    cands = tree.nodes[0].children
    for j, row in enumerate(kept.tolist()):
        for c in row:
            stack = [cands[c]]
            while stack:
                n = stack.pop()
                present[j, n] = True
                stack += tree.nodes[n].children
    return present


@torch.no_grad()
def lookahead_rollout(adapter, explorer, prompts: list[str], tree: RolloutTree, keep: int, sc: SamplerConfig,
                      score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, seed: int, iteration: int = 0,
                      prompt_ids: Sequence[int] | None = None, uncond_prompt: str = "") -> LookaheadRollout:
    """Preview the first split's candidates with ``explorer``, keep ``keep`` of them, grow the kept tree with
    ``adapter`` (module docstring).

    Args:
        adapter: the policy; explorer: its quantized view (:class:`~diffusion_rl.pool_rollout.QuantizedAdapterView`).
        tree: the wide tree ``W`` (``m`` children of the root); keep: ``k``, the plain tree's first factor.
        score_fn: ``(final latents [R, ...], global prompt index [R]) -> rewards [R]`` (decode + reward).
        prompt_ids: the global prompts whose trees are grown here (a rank's share; default all).
    """
    pids = list(range(len(prompts))) if prompt_ids is None else [int(p) for p in prompt_ids]
    N, cands = len(tree), tree.nodes[0].children
    m = len(cands)
    if not 1 <= keep < m:
        raise ValueError(f"lookahead keeps {keep} of the {m} candidates at the first split: expected 1 <= keep < {m}")
    s1 = tree.split_steps[0]
    s2 = tree.nodes[cands[0]].end  # the candidates' own segment [s1, s2)
    T = sc.num_steps
    shape = tuple(adapter.latent_shape)
    sigmas = flow_sigmas(T, sc.shift)
    mask = sc.sde_mask(iteration, force=tuple(tree.split_steps))
    use_cfg = sc.cfg_scale != 1.0
    info: dict = {}

    def choose(roots: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        rows = [p * N + c for p in pids for c in cands]
        pidx = torch.tensor([p for p in pids for _ in cands], dtype=torch.long, device="cpu")
        x = roots.repeat_interleave(m, dim=0)  # [P' m, *latent], the full-precision state at s_1
        own = keyed_noise((s2 - s1, *shape), seed, iteration, STREAM_TREE_NODE, rows)  # [R, s2 - s1, ...]
        rest = keyed_noise((T - s2, *shape), seed, iteration, STREAM_LOOKAHEAD, rows) if T > s2 else None

        def noise(i):
            return (own[:, i - s1] if i < s2 else rest[:, i - s2]).to(adapter.device)
        cond = cond_select(adapter.encode_prompts(list(prompts)), pidx)
        uncond = None
        if use_cfg:
            one = adapter.encode_prompts([uncond_prompt])
            uncond = {k: v.expand(len(rows), *v.shape[1:]) for k, v in one.items()}
        xq = flow_chain(lambda i, z: guided_velocity(explorer, z, sigmas[i], cond, uncond, sc.cfg_scale), x, sigmas,
                        kind=sc.sde, eta=sc.eta, steps=range(s1, T), sde_mask=mask, noise=noise, keep=False)[0]
        q = torch.as_tensor(score_fn(xq, pidx), device="cpu").detach().float().reshape(len(pids), m)
        finite, info["bad"] = _finite_rows(q)
        kept = torch.stack([select_subset(finite[j], keep, "best_worst").sort().values for j in range(len(pids))])
        info.update(q=q, kept=kept, nfe=len(rows) * (T - s1) * (2 if use_cfg else 1), s=time.perf_counter() - t0)
        info["present"] = kept_present(tree, kept)
        return info["present"]

    ro = tree_rollout(adapter, prompts, tree, sc, None, iteration, uncond_prompt, seed=seed, prompt_ids=pids,
                      choose=choose)
    present, leaves = info["present"], torch.tensor(tree.leaves, dtype=torch.long, device="cpu")
    selected = torch.stack([torch.nonzero(present[j, leaves]).flatten() for j in range(len(pids))])
    nfe_policy = ro.nfe
    ro.extra.update({"nfe_pool": info["nfe"], "nfe_policy": nfe_policy, "selected": selected, "present": present,
                     "pool_rewards": info["q"], "kept": info["kept"]})
    ro.nfe = nfe_policy + info["nfe"]
    return LookaheadRollout(ro, info["q"], info["kept"], present, selected, info["nfe"], nfe_policy, info["s"],
                            info["bad"])
