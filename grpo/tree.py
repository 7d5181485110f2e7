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
  rewards, or the path-probability weighted mean ``sum_l softmax_l(log p(path n -> l) / tau) r_l``.
* Depth-wise advantages (BranchGRPO Eq. 7): fused rewards are normalized among all nodes of the same
  depth, ``A_n = (r_n - mean_d) / (std_d + eps)``; a node's advantage applies to the steps of its segment.
* Pruning cuts *backward passes only* (the forward rollout is unchanged): width pruning keeps a subset of
  the leaves for the loss; depth pruning keeps a sliding window of depths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import torch

Fusion = Literal["mean", "path_prob"]


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
) -> torch.Tensor:
    """Rewards for every node ``[N]`` from the leaves' rewards ``[L]`` (BranchGRPO Sec. 3.3).

    ``edge_log_prob[N]``: log-prob of each node's own segment (sum of its step log-probs); required by
    ``"path_prob"``, where a node's reward is the softmax(path log-prob / temperature)-weighted mean of
    its leaves, the path running from the node (exclusive) down to the leaf.
    """
    if leaf_rewards.shape != (tree.num_leaves,):
        raise ValueError(f"leaf_rewards must have shape [{tree.num_leaves}], got {tuple(leaf_rewards.shape)}")
    if fusion not in ("mean", "path_prob"):
        raise ValueError(f"unknown reward fusion {fusion!r}; expected 'mean' or 'path_prob'")
    r = leaf_rewards.float()
    out = torch.empty(len(tree), dtype=torch.float32, device=r.device)
    if fusion == "path_prob":
        if edge_log_prob is None or edge_log_prob.shape != (len(tree),):
            raise ValueError(f"path_prob fusion needs edge_log_prob of shape [{len(tree)}]")
        lp = edge_log_prob.detach().float().to(r.device)
    for node in tree.nodes:
        leaves = tree.leaf_descendants(node.id)
        if fusion == "mean":
            out[node.id] = r[leaves].mean()
        else:
            path_lp = torch.stack(
                [sum(lp[n] for n in tree.path(tree.leaves[i]) if tree.nodes[n].depth > node.depth) + lp.new_zeros(())
                 for i in leaves]
            )
            w = torch.softmax(path_lp / temperature, dim=0)
            out[node.id] = (w * r[leaves]).sum()
    return out


def depth_advantages(tree: RolloutTree, node_rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """Depth-wise normalized advantages ``[N]`` (BranchGRPO Eq. 7); the root (depth 0) gets 0."""
    if node_rewards.shape != (len(tree),):
        raise ValueError(f"node_rewards must have shape [{len(tree)}], got {tuple(node_rewards.shape)}")
    adv = torch.zeros(len(tree), dtype=torch.float32, device=node_rewards.device)
    for d in range(1, tree.depth + 1):
        ids = torch.tensor(tree.nodes_at_depth(d), device=node_rewards.device)
        r = node_rewards[ids].float()
        std = r.std(unbiased=False) if r.numel() > 1 else r.new_zeros(())
        adv[ids] = (r - r.mean()) / (std + eps) if float(std + eps) > 0 else torch.zeros_like(r)
    return adv


def width_prune(
    tree: RolloutTree,
    node_rewards: torch.Tensor,
    mode: Literal["none", "topk_per_parent", "best_worst"] = "none",
    k: int = 1,
) -> torch.Tensor:
    """Which nodes enter the loss ``[N]`` bool, pruning only at the leaf depth (BranchGRPO Sec. 3.4).

    * ``"topk_per_parent"``: under each last-split parent keep the ``k`` children with the largest
      ``|A|`` proxy, i.e. the ``k`` rewards farthest from the siblings' mean (most informative).
    * ``"best_worst"``: keep the ``k`` best and ``k`` worst leaves of the whole tree.
    Internal nodes are always kept.
    """
    keep = torch.ones(len(tree), dtype=torch.bool, device="cpu")
    if mode == "none":
        return keep
    if k < 1:
        raise ValueError(f"width pruning k must be >= 1, got {k}")
    leaves = torch.tensor(tree.leaves, device="cpu")
    keep[leaves] = False
    r = node_rewards.detach().float().cpu()
    if mode == "topk_per_parent":
        parents = sorted({tree.nodes[leaf].parent for leaf in tree.leaves})
        for p in parents:
            kids = torch.tensor(tree.nodes[p].children, device="cpu")
            dev = (r[kids] - r[kids].mean()).abs()
            keep[kids[torch.argsort(dev, descending=True, stable=True)[:k]]] = True
    elif mode == "best_worst":
        order = torch.argsort(r[leaves], stable=True)
        keep[leaves[order[:k]]] = True
        keep[leaves[order[-k:]]] = True
    else:
        raise ValueError(f"unknown width pruning mode {mode!r}; expected 'none', 'topk_per_parent' or 'best_worst'")
    return keep


def sliding_window(iteration: int, num_positions: int, window: int, stride: int = 1) -> list[int]:
    """Positions ``[start, start + window)`` active at ``iteration``; the window advances one position
    every ``stride`` iterations and wraps around (depth pruning; BranchGRPO-Mix's SDE window)."""
    if not 1 <= window <= num_positions:
        raise ValueError(f"window must be in [1, {num_positions}], got {window}")
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    start = (iteration // stride) % (num_positions - window + 1)
    return list(range(start, start + window))
