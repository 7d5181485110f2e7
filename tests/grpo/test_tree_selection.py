import pytest
import torch

from grpo.flow_sde import sliding_window
from grpo.selection import select_per_group, select_subset
from grpo.tree import RolloutTree, depth_advantages, fuse_rewards, tree_advantages, width_prune


def test_tree_structure_and_nfe_hand_worked():
    # 20 steps, split at 5 and 10, branch 2 then 3 -> 1 + 2 + 6 nodes, 6 leaves
    t = RolloutTree(20, [5, 10], [2, 3])
    assert len(t) == 9 and t.num_leaves == 6 and t.depth == 2
    assert [(n.start, n.end) for n in t.nodes[:3]] == [(0, 5), (5, 10), (5, 10)]
    assert all((n.start, n.end) == (10, 20) for n in t.nodes[3:])
    assert t.nodes[1].children == [3, 4, 5] and t.nodes[4].parent == 1
    # NFE: 5 (root) + 2*5 + 6*10 = 75 vs flat 6*20 = 120
    assert t.nfe() == 75 and t.flat_nfe() == 120
    assert t.leaf_descendants(2) == [3, 4, 5] and t.path(t.leaves[4]) == [0, 2, 7]
    assert t.node_of_step(4, 7) == 2 and t.node_of_step(4, 3) == 0
    # backward: every non-root node-step = 2*5 + 6*10 = 70; prune to 2 leaves -> 10 + 20
    assert t.backward_steps() == 70
    keep = torch.ones(9, dtype=torch.bool)
    keep[[3, 4, 5, 6]] = False
    assert t.backward_steps(keep) == 30
    assert t.backward_steps(train_steps=range(5, 10)) == 10


def test_branch_grpo_16_leaves_nfe():
    # 4 splits x branch 2 = 16 leaves over 20 steps
    t = RolloutTree(20, [0, 3, 6, 9], 2)
    assert t.num_leaves == 16
    assert t.nfe() == 2 * 3 + 4 * 3 + 8 * 3 + 16 * 11
    # splitting late shares most of the chain: 12 + 2*2 + 4*2 + 8*2 + 16*2 = 72 vs 320 (4.4x)
    late = RolloutTree(20, [12, 14, 16, 18], 2)
    assert late.nfe() == 72 and late.flat_nfe() == 320


def test_tree_bad_input():
    with pytest.raises(ValueError, match="outside"):
        RolloutTree(10, [3, 10], 2)
    with pytest.raises(ValueError, match="increasing"):
        RolloutTree(10, [5, 3], 2)
    with pytest.raises(ValueError, match="branch factors"):
        RolloutTree(10, [3, 5], [2])


def test_fusion_and_depth_advantages_hand_worked():
    t = RolloutTree(4, [1, 2], 2)  # nodes: 0 | 1 2 | 3 4 5 6
    leaf_r = torch.tensor([1.0, 3.0, 0.0, 4.0])
    r = fuse_rewards(t, leaf_r)
    torch.testing.assert_close(r, torch.tensor([2.0, 2.0, 2.0, 1.0, 3.0, 0.0, 4.0]))
    a = depth_advantages(t, r)
    assert float(a[0]) == 0.0 and torch.equal(a[1:3], torch.zeros(2))  # equal siblings
    lr = torch.tensor([1.0, 3.0, 0.0, 4.0])
    torch.testing.assert_close(a[3:], (lr - lr.mean()) / (lr.std(unbiased=True) + 1e-8))
    pop = depth_advantages(t, r, "population", eps=0.0)
    torch.testing.assert_close(pop[3:], (lr - lr.mean()) / lr.std(unbiased=False))
    # path-probability weighting: leaf 3's edge is far more likely than leaf 4's
    elp = torch.zeros(7)
    elp[3], elp[4] = 0.0, -100.0
    rp = fuse_rewards(t, leaf_r, "path_prob", elp)
    assert float(rp[1]) == pytest.approx(1.0, abs=1e-4)  # ~ all weight on leaf reward 1.0
    assert float(rp[2]) == pytest.approx(2.0)
    assert float(rp[3]) == pytest.approx(1.0)  # a leaf is its own reward
    with pytest.raises(ValueError, match="edge_log_prob"):
        fuse_rewards(t, leaf_r, "path_prob")


def test_width_pruning_and_window():
    t = RolloutTree(4, [1, 2], 2)
    r = fuse_rewards(t, torch.tensor([1.0, 3.0, 0.0, 4.0]))
    keep = width_prune(t, r, "best_worst", 1)
    assert keep.tolist() == [True, True, True, False, False, True, True]
    keep = width_prune(t, r, "topk_per_parent", 1)
    assert int(keep[3:].sum()) == 2 and keep[:3].all()
    assert width_prune(t, r).all()
    assert sliding_window(0, 4, 2) == [0, 1] and sliding_window(1, 4, 2) == [1, 2]
    assert sliding_window(3, 4, 2) == [0, 1] and sliding_window(3, 4, 2, stride=2) == [1, 2]


@pytest.mark.parametrize("method", ["best_worst", "mean_deviation", "random", "extremes_random"])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8])
def test_selection_returns_n_distinct(method, n):
    r = torch.tensor([0.3, 0.9, 0.1, 0.5, 0.5, 0.7, 0.0, 1.0])
    idx = select_subset(r, n, method, torch.Generator().manual_seed(0))
    assert idx.numel() == n and idx.unique().numel() == n and int(idx.max()) < 8


def test_selection_semantics():
    r = torch.tensor([0.3, 0.9, 0.1, 0.5, 0.6, 0.7, 0.0, 1.0])
    assert select_subset(r, 4, "best_worst").tolist() == [1, 2, 6, 7]
    assert select_subset(r, 2, "mean_deviation").tolist() == [6, 7]
    ext = select_subset(r, 3, "extremes_random", torch.Generator().manual_seed(1)).tolist()
    assert 6 in ext and 7 in ext
    assert select_per_group(r.reshape(2, 4), 2).shape == (2, 2)
    with pytest.raises(ValueError, match="n=9"):
        select_subset(r, 9)


def test_depth_norm_reference_at_two_nodes_and_flat_depth():
    # BranchGRPO's compute_hierarchical_advantages_by_depth: (r - mean) / (std_unbiased + 1e-8), 0 when std < 1e-6
    t = RolloutTree(4, [1, 2], 2)  # depth 1: n = 2 nodes
    r = torch.tensor([0.0, 0.2, 0.5, 0.1, 0.3, 0.4, 0.6])
    a = depth_advantages(t, r)
    s1 = 0.3 / 2**0.5  # unbiased std of [0.2, 0.5]
    torch.testing.assert_close(a[1:3], torch.tensor([-0.15, 0.15]) / (s1 + 1e-8))
    assert float(a[2]) == pytest.approx(2**-0.5, rel=1e-6)
    pop = depth_advantages(t, r, "population", eps=1e-4)  # the named option: population std, eps
    torch.testing.assert_close(pop[1:3], torch.tensor([-0.15, 0.15]) / (0.15 + 1e-4))
    flat = r.clone()
    flat[1], flat[2] = 0.3, 0.3 + 5e-7  # std ~3.5e-7 < 1e-6: the whole depth gets 0
    assert torch.equal(depth_advantages(t, flat)[1:3], torch.zeros(2))
    with pytest.raises(ValueError, match="depth normalization"):
        depth_advantages(t, r, "biased")


def test_path_prob_fuses_one_split_at_a_time():
    # the issue's example: 3 steps, splits [1, 2], leaf rewards [1, 0, 0, 0], log-prob 2 on leaf 0's split step.
    # reference: node 1 = softmax([2, 0]) . [1, 0] = e^2 / (e^2 + 1); root = mean(node 1, node 2 = 0) = 0.440
    # (one softmax over the leaves' summed path log-probs would give e^2 / (e^2 + 3) = 0.711)
    import math

    t = RolloutTree(3, [1, 2], 2)
    elp = torch.zeros(len(t))
    elp[t.leaves[0]] = 2.0
    r = fuse_rewards(t, torch.tensor([1.0, 0.0, 0.0, 0.0]), "path_prob", elp)
    n1 = math.exp(2) / (math.exp(2) + 1)
    torch.testing.assert_close(r, torch.tensor([n1 / 2, n1, 0.0, 1.0, 0.0, 0.0, 0.0]))
    assert float(r[0]) == pytest.approx(0.440, abs=1e-3)
    # multi-split with uneven branching and a temperature: every internal node is a softmax of its children only
    t2 = RolloutTree(5, [0, 2, 4], [3, 2, 1])
    leaf_r = torch.arange(t2.num_leaves, dtype=torch.float32)
    elp2 = torch.randn(len(t2), generator=torch.Generator().manual_seed(0))
    r2 = fuse_rewards(t2, leaf_r, "path_prob", elp2, temperature=0.5)
    for node in t2.nodes:
        if node.children:
            kids = torch.tensor(node.children)
            w = torch.softmax(elp2[kids] / 0.5, 0)
            assert float(r2[node.id]) == pytest.approx(float((w * r2[kids]).sum()), rel=1e-6)
    torch.testing.assert_close(r2[t2.leaves], leaf_r)


def test_tree_advantages_one_call():
    t = RolloutTree(4, [1, 2], 2)
    leaf_r = torch.tensor([[1.0, 3.0, 0.0, 40.0]])
    c = tree_advantages(t, leaf_r)
    nr = fuse_rewards(t, leaf_r[0])
    torch.testing.assert_close(c.advantages, depth_advantages(t, nr))
    assert c.keep.tolist() == [False] + [True] * 6 and c.trained_depths == [1, 2]
    clipped = tree_advantages(t, leaf_r[0], clip=1.0)  # [L] for one tree; clip last
    torch.testing.assert_close(clipped.advantages, depth_advantages(t, nr).clamp(-1, 1))
    with pytest.raises(ValueError, match="leaf_rewards"):
        tree_advantages(t, torch.zeros(1, 3))
    with pytest.raises(ValueError, match="edge_log_prob"):
        tree_advantages(t, leaf_r, torch.zeros(1, 3))
