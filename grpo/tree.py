"""Rollout trees for BranchGRPO (Li et al. 2025, "BranchGRPO: Stable and Efficient GRPO with
Structured Branching in Diffusion Models").

A denoising chain of ``num_steps`` steps is split at ``split_steps = [s_1 < ... < s_D]``. At each split
every node spawns ``branch[d]`` children that share its prefix (computed once) and draw their own SDE
noise from the split step on. Node segments (half-open step ranges)::

    root:            [0,   s_1)
    depth d (1..D):  [s_d, s_{d+1})          with s_{D+1} = num_steps

so the split step itself is the first step of each child, and its log-prob is the density of the
child's own noise draw. Nodes are stored in breadth-first order; leaves are the nodes at depth D.

* NFE (denoiser calls per tree, without CFG): ``sum_n len(segment_n)``, against
  ``num_leaves * num_steps`` for flat GRPO with the same number of final samples.
* Reward fusion (BranchGRPO Sec. 3.3): an internal node's reward is the mean of its leaves'
  rewards, or the path-probability weighted mean, fused one split at a time as the reference code does
  (``compute_node_rewards_from_leaves`` with ``tree_prob_weighted``): ``r_n = sum_c softmax_c(lp_c / tau) r_c``
  over the children ``c`` of ``n``, ``lp_c`` the log-prob of ``c``'s split step (the first step of its segment,
  the one noise draw that tells siblings apart), ``tau = 1`` in the reference.
* Depth-wise advantages (BranchGRPO Eq. 7): fused rewards are normalized among all nodes of the same
  depth, ``A_n = (r_n - mean_d) / (std_d + eps)``; a node's advantage applies to the steps of its segment.
  The reference (``compute_hierarchical_advantages_by_depth``) uses torch's unbiased std, ``eps = 1e-8``, and
  sets a depth's advantages to 0 when ``std_d < 1e-6`` (and for a lone node).
* Pruning cuts *backward passes only* (the forward rollout is unchanged): width pruning keeps a subset of
  the leaves for the loss; depth pruning keeps a sliding window of depths (:func:`grpo.flow_sde.sliding_window`).

:func:`tree_advantages` is BranchGRPO's whole credit in one call (fusion, depth-wise normalization, the options
below, pruning masks, the advantage clip).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import torch

from .advantages import clip_advantages
from .flow_sde import sliding_window

Fusion = Literal["mean", "path_prob"]
DepthNorm = Literal["reference", "population"]
REF_STD_EPS = 1e-8  # BranchGRPO's (r - mean) / (std + 1e-8)
REF_STD_FLOOR = 1e-6  # BranchGRPO: a depth whose std is below this gets advantage 0


@dataclass
class TreeNode:
    id: int
    parent: int  # -1 for the root
    depth: int
    start: int  # first denoising step of the segment
    end: int  # one past the last step
    children: list[int] = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        return self.end - self.start


MAX_TREE_NODES = 100_000  # the most nodes one prompt's tree may have (each holds a latent per denoising segment)


def tree_size(branch: Sequence[int]) -> int:
    """Nodes of a tree with children per depth ``branch`` (``1 + k_1 + k_1 k_2 + ...``), counted without building
    it (a factor < 1 counts as 1)."""
    total, width = 1, 1
    for k in branch:
        width *= max(int(k), 1)
        total += width
        if total > MAX_TREE_NODES:  # stop early: the caller refuses it
            return total
    return total


class RolloutTree:
    """The static shape of one prompt's rollout tree (what is shared, what branches, where).

    Args:
        num_steps: denoising steps of a full chain.
        split_steps: strictly increasing steps in ``[0, num_steps)`` where nodes branch.
        branch: children per split; an int for all depths or one int per split.
    """

    def __init__(self, num_steps: int, split_steps: Sequence[int], branch: int | Sequence[int]):
        split_steps = [int(s) for s in split_steps]
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        if any(b >= a for a, b in zip(split_steps[1:], split_steps[:-1])):
            raise ValueError(f"split_steps must be strictly increasing, got {split_steps}")
        bad = [s for s in split_steps if not 0 <= s < num_steps]
        if bad:
            raise ValueError(f"split steps {bad} are outside [0, {num_steps}) for num_steps={num_steps}")
        branches = [int(branch)] * len(split_steps) if isinstance(branch, int) else [int(b) for b in branch]
        if len(branches) != len(split_steps):
            raise ValueError(f"got {len(branches)} branch factors for {len(split_steps)} split steps")
        if any(b < 1 for b in branches):
            raise ValueError(f"branch factors must be >= 1, got {branches}")
        if tree_size(branches) > MAX_TREE_NODES:
            raise ValueError(f"branch factors {branches} make a tree of more than {MAX_TREE_NODES} nodes per prompt "
                             "(expected factors whose products stay below that)")
        self.num_steps = num_steps
        self.split_steps = split_steps
        self.branch = branches
        bounds = [0, *split_steps, num_steps]
        self.nodes: list[TreeNode] = [TreeNode(0, -1, 0, bounds[0], bounds[1])]
        frontier = [0]
        for d, k in enumerate(branches, start=1):
            nxt = []
            for p in frontier:
                for _ in range(k):
                    node = TreeNode(len(self.nodes), p, d, bounds[d], bounds[d + 1])
                    self.nodes[p].children.append(node.id)
                    self.nodes.append(node)
                    nxt.append(node.id)
            frontier = nxt
        self.depth = len(split_steps)
        self.leaves: list[int] = frontier

    # ---- structure -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def num_leaves(self) -> int:
        return len(self.leaves)

    def nodes_at_depth(self, d: int) -> list[int]:
        return [n.id for n in self.nodes if n.depth == d]

    def path(self, node: int) -> list[int]:
        """Node ids from the root to ``node`` inclusive."""
        out = []
        while node != -1:
            out.append(node)
            node = self.nodes[node].parent
        return out[::-1]

    def leaf_descendants(self, node: int) -> list[int]:
        """Leaf *indices* (positions in ``self.leaves``) below ``node``."""
        leaf_pos = {n: i for i, n in enumerate(self.leaves)}
        stack, out = [node], []
        while stack:
            n = stack.pop()
            if not self.nodes[n].children:
                out.append(leaf_pos[n])
            stack.extend(self.nodes[n].children)
        return sorted(out)

    def node_of_step(self, leaf_index: int, step: int) -> int:
        """The node on leaf ``leaf_index``'s path whose segment contains ``step``."""
        for n in self.path(self.leaves[leaf_index]):
            if self.nodes[n].start <= step < self.nodes[n].end:
                return n
        raise ValueError(f"step {step} outside [0, {self.num_steps})")

    # ---- cost accounting -------------------------------------------------------------------
    def nfe(self) -> int:
        """Denoiser calls to roll out the whole tree once (shared prefixes counted once)."""
        return sum(n.num_steps for n in self.nodes)

    def flat_nfe(self) -> int:
        """Denoiser calls for flat GRPO producing the same number of final samples."""
        return self.num_leaves * self.num_steps

    def backward_steps(self, train_nodes: torch.Tensor | None = None, train_steps: Sequence[int] | None = None) -> int:
        """Backward passes (one per trained node-step) for a node mask ``[N]`` and a step subset."""
        keep = torch.ones(len(self), dtype=torch.bool, device="cpu") if train_nodes is None else train_nodes
        steps = set(range(self.num_steps)) if train_steps is None else set(train_steps)
        return sum(
            sum(1 for s in range(n.start, n.end) if s in steps) for n in self.nodes if keep[n.id] and n.depth > 0
        )


def fuse_rewards(
    tree: RolloutTree,
    leaf_rewards: torch.Tensor,
    fusion: Fusion = "mean",
    edge_log_prob: torch.Tensor | None = None,
    temperature: float = 1.0,
    present: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rewards for every node ``[N]`` from the leaves' rewards ``[L]`` (BranchGRPO Sec. 3.3).

    ``"mean"``: the mean of the node's leaf descendants. ``"path_prob"`` (the reference's ``tree_prob_weighted``):
    bottom-up, ``r_n = sum_c softmax_c(edge_log_prob[c] / temperature) r_c`` over ``n``'s children (a single
    child passes its reward up). ``edge_log_prob[N]``: the log-prob of each node's *split step*, the first
    step of its segment (the root's entry is unused); required by ``"path_prob"``.

    ``present [N]`` bool (a pruned subtree, e.g. the leaves a tree-x-pool rollout regenerated and their paths):
    only present leaves count (a mean over the present leaf descendants; the softmax over the present children);
    an absent node's reward is 0 and the absent leaves' entries of ``leaf_rewards`` are never read.
    """
    if leaf_rewards.shape != (tree.num_leaves,):
        raise ValueError(f"leaf_rewards must have shape [{tree.num_leaves}], got {tuple(leaf_rewards.shape)}")
    if fusion not in ("mean", "path_prob"):
        raise ValueError(f"unknown reward fusion {fusion!r}; expected 'mean' or 'path_prob'")
    if temperature <= 0:
        raise ValueError(f"fusion temperature must be > 0, got {temperature}")
    r = leaf_rewards.float()
    if present is not None:
        present = _check_present(tree, present)
        r = torch.where(present[torch.tensor(tree.leaves, dtype=torch.long, device="cpu")].to(r.device), r,
                        torch.zeros_like(r))
    out = torch.empty(len(tree), dtype=torch.float32, device=r.device)
    if fusion == "mean":
        for node in tree.nodes:
            leaves = tree.leaf_descendants(node.id)
            if present is not None:
                leaves = [i for i in leaves if bool(present[tree.leaves[i]])]
            out[node.id] = r[leaves].mean() if leaves else 0.0
        return out
    if edge_log_prob is None or edge_log_prob.shape != (len(tree),):
        raise ValueError(f"path_prob fusion needs edge_log_prob of shape [{len(tree)}]")
    lp = edge_log_prob.detach().float().to(r.device)
    out[torch.tensor(tree.leaves, dtype=torch.long, device=r.device)] = r
    for node in reversed(tree.nodes):  # breadth-first order reversed: children before parents
        if node.children:
            kids = [c for c in node.children if present is None or bool(present[c])]
            if not kids:
                out[node.id] = 0.0
                continue
            kids = torch.tensor(kids, dtype=torch.long, device=r.device)
            w = torch.softmax(lp[kids] / temperature, dim=0)
            out[node.id] = (w * out[kids]).sum()
    return out


def _check_present(tree: RolloutTree, present: torch.Tensor) -> torch.Tensor:
    """``present [N]`` as a CPU bool mask, checked to be a subtree: the root and every present node's parent present."""
    present = torch.as_tensor(present, device="cpu").bool()
    if present.shape != (len(tree),):
        raise ValueError(f"present must have shape [{len(tree)}], got {tuple(present.shape)}")
    bad = [n.id for n in tree.nodes if bool(present[n.id]) and n.parent >= 0 and not bool(present[n.parent])]
    if bad or not bool(present[0]):
        raise ValueError(f"present is not a subtree: nodes {bad or [0]} are present without their parent (or the root "
                         "is absent)")
    return present


def subtree_of_leaves(tree: RolloutTree, leaf_index: torch.Tensor | Sequence[int]) -> torch.Tensor:
    """``[N]`` bool: the nodes on the paths from the root to the leaves ``leaf_index`` (positions in ``tree.leaves``),
    the pruned tree that holds exactly those leaves (a shared prefix appears once)."""
    present = torch.zeros(len(tree), dtype=torch.bool, device="cpu")
    for i in torch.as_tensor(leaf_index, device="cpu").reshape(-1).tolist():
        if not 0 <= int(i) < tree.num_leaves:
            raise ValueError(f"leaf index {i} outside [0, {tree.num_leaves})")
        present[tree.path(tree.leaves[int(i)])] = True
    return present


def _spread(r: torch.Tensor, norm: DepthNorm, eps: float) -> tuple[torch.Tensor, float, float]:
    """``(std, eps, floor)`` of ``r`` under ``norm``: the reference's unbiased std, ``1e-8`` and ``1e-6`` floor, or
    the population std with ``eps`` and no floor (advantages are zero when ``std < floor``)."""
    if r.numel() < 2:
        return r.new_zeros(()), 0.0, 0.0
    if norm == "reference":
        return r.std(unbiased=True), REF_STD_EPS, REF_STD_FLOOR
    return r.std(unbiased=False), eps, 0.0


def depth_advantages(tree: RolloutTree, node_rewards: torch.Tensor, norm: DepthNorm = "reference",
                     eps: float = 1e-4, present: torch.Tensor | None = None) -> torch.Tensor:
    """Depth-wise normalized advantages ``[N]`` (BranchGRPO Eq. 7); the root (depth 0) gets 0.

    ``norm="reference"`` (default, BranchGRPO's code): ``(r - mean_d) / (std_d + 1e-8)`` with the unbiased std,
    0 for the whole depth when ``std_d < 1e-6``. ``norm="population"`` (named option: the convention of
    GRPO's group std elsewhere in ``grpo``): population std and ``eps``; it is the reference times
    ``sqrt(n / (n - 1))`` at a depth of ``n`` nodes (1.41 at n = 2), so shallow depths weigh more.
    ``present [N]`` (a pruned subtree): a depth is normalized over its present nodes only; absent nodes get 0.
    """
    if node_rewards.shape != (len(tree),):
        raise ValueError(f"node_rewards must have shape [{len(tree)}], got {tuple(node_rewards.shape)}")
    if norm not in ("reference", "population"):
        raise ValueError(f"unknown depth normalization {norm!r}; expected 'reference' or 'population'")
    adv = torch.zeros(len(tree), dtype=torch.float32, device=node_rewards.device)
    for d in range(1, tree.depth + 1):
        ids = [n for n in tree.nodes_at_depth(d) if present is None or bool(present[n])]
        if not ids:
            continue
        ids = torch.tensor(ids, device=node_rewards.device)
        r = node_rewards[ids].float()
        std, e, floor = _spread(r, norm, eps)
        if r.numel() > 1 and not float(std) < floor and float(std + e) > 0:
            adv[ids] = (r - r.mean()) / (std + e)
    return adv


def width_prune(
    tree: RolloutTree,
    node_rewards: torch.Tensor,
    mode: Literal["none", "topk_per_parent", "best_worst"] = "none",
    k: int = 1,
    present: torch.Tensor | None = None,
) -> torch.Tensor:
    """Which nodes enter the loss ``[N]`` bool, pruning only at the leaf depth (BranchGRPO Sec. 3.4).

    * ``"topk_per_parent"``: under each last-split parent keep the ``k`` children with the largest
      ``|A|`` proxy, i.e. the ``k`` rewards farthest from the siblings' mean (most informative).
    * ``"best_worst"``: keep the ``k`` best and ``k`` worst leaves of the whole tree.
    Internal nodes are always kept. ``present [N]`` (a pruned subtree): absent nodes are never kept and the rules
    choose among the present leaves.
    """
    keep = torch.ones(len(tree), dtype=torch.bool, device="cpu") if present is None else present.clone().bool().cpu()
    if mode == "none":
        return keep
    if k < 1:
        raise ValueError(f"width pruning k must be >= 1, got {k}")
    leaf_ids = [n for n in tree.leaves if present is None or bool(present[n])]
    leaves = torch.tensor(leaf_ids, dtype=torch.long, device="cpu")
    keep[leaves] = False
    r = node_rewards.detach().float().cpu()
    if mode == "topk_per_parent":
        parents = sorted({tree.nodes[leaf].parent for leaf in leaf_ids})
        for p in parents:
            kids = torch.tensor([c for c in tree.nodes[p].children if present is None or bool(present[c])],
                                device="cpu")
            dev = (r[kids] - r[kids].mean()).abs()
            keep[kids[torch.argsort(dev, descending=True, stable=True)[:k]]] = True
    elif mode == "best_worst":
        order = torch.argsort(r[leaves], stable=True)
        keep[leaves[order[:k]]] = True
        keep[leaves[order[-k:]]] = True
    else:
        raise ValueError(f"unknown width pruning mode {mode!r}; expected 'none', 'topk_per_parent' or 'best_worst'")
    return keep


@dataclass
class TreeCredit:
    """BranchGRPO's credit for ``P`` trees of ``N`` nodes: per-node advantages ``[P * N]`` (clipped), the loss mask
    over nodes ``[P * N]`` (pruning applied), the fused rewards ``[P, N]`` and the depths trained this iteration."""

    advantages: torch.Tensor
    keep: torch.Tensor
    node_rewards: torch.Tensor
    trained_depths: list[int]


def _node_advantages(tree: RolloutTree, node_rewards: torch.Tensor, leaf_rewards: torch.Tensor, norm: DepthNorm,
                     eps: float, baseline: str, scale: str, present: torch.Tensor | None = None) -> torch.Tensor:
    """``A_n = (r_n - baseline_n) / (scale_n + eps)`` for one tree ``[N]``; root 0 (see :func:`tree_advantages`);
    ``present [N]``: over the present nodes (and leaves) of a pruned subtree only, absent nodes 0."""
    if baseline == "depth" and scale == "depth":
        return depth_advantages(tree, node_rewards, norm, eps, present)
    depth_of = torch.tensor([n.depth for n in tree.nodes], device="cpu")
    if present is not None:  # an absent node belongs to no depth
        depth_of = torch.where(present.cpu(), depth_of, torch.full_like(depth_of, -1))
        leaf_rewards = leaf_rewards[present.cpu()[torch.tensor(tree.leaves, dtype=torch.long, device="cpu")]]
    r = node_rewards.float().cpu()
    leaf_std, leaf_eps, leaf_floor = _spread(leaf_rewards.float().cpu(), norm, eps)
    parent = torch.tensor([max(n.parent, 0) for n in tree.nodes], device="cpu")
    adv = torch.zeros(len(tree), dtype=torch.float32, device="cpu")
    for d in range(1, tree.depth + 1):
        m = depth_of == d
        if not bool(m.any()):
            continue
        std, e, floor = (leaf_std, leaf_eps, leaf_floor) if scale == "leaf" else _spread(r[m], norm, eps)
        if float(std) < floor or float(std) <= 0:
            continue
        base = r[parent[m]] if baseline == "parent" else r[m].mean()
        adv[m] = (r[m] - base) / (std + e)
    return adv


def tree_advantages(
    tree: RolloutTree,
    leaf_rewards: torch.Tensor,
    edge_log_prob: torch.Tensor | None = None,
    *,
    fusion: Fusion = "mean",
    temperature: float = 1.0,
    depth_norm: DepthNorm = "reference",
    eps: float = 1e-4,
    baseline: Literal["depth", "parent"] = "depth",
    scale: Literal["depth", "leaf"] = "depth",
    clip: float | None = None,
    width_prune_mode: Literal["none", "topk_per_parent", "best_worst"] = "none",
    prune_k: int = 1,
    depth_window: int = 0,
    depth_stride: int = 1,
    iteration: int = 0,
    present: torch.Tensor | None = None,
) -> TreeCredit:
    """BranchGRPO's credit (Li et al. 2025, Sec. 3.3-3.4, Eq. 7) for ``leaf_rewards [P, L]`` (or ``[L]``, one tree).

    Per tree: fuse the leaf rewards up the tree (:func:`fuse_rewards`: ``fusion`` ``"mean"`` or the reference's
    per-split ``"path_prob"``, which needs ``edge_log_prob [P, N]``: each node's split-step log-prob), then

        A_n = (r_n - baseline_n) / (scale_n + eps_n),   root: 0,   then clamp to [-clip, clip] (``clip``)

    * defaults = the reference code: ``baseline="depth"`` (mean of n's depth), ``scale="depth"`` (std of n's
      depth) with ``depth_norm="reference"`` (unbiased std, eps 1e-8, 0 when the std < 1e-6); ``clip`` is the
      reference's ``adv_clip_max`` (5 in BranchGRPO's script), applied last; ``None`` leaves the values unclipped.
    * ``depth_norm="population"`` (named option): population std and ``eps`` (see :func:`depth_advantages`).
    * ``baseline="parent"`` (named option, ours): n's parent's fused reward; with mean fusion ``r_n - r_parent``
      credits exactly n's own noise draws, while the depth mean leaves late segments with the reward gaps of
      the early decisions their whole subtree shares.
    * ``scale="leaf"`` (named option, ours): the std of the tree's leaf rewards (flat GRPO's group std) for every
      depth; Eq. 7 gives two nodes at depth 1 +-0.71 (+-1 population) however small their gap.

    Pruning (BranchGRPO Sec. 3.4; cuts backward passes only): ``width_prune_mode`` / ``prune_k`` select leaves
    (:func:`width_prune`), ``depth_window > 0`` trains only a window of consecutive depths that slides by one
    every ``depth_stride`` iterations (:func:`grpo.flow_sde.sliding_window`).

    ``present [P, N]`` bool (default: every node): the credit of a *pruned* tree per prompt, a subtree holding some
    of the leaves and their paths (:func:`subtree_of_leaves`; what a tree-x-pool rollout regenerates): everything
    above runs over the present nodes only (fusion over present leaves, each depth normalized over its present
    nodes, pruning among present leaves), absent nodes get advantage 0 and are never kept. The absent leaves'
    entries of ``leaf_rewards`` are not read. All nodes present gives exactly the unpruned credit.
    """
    lr = leaf_rewards if leaf_rewards.dim() == 2 else leaf_rewards[None]
    P = lr.shape[0]
    if lr.shape[1:] != (tree.num_leaves,):
        raise ValueError(f"leaf_rewards must have shape [P, {tree.num_leaves}], got {tuple(leaf_rewards.shape)}")
    if edge_log_prob is not None:
        elp = edge_log_prob if edge_log_prob.dim() == 2 else edge_log_prob[None]
        if elp.shape != (P, len(tree)):
            raise ValueError(f"edge_log_prob must have shape [{P}, {len(tree)}], got {tuple(edge_log_prob.shape)}")
    if baseline not in ("depth", "parent") or scale not in ("depth", "leaf"):
        raise ValueError("tree advantage baseline must be 'depth'/'parent' and scale 'depth'/'leaf', got "
                         f"{baseline!r}, {scale!r}")
    depths = list(range(1, tree.depth + 1))
    if depth_window:
        depths = [d + 1 for d in sliding_window(iteration, tree.depth, min(depth_window, tree.depth), depth_stride)]
    depth_of = torch.tensor([n.depth for n in tree.nodes], device="cpu")
    pres = None
    if present is not None:
        pres = present if present.dim() == 2 else present[None]
        if pres.shape != (P, len(tree)):
            raise ValueError(f"present must have shape [{P}, {len(tree)}], got {tuple(present.shape)}")
        pres = torch.stack([_check_present(tree, row) for row in pres])
    advs, keeps, nrs = [], [], []
    for p in range(P):
        pr = None if pres is None else pres[p]
        nr = fuse_rewards(tree, lr[p], fusion, None if edge_log_prob is None else elp[p], temperature, pr)
        advs.append(_node_advantages(tree, nr, lr[p], depth_norm, eps, baseline, scale, pr).cpu())
        keep = width_prune(tree, nr, width_prune_mode, prune_k, pr)
        keeps.append(keep & torch.isin(depth_of, torch.tensor(depths, device="cpu")))
        nrs.append(nr)
    return TreeCredit(clip_advantages(torch.cat(advs), clip), torch.cat(keeps), torch.stack(nrs), depths)
