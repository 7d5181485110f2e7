"""BranchGRPO tree rollouts (Li et al. 2025): shared prefixes, branching at split steps, fusion, pruning.

Each prompt gets a :class:`grpo.tree.RolloutTree` (split steps ``s_1 < ... < s_D``, branch factors ``k_d``,
not fixed at 2). Rollout goes depth by depth; **all nodes of one depth, over all prompts, are one denoiser
batch** per step, so a shared prefix is computed once::

    depth 0 (roots, P rows):            steps [0, s_1)
    depth d (P * prod_{e<=d} k_e rows):  steps [s_d, s_{d+1}); every child starts from its parent's x_{s_d}
                                        and draws its OWN noise at s_d, so its log-prob at the split step is
                                        log N(x^child_{s_d+1}; mu(x^parent_{s_d}), std^2), the density actually sampled.

NFE per prompt = ``sum_n |segment_n|`` (``RolloutTree.nfe``) versus ``L * T`` for flat GRPO with the same
``L`` leaves. Leaves are decoded and rewarded; the credit is :func:`grpo.tree.tree_advantages`: rewards are fused up
the tree (mean, or path-probability weighted one split at a time: ``r_n = sum_c softmax_c(lp_c / tau) r_c`` with
``lp_c`` the log-prob of child ``c``'s split step, BranchGRPO Sec. 3.3), normalised per depth
(``A_n = (r_n - mean_d) / (std_d + eps)``, BranchGRPO Eq. 7), and node ``n``'s advantage applies to the
steps of its segment. Pruning cuts backward passes only (the rollout is unchanged):

* width pruning (:func:`grpo.tree.width_prune`): leaves kept per last-split parent (top-k by ``|r - mean|``)
  or the global best/worst ``k`` leaves;
* depth pruning: only the depths in a sliding window (:func:`grpo.flow_sde.sliding_window`) are trained.

BranchGRPO-Mix: outside a sliding SDE window the steps are ODE (not trained); the split steps always draw noise
so that siblings diverge (both in :func:`grpo.flow_sde.mix_sde_mask`, the ``force`` steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Literal

import torch

from grpo.config import require_at_least
from grpo.flow_sde import flow_sigmas
from grpo.tree import MAX_TREE_NODES, RolloutTree, TreeCredit, tree_advantages, tree_size

from .adapters import DiffusionAdapter, cond_select
from .sampling import (
    STREAM_TREE_NODE,
    STREAM_TREE_ROOT,
    Rollout,
    SamplerConfig,
    denoise_rows,
    keyed_noise,
    seed_from,
)


@dataclass
class BranchConfig:
    """Tree settings (the YAML ``branch:`` section); ``enabled: false`` means flat GRPO."""

    enabled: bool = False  # BranchGRPO tree rollouts (false: flat GRPO)
    split_steps: list[int] = field(default_factory=lambda: [2, 4, 6, 8])  # denoising steps at which every node branches
    branch: list[int] = field(default_factory=lambda: [2])  # one factor for all splits, or one per split
    fusion: Literal["mean", "path_prob"] = "mean"  # leaf -> node rewards: mean or path_prob
    fusion_temperature: float = 1.0  # path_prob softmax temperature
    width_prune: Literal["none", "topk_per_parent", "best_worst"] = "none"  # which leaves are trained
    prune_k: int = 1  # leaves kept per parent / per end by width_prune
    depth_window: int = 0  # > 0: train only this many consecutive depths (sliding), 0 = all depths
    depth_stride: int = 1  # iterations per one-depth advance of depth_window
    # Credit per node n (fused reward r_n), A_n = (r_n - baseline_n) / (scale + eps), the root gets 0:
    # adv_baseline  "depth":  the mean over all nodes of n's depth (BranchGRPO Eq. 7, default);
    #               "parent": n's parent's fused reward (mean fusion: the mean over n and its siblings). n's own noise
    #                         draws (its segment) are what tell it apart from its siblings, so r_n - r_parent credits
    #                         exactly them, while the depth mean leaves late segments with the reward gaps of the
    #                         early decisions their whole subtree shares.
    # adv_scale     "depth":  the std of the fused rewards at n's depth (Eq. 7, default; two nodes at depth 1 always
    #                         get +-0.71 (+-1 with depth_norm population) however small their gap);
    #               "leaf":   the std of the tree's leaf rewards (flat GRPO's group std; internal nodes keep the
    #                         smaller spread of their fused rewards).
    adv_baseline: Literal["depth", "parent"] = "depth"  # depth (Eq. 7, the depth's mean) or parent
                                                        # (the parent's fused reward)
    adv_scale: Literal["depth", "leaf"] = "depth"  # depth (Eq. 7, the depth's std) or leaf (the tree's leaf std)
    # depth_norm   "reference" (default): BranchGRPO's code: unbiased std, eps 1e-8, zero advantages where the
    #              std < 1e-6;
    #              "population": population std + grpo.adv_eps (x sqrt(n / (n - 1)) of the reference at n nodes).
    depth_norm: Literal["reference", "population"] = "reference"  # reference (unbiased std, eps 1e-8) or
                                                                  # population (std, adv_eps)
    lookahead_candidates: int = 0  # lookahead@1 (diffusion_rl.lookahead): m > the first factor k candidate children at
                                   # the first split, previewed to a leaf by the pool.quant copy, best ceil(k/2) +
                                   # worst floor(k/2) kept and grown in full precision; 0 = off (the plain tree)

    def __post_init__(self) -> None:
        if self.fusion_temperature <= 0:
            raise ValueError(f"branch.fusion_temperature must be > 0 (the path_prob softmax divides by it), got "
                             f"{self.fusion_temperature}")
        require_at_least("branch", self, prune_k=1, depth_window=0, depth_stride=1, lookahead_candidates=0)

    def branch_factors(self) -> list[int]:
        if len(self.branch) == 1:
            return self.branch * len(self.split_steps)
        return list(self.branch)

    def make_tree(self, num_steps: int) -> RolloutTree:
        bad = [s for s in self.split_steps if s >= num_steps]
        if bad:
            raise ValueError(f"branch.split_steps {bad} are beyond the last step: sampler.num_steps={num_steps} "
                             f"allows split steps in [0, {num_steps - 1}]")
        if len(self.branch) not in (1, len(self.split_steps)):
            raise ValueError(f"branch.branch needs 1 factor or one per split step ({len(self.split_steps)}), got "
                             f"{self.branch}")
        factors = self.branch_factors()
        if not factors:
            raise ValueError("branch.split_steps is empty: the tree has 1 leaf (expected at least one split step; the "
                             "leaves are the group)")
        if self.depth_window > len(self.split_steps):
            raise ValueError(f"branch.depth_window={self.depth_window}: the tree has {len(self.split_steps)} depths "
                             f"(branch.split_steps={self.split_steps}); expected 0 (all depths) .. "
                             f"{len(self.split_steps)}")
        if min(factors) >= 1 and tree_size(factors) > MAX_TREE_NODES:
            raise ValueError(f"branch.branch={self.branch} over branch.split_steps={self.split_steps}: a tree of more "
                             f"than {MAX_TREE_NODES} nodes per prompt (expected smaller factors)")
        if self.lookahead_candidates and min(factors) >= 1 and \
                tree_size([self.lookahead_candidates, *factors[1:]]) > MAX_TREE_NODES:
            raise ValueError(f"branch.lookahead_candidates={self.lookahead_candidates}: the previewed tree has more "
                             f"than {MAX_TREE_NODES} nodes per prompt (expected a few more candidates than the first "
                             f"factor {factors[0]}, e.g. {2 * factors[0]})")
        if min(factors) >= 1 and math.prod(factors) < 2:
            raise ValueError(f"branch.branch={self.branch}: the tree has 1 leaf (expected factors whose product is >= "
                             "2: the leaves are the group)")
        self._check_prune_k(factors)
        return RolloutTree(num_steps, self.split_steps, factors)

    def _check_prune_k(self, factors: list[int]) -> None:
        """``prune_k`` leaves something to prune (was: accepted; a k of at least the children per parent, or of half
        the leaves with best_worst, kept every leaf: a "pruned" run that pruned nothing)."""
        k = self.prune_k
        if self.width_prune == "topk_per_parent" and min(factors) >= 1 and k >= factors[-1]:
            raise ValueError(f"branch.prune_k={k} with branch.width_prune=topk_per_parent: each last-split parent has "
                             f"{factors[-1]} children, so none is pruned; expected prune_k < {factors[-1]} (or "
                             "width_prune: none)")
        if self.width_prune == "best_worst" and min(factors) >= 1 and 2 * k >= math.prod(factors):
            raise ValueError(f"branch.prune_k={k} with branch.width_prune=best_worst: the {k} best and {k} worst of "
                             f"{math.prod(factors)} leaves are all of them, so none is pruned; expected 2 x prune_k < "
                             f"{math.prod(factors)} (or width_prune: none)")

    def lookahead_tree(self, num_steps: int) -> RolloutTree:
        """The tree a lookahead@1 rollout indexes its nodes in: :meth:`make_tree` with the first factor widened to
        ``lookahead_candidates`` (its depth-1 nodes are the candidates; the kept tree is a pruned subtree of it)."""
        plain = self.make_tree(num_steps)
        return RolloutTree(num_steps, self.split_steps, [self.lookahead_candidates, *self.branch_factors()[1:]]) \
            if self.lookahead_candidates else plain


@torch.no_grad()
def tree_rollout(adapter: DiffusionAdapter, prompts: list[str], tree: RolloutTree, sc: SamplerConfig,
                 generator: torch.Generator | None = None, iteration: int = 0, uncond_prompt: str = "", *,
                 seed: int | None = None, prompt_ids: range | list[int] | None = None,
                 present: torch.Tensor | None = None,
                 choose: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Rollout:
    """Roll out one tree per prompt; node ``n`` of prompt ``p`` has global row id ``p * len(tree) + n``.

    ``prompt_ids``: the global prompt indices whose trees are rolled out here (a rank's share; default all).
    The root latent of tree ``p`` is keyed by ``(seed, iteration, p)`` and node ``p * N + n`` draws the noise of its
    own segment from ``(seed, iteration, p * N + n)`` (:func:`diffusion_rl.sampling.keyed_noise`), so any split of
    the trees over ranks reproduces the single-process rollout.

    Returns a :class:`Rollout` whose ``final`` are the leaves ``[P' * L, *latent]`` (prompt-major, ``P'`` trees
    rolled out here) and whose ``extra["edge_log_prob"]`` is ``[P', N]``: the log-prob of each node's split step (the
    first step of its segment; 0 for the roots), what BranchGRPO's path-probability fusion weighs siblings by.

    ``present [P', N]`` bool (rows in ``prompt_ids`` order; default: every node): roll out only these nodes of each
    tree, a pruned subtree per prompt (:func:`grpo.tree.subtree_of_leaves`): a depth's present nodes over all
    prompts are still one denoiser batch, a present node draws exactly the noise it draws in the whole tree, and
    ``final`` holds the present leaves only (prompt-major, in ``tree.leaves`` order). This is the full-precision
    regeneration of a tree-x-pool rollout (:mod:`diffusion_rl.tree_pool`); all nodes present is the plain rollout.

    ``choose`` (instead of ``present``): called once, after the roots' segment, with the roots' latents at the first
    split ``[P', *latent]`` (``prompt_ids`` order); returns the ``present [P', N]`` the rest of the rollout grows
    (the lookahead's selection, :mod:`diffusion_rl.lookahead`). A node then draws the noise it draws in the whole tree.
    """
    N = len(tree)
    seed = seed_from(generator, seed)
    pids = list(range(len(prompts))) if prompt_ids is None else [int(p) for p in prompt_ids]
    P = len(pids)
    if present is not None:
        present = torch.as_tensor(present, device="cpu").bool()
        if present.shape != (P, N):
            raise ValueError(f"present must have shape [{P}, {N}] (prompts rolled out here x tree nodes), got "
                             f"{tuple(present.shape)}")
    shape = adapter.latent_shape
    sigmas = flow_sigmas(sc.num_steps, sc.shift)
    mask = sc.sde_mask(iteration, force=tuple(tree.split_steps))
    use_cfg = sc.cfg_scale != 1.0
    cond_all = adapter.encode_prompts(list(prompts))
    uncond_one = adapter.encode_prompts([uncond_prompt]) if use_cfg else None
    state: dict[int, torch.Tensor] = {}  # global node id -> latent at the end of its segment
    records, nfe = [], 0
    edge_lp = torch.zeros(P, N, device="cpu")
    x_root = keyed_noise(shape, seed, iteration, STREAM_TREE_ROOT, pids)
    for d in range(tree.depth + 1):
        ids = tree.nodes_at_depth(d)
        node0 = tree.nodes[ids[0]]
        pairs = [(j, p, n) for j, p in enumerate(pids) for n in ids if present is None or bool(present[j, n])]
        if not pairs:
            continue
        rows = torch.tensor([p * N + n for _, p, n in pairs], dtype=torch.long, device="cpu")
        # rows of edge_lp.view(-1)
        local = torch.tensor([j * N + n for j, _, n in pairs], dtype=torch.long, device="cpu")
        prompt_idx = torch.tensor([p for _, p, _ in pairs], dtype=torch.long, device="cpu")
        if d == 0:
            x = x_root.to(adapter.device) if present is None else x_root[[j for j, _, _ in pairs]].to(adapter.device)
        else:
            x = torch.stack([state[p * N + tree.nodes[n].parent] for _, p, n in pairs])
        seg = range(node0.start, node0.end)
        seg_noise = keyed_noise((len(seg), *shape), seed, iteration, STREAM_TREE_NODE, rows.tolist())  # [R, |seg|, ...]
        noise = {i: seg_noise[:, j] for j, i in enumerate(seg)}
        cond = cond_select(cond_all, prompt_idx)
        uncond = {k: v.expand(len(rows), *v.shape[1:]) for k, v in uncond_one.items()} if use_cfg else None
        x, recs, n = denoise_rows(adapter, x, cond, uncond, sc, sigmas, seg, mask,
                                  lambda i: noise[i].to(adapter.device), rows, prompt_idx)
        nfe += n
        records += recs
        for r in recs:
            if d > 0 and r.step == node0.start:  # the split step: each child's own first noise draw
                edge_lp.view(-1)[local] += r.log_prob.cpu() * float(r.stochastic)
        for j, g in enumerate(rows.tolist()):
            state[g] = x[j]
        if d == 0 and choose is not None:
            present = torch.as_tensor(choose(torch.stack([state[p * N] for p in pids])), device="cpu").bool()
            if present.shape != (P, N) or not bool(present[:, 0].all()):
                raise ValueError(f"choose must return present [{P}, {N}] with every root present, got "
                                 f"{tuple(present.shape)}")
    kept = [(p, n) for j, p in enumerate(pids) for n in tree.leaves if present is None or bool(present[j, n])]
    leaves = torch.tensor([p * N + n for p, n in kept], dtype=torch.long, device="cpu")
    final = (torch.stack([state[g] for g in leaves.tolist()]) if len(leaves)
             else torch.zeros((0, *shape), device=adapter.device))
    return Rollout(records, final, leaves, torch.tensor([p for p, _ in kept], dtype=torch.long, device="cpu"), nfe,
                   extra={"edge_log_prob": edge_lp})


def tree_credit(tree: RolloutTree, leaf_rewards: torch.Tensor, bc: BranchConfig, edge_log_prob: torch.Tensor,
                iteration: int = 0, eps: float = 1e-4, clip: float | None = None,
                present: torch.Tensor | None = None) -> TreeCredit:
    """:func:`grpo.tree.tree_advantages` (BranchGRPO's credit, the one implementation) with the settings of the YAML
    ``branch:`` section ``bc``, for ``leaf_rewards [P, L]``; ``clip`` is ``grpo.adv_clip``; ``present [P, N]``: the
    pruned subtrees (tree x pool), see :func:`grpo.tree.tree_advantages`."""
    return tree_advantages(tree, leaf_rewards, edge_log_prob, fusion=bc.fusion, temperature=bc.fusion_temperature,
                           depth_norm=bc.depth_norm, eps=eps, baseline=bc.adv_baseline, scale=bc.adv_scale, clip=clip,
                           width_prune_mode=bc.width_prune, prune_k=bc.prune_k, depth_window=bc.depth_window,
                           depth_stride=bc.depth_stride, iteration=iteration, present=present)
