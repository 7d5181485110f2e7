"""Tree x pool (diffusion_rl.tree_pool): trees grown by the quantized copy, best/worst leaves selected, their pruned
tree regenerated in full precision bit for bit, BranchGRPO's credit on the pruned tree, per-precision cost accounting,
and a short training run (exact ratio, on-policy, resume)."""

import itertools
import math
import re

import pytest
import torch

from diffusion_rl.branch import tree_rollout
from diffusion_rl.pool_config import PUBLISHED_LOWP_SPEEDUP, PoolConfig
from diffusion_rl.sampling import SamplerConfig
from diffusion_rl.tree_pool import expected_subtree_nfe, subtree_presence_probability, tree_pool_rollout
from grpo.tree import RolloutTree, subtree_of_leaves, tree_advantages

from .conftest import redness, redness_score, same_records

PROMPTS = ["a red circle", "a blue square", "a green triangle"]
SC = SamplerConfig(num_steps=5, eta=1.0)


def _score(adapter):
    return redness_score(adapter, PROMPTS)



def test_subtree_of_leaves_and_selection_keeps_the_extremes(sd3, explorer):
    tree = RolloutTree(5, [1, 3], [2, 2])  # root 0; depth 1: 1, 2; leaves 3, 4 (under 1), 5, 6 (under 2)
    assert subtree_of_leaves(tree, [0, 3]).tolist() == [True, True, True, True, False, False, True]
    assert subtree_of_leaves(tree, [0, 1]).tolist() == [True, True, False, True, True, False, False]
    with pytest.raises(ValueError, match="leaf index 4 outside"):
        subtree_of_leaves(tree, [4])
    pc = PoolConfig(pool_size=4, train_size=2, select="best_worst")
    tp = tree_pool_rollout(sd3, explorer, PROMPTS, tree, SC, pc, _score(sd3), seed=3, iteration=1)
    assert tp.pool_rewards.shape == (3, 4) and tp.selected.shape == (3, 2)
    for p in range(3):  # the best and the worst explored leaf, ascending
        r = tp.pool_rewards[p]
        assert tp.selected[p].tolist() == sorted([int(r.argmax()), int(r.argmin())])
        assert torch.equal(tp.present[p], subtree_of_leaves(tree, tp.selected[p]))
    # a rank holding only prompt 2 explores and selects what one process does for prompt 2
    one = tree_pool_rollout(sd3, explorer, PROMPTS, tree, SC, pc, _score(sd3), seed=3, iteration=1, prompt_ids=[2])
    assert torch.equal(one.selected[0], tp.selected[2]) and torch.equal(one.present[0], tp.present[2])


def test_regeneration_is_the_full_precision_tree_rollout_bit_for_bit(sd3, explorer):
    tree = RolloutTree(5, [1, 3], [2, 3])  # 6 leaves
    N = len(tree)
    pc = PoolConfig(pool_size=6, train_size=2, select="best_worst")
    tp = tree_pool_rollout(sd3, explorer, PROMPTS, tree, SC, pc, _score(sd3), seed=5, iteration=2)
    ro = tp.rollout
    # the regeneration is the policy's tree rollout of the pruned trees, same noise keys, bit for bit
    ref = tree_rollout(sd3, PROMPTS, tree, SC, seed=5, iteration=2, present=tp.present)
    same_records(ro, ref)
    assert torch.equal(ro.final, ref.final) and torch.equal(ro.final_rows, ref.final_rows)
    leaves = [p * N + tree.leaves[i] for p in range(3) for i in tp.selected[p].tolist()]
    assert ro.final_rows.tolist() == leaves and ro.final_prompt_idx.tolist() == [0, 0, 1, 1, 2, 2]
    # ... and the same samples as the whole full-precision tree (other rows in the batch: last float bits only)
    full = tree_rollout(sd3, PROMPTS, tree, SC, seed=5, iteration=2)
    pos = {g: i for i, g in enumerate(full.final_rows.tolist())}
    torch.testing.assert_close(ro.final, full.final[[pos[g] for g in leaves]], atol=1e-5, rtol=1e-5)
    # NFE per precision: the whole trees in low precision, the present nodes' segments in full precision
    assert tp.nfe_lowp == ro.extra["nfe_pool"] == 3 * tree.nfe()
    assert tp.nfe_policy == ro.extra["nfe_policy"] == sum(tree.nodes[n].num_steps for p in range(3)
                                                          for n in torch.nonzero(tp.present[p]).flatten().tolist())
    assert ro.nfe == tp.nfe_lowp + tp.nfe_policy and tp.nfe_policy < 3 * tree.nfe()
    # every leaf selected: the regeneration IS the plain BranchGRPO rollout, bit for bit
    allp = tree_pool_rollout(sd3, explorer, PROMPTS, tree, SC, PoolConfig(pool_size=6, train_size=6), _score(sd3),
                             seed=5, iteration=2)
    same_records(allp.rollout, full)
    assert torch.equal(allp.rollout.final, full.final)
    assert torch.equal(allp.rollout.extra["edge_log_prob"], full.extra["edge_log_prob"])


def test_tree_credit_on_the_pruned_subtree():
    tree = RolloutTree(5, [1, 3], [2, 2])
    r = torch.tensor([0.9, 0.5, 0.4, 0.1])
    # leaves 0 and 3 (best and worst): each depth-1 node holds one of them
    c = tree_advantages(tree, r, present=subtree_of_leaves(tree, [0, 3]))
    a = 1 / math.sqrt(2)  # two nodes at a depth, the reference's unbiased std: +-0.71
    torch.testing.assert_close(c.advantages, torch.tensor([0, a, -a, a, 0, 0, -a]), atol=1e-6, rtol=0)
    assert c.keep.tolist() == [False, True, True, True, False, False, True]
    torch.testing.assert_close(c.node_rewards[0], torch.tensor([0.5, 0.9, 0.1, 0.9, 0.0, 0.0, 0.1]))
    # leaves 0 and 1 share node 1: a lone node at depth 1 gets 0, the two siblings +-0.71
    c2 = tree_advantages(tree, torch.tensor([0.9, 0.5, float("nan"), float("nan")]),
                         present=subtree_of_leaves(tree, [0, 1]))
    torch.testing.assert_close(c2.advantages, torch.tensor([0, 0, 0, a, -a, 0, 0]), atol=1e-6, rtol=0)
    # width pruning and path-probability fusion choose among the present nodes only
    elp = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0])
    c3 = tree_advantages(tree, r, elp, fusion="path_prob", width_prune_mode="best_worst", prune_k=1,
                         present=subtree_of_leaves(tree, [0, 2, 3]))
    assert c3.keep.tolist() == [False, True, True, True, False, False, True]  # leaf 2 (0.4) neither best nor worst
    w = torch.softmax(torch.tensor([2.0, 0.0]), 0)
    assert float(c3.node_rewards[0, 2]) == pytest.approx(float(w[0] * 0.4 + w[1] * 0.1))
    # every node present: exactly the unpruned credit
    full = tree_advantages(tree, r, elp, fusion="path_prob")
    same = tree_advantages(tree, r, elp, fusion="path_prob", present=torch.ones(len(tree), dtype=torch.bool))
    assert torch.equal(full.advantages, same.advantages) and torch.equal(full.keep, same.keep)
    with pytest.raises(ValueError, match="not a subtree"):
        tree_advantages(tree, r, present=torch.tensor([True, False, True, True, False, False, False]))


def test_parent_credit_on_the_pruned_subtree():
    """branch.adv_baseline parent + adv_scale leaf (the shipped BranchGRPO recipes' credit) on a tree x pool pruned
    tree: each present node against its parent's fused reward over the present leaves, divided by the present
    leaves' std; a node that is its parent's only regenerated child gets 0 (no contrast), where Eq. 7 credits it by
    its depth."""
    tree = RolloutTree(5, [1, 3], [2, 2])  # nodes: 0 root, 1-2 depth 1, 3-4 under 1, 5-6 under 2
    r = torch.tensor([0.9, 0.5, 0.4, 0.1])
    kw = dict(baseline="parent", scale="leaf")
    a = 1 / math.sqrt(2)  # (0.9 - 0.5) / std(0.9, 0.1), the reference's unbiased std
    c = tree_advantages(tree, r, present=subtree_of_leaves(tree, [0, 3]), **kw)
    torch.testing.assert_close(c.advantages, torch.tensor([0, a, -a, 0, 0, 0, 0]), atol=1e-4, rtol=0)
    # leaves 0, 1, 3: node 1 = 0.7, node 2 = 0.1, root 0.5, leaf std 0.4
    c2 = tree_advantages(tree, r, present=subtree_of_leaves(tree, [0, 1, 3]), **kw)
    torch.testing.assert_close(c2.advantages, torch.tensor([0, 0.5, -1.0, 0.5, -0.5, 0, 0]), atol=1e-4, rtol=0)
    torch.testing.assert_close(c2.node_rewards[0], torch.tensor([0.5, 0.7, 0.1, 0.9, 0.5, 0.0, 0.1]))
    # every node present: exactly the unpruned parent credit
    full = tree_advantages(tree, r, **kw)
    same = tree_advantages(tree, r, present=torch.ones(len(tree), dtype=torch.bool), **kw)
    assert torch.equal(full.advantages, same.advantages)


def test_cost_accounting_per_precision():
    from diffusion_rl.config import DiffusionRLConfig
    from diffusion_rl.strategies import (
        check_strategy,
        flat_cost,
        pool_cost,
        projected_gpu_units,
        strategy_cost,
        tree_cost,
    )
    from grpo.config import load_config

    tree = RolloutTree(10, [1, 3, 5], 2)
    for n in (1, 2, 4, 8):  # the expectation over every subset of n leaves, enumerated
        subsets = list(itertools.combinations(range(8), n))
        mean = sum(sum(tree.nodes[i].num_steps for i in torch.nonzero(subtree_of_leaves(tree, s)).flatten().tolist())
                   for s in subsets) / len(subsets)
        assert expected_subtree_nfe(tree, n) == pytest.approx(mean)
    assert expected_subtree_nfe(tree, 8) == tree.nfe() and subtree_presence_probability(tree, 8).min() == 1
    cfg = load_config(DiffusionRLConfig, "configs/diffusion/shapes_branch.yaml",
                      ["pool.enabled=true", "pool.pool_size=8", "pool.train_size=4", "pool.quant.format=nvfp4"])
    c = strategy_cost(cfg)
    P = cfg.train.prompts_per_iter
    assert c["nfe_lowp"] == P * tree.nfe() and c["nfe_policy"] == pytest.approx(P * expected_subtree_nfe(tree, 4))
    assert c["nfe"] == pytest.approx(c["nfe_lowp"] + c["nfe_policy"]) and c["final_samples"] == P * 4
    assert 0 < c["backward"] < tree_cost(cfg)["backward"]
    assert c["gpu_units"] == pytest.approx(c["nfe_policy"] + c["nfe_lowp"] / 2.4 + 3 * c["backward"])
    assert PUBLISHED_LOWP_SPEEDUP["nvfp4"][0] == 2.4 and cfg.pool.speedup()[0] == 2.4
    cfg.pool.lowp_speedup = 4.0  # a measured ratio replaces the published one
    assert strategy_cost(cfg)["gpu_units"] == pytest.approx(c["nfe_policy"] + c["nfe_lowp"] / 4 + 3 * c["backward"])
    # every mode states both precisions; the full-precision modes have no low-precision calls
    for f in (flat_cost, tree_cost, pool_cost):
        d = f(cfg)
        assert d["nfe"] == pytest.approx(d["nfe_policy"] + d["nfe_lowp"]) and "gpu_units" in d
    assert flat_cost(cfg)["nfe_lowp"] == 0 and pool_cost(cfg)["nfe_lowp"] == P * 8 * 10
    cfg.grpo.kl_coef = 0.1  # a KL term adds a reference forward per trained row
    assert projected_gpu_units(cfg, 10, 0, 5) == 10 + 4 * 5
    cfg.sampler.cfg_scale = 4.5  # CFG: a trained row's passes run both halves
    assert projected_gpu_units(cfg, 10, 0, 5) == 10 + 8 * 5
    with pytest.raises(ValueError, match="pool.pool_size=8 must equal the tree.s 16 leaves"):
        check_strategy(load_config(DiffusionRLConfig, "configs/diffusion/shapes_tree_pool.yaml", ["pool.pool_size=8"]),
                       1)
    with pytest.raises(ValueError, match="pool.lowp_speedup must be >= 0"):
        PoolConfig(lowp_speedup=-1)


def test_dry_run_states_the_cost_per_precision(tmp_path, capsys):
    from diffusion_rl.cli import main

    assert main(["train", "configs/diffusion/shapes_tree_pool.yaml", f"output_dir={tmp_path}/o", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "BranchGRPO x pool (trees grown by the nvfp4 rollout copy" in out
    assert "(372 of them in the quantized pool)" in out  # 4 trees x (1 + 2 x 2 + 4 x 2 + 16 x 5) NFE
    assert re.search(r"projected GPU cost per iteration: \d+ full-precision forward passes = \d+ full-precision calls "
                     r"\+ 372 nvfp4 calls / 2.4 \(Sol-RL", out)
    assert main(["train", "configs/diffusion/shapes_flat.yaml", f"output_dir={tmp_path}/f", "--dry-run"]) == 0
    assert "projected GPU cost per iteration: 800 full-precision forward passes = 320 full-precision calls + 3 x 160" \
        in capsys.readouterr().out


def test_tree_pool_training_run_is_exact_and_resumes(tmp_path):
    from diffusion_rl.config import DiffusionRLConfig
    from diffusion_rl.strategies import TreePoolStrategy
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from grpo.config import load_config
    from grpo.metrics import read_jsonl

    def cfg(out, iters):
        return load_config(DiffusionRLConfig, "configs/diffusion/tiny_sd3_branch.yaml", [
            f"output_dir={out}", "sampler.num_steps=5", "branch.split_steps=[1,3]", "branch.branch=[2]",
            "branch.width_prune=none", "pool.enabled=true", "pool.pool_size=4", "pool.train_size=2",
            "pool.quant.format=nvfp4", "train.lr=0.003", f"train.iterations={iters}", "train.save_every=1",
            "train.log_images=false", "train.eval_steps=3", "prompts.source=list", "prompts.num_eval=2",
            "prompts.prompts=[a red circle,a blue square]", "model.tiny.with_vae=false"])

    tr = DiffusionGRPOTrainer(cfg(tmp_path / "a", 2), reward_fn=redness)
    assert isinstance(tr.strategy, TreePoolStrategy)
    tr.train(progress=False)
    rows = [r for r in read_jsonl(tmp_path / "a" / "metrics.jsonl") if "reward/mean" in r]
    tree = tr.strategy.tree
    for s in rows:
        # exact log-probs, float precision
        assert s["logp_recompute_gap"] == 0.0 and s["onpolicy/max_abs_dlogp"] == 0.0 and s["onpolicy/checked"] > 0
        assert s["cost/nfe_lowp"] == 2 * tree.nfe() and 0 < s["cost/nfe_policy"] < 2 * tree.nfe()
        assert s["cost/nfe_rollout"] == s["cost/nfe_lowp"] + s["cost/nfe_policy"] and s["cost/backward"] > 0
        assert s["cost/gpu_units"] == pytest.approx(s["cost/nfe_policy"] + s["cost/nfe_lowp"] / 2.4 + 3
                                                    * s["cost/backward"])
    adv = tr.last_advantages
    present = tr.strategy.last_pool.present.reshape(-1)
    assert adv[~present].abs().sum() == 0 and adv[present].abs().sum() > 0
    assert max(float(v.abs().max()) for k, v in tr.adapter.trainable_state_dict().items() if "lora_B" in k) > 0
    # one iteration, then a resumed second: the same weights as two straight
    DiffusionGRPOTrainer(cfg(tmp_path / "b", 1), reward_fn=redness).train(progress=False)
    res = DiffusionGRPOTrainer(cfg(tmp_path / "b", 2), reward_fn=redness)
    res.train(progress=False)
    assert res.iteration == 2
    a = tr.adapter.trainable_state_dict()
    for k, v in res.adapter.trainable_state_dict().items():
        assert torch.equal(v, a[k]), k


def test_width_and_depth_pruning_choose_among_the_regenerated_leaves():
    """BranchGRPO's pruning on top of the contrastive selection (``tree x pool+prune``): the pruned tree's leaves are
    pruned again by ``topk_per_parent`` / ``best_worst`` among the PRESENT leaves only, the depth window slides over
    the depths, absent nodes are never trained, and the advantages are those of the unpruned pruned tree (pruning
    cuts the loss mask only)."""
    # the bench's shape at 5 steps: splits 0, 2, 3 with factors 2, 2, 4 -> 16 leaves under 4 last-split parents
    tree = RolloutTree(5, [0, 2, 3], [2, 2, 4])
    assert tree.num_leaves == 16 and tree.depth == 3
    r = torch.tensor([0.50, 0.90, 0.45, 0.52, 0.10, 0.30, 0.31, 0.29, 0.60, 0.61, 0.05, 0.62, 0.40, 0.41, 0.42, 0.99])
    sel = torch.cat([r.argsort()[:2], r.argsort()[-2:]])  # best 2 + worst 2 of the 16: leaves 15, 1, 10, 4
    assert sorted(sel.tolist()) == [1, 4, 10, 15]
    present = subtree_of_leaves(tree, sel)
    leaf_node = {i: tree.leaves[i] for i in range(16)}
    base = tree_advantages(tree, r, present=present)
    assert not base.keep[0] and torch.equal(base.keep[1:], present[1:])  # unpruned: every present node but the root
    # topk_per_parent k=1: leaves 1, 4, 10, 15 sit under four different parents -> each is alone and kept; with
    # leaves 0, 1 (siblings) selected instead, the one farther from the present siblings' mean is kept: a tie at
    # two present siblings, the first by stable sort
    tk = tree_advantages(tree, r, present=present, width_prune_mode="topk_per_parent", prune_k=1)
    assert [i for i in range(16) if tk.keep[leaf_node[i]]] == [1, 4, 10, 15]
    pres2 = subtree_of_leaves(tree, [0, 1, 2, 4])  # three present siblings under parent of leaves 0-3
    tk2 = tree_advantages(tree, r, present=pres2, width_prune_mode="topk_per_parent", prune_k=1)
    assert [i for i in range(16) if tk2.keep[leaf_node[i]]] == [1, 4]  # 0.90 is farthest from mean(0.5, 0.9, 0.45)
    # best_worst k=1 among the present leaves: 0.99 and 0.05, not the tree's absent extremes
    bw = tree_advantages(tree, r, present=present, width_prune_mode="best_worst", prune_k=1)
    assert [i for i in range(16) if bw.keep[leaf_node[i]]] == [10, 15]
    for c in (tk, tk2, bw):  # absent nodes are never trained; internal present nodes are
        pres = present if c is not tk2 else pres2
        assert not (c.keep & ~pres).any()
        internal = [n.id for n in tree.nodes if 0 < n.depth < tree.depth and bool(pres[n.id])]
        assert c.keep[internal].all()
    # pruning cuts the loss mask only: the advantages are the pruned tree's Eq. 7 credit
    assert torch.equal(bw.advantages, base.advantages) and torch.equal(tk.advantages, base.advantages)
    # the depth window (2 of 3 depths) slides by one per iteration; the other depth is not trained
    depth_of = torch.tensor([n.depth for n in tree.nodes])
    seen = []
    for it in range(3):
        c = tree_advantages(tree, r, present=present, width_prune_mode="best_worst", prune_k=1, depth_window=2,
                            iteration=it)
        assert len(c.trained_depths) == 2 and set(depth_of[c.keep].tolist()) <= set(c.trained_depths)
        assert torch.equal(c.keep, bw.keep & torch.isin(depth_of, torch.tensor(c.trained_depths)))
        seen.append(tuple(c.trained_depths))
    assert len(set(seen)) > 1


def test_pruned_tree_pool_training_trains_fewer_rows_of_the_same_rollout(tmp_path):
    """``branch.width_prune`` + ``branch.depth_window`` with tree x pool: the same rollout (same regenerated nodes, same
    full- and low-precision NFE), fewer backward rows (exactly the kept nodes' steps), exact log-probs."""
    from diffusion_rl.config import DiffusionRLConfig
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from grpo.config import load_config
    from grpo.metrics import read_jsonl

    def run(out, extra):
        cfg = load_config(DiffusionRLConfig, "configs/diffusion/tiny_sd3_branch.yaml", [
            f"output_dir={out}", "sampler.num_steps=5", "branch.split_steps=[0,2,3]", "branch.branch=[2,2,4]",
            "pool.enabled=true", "pool.pool_size=16", "pool.train_size=4", "pool.quant.format=nvfp4",
            "train.lr=0.003", "train.iterations=1", "train.save_every=100", "train.log_images=false",
            "train.eval_steps=3", "prompts.source=list", "prompts.num_eval=2",
            "prompts.prompts=[a red circle,a blue square]", "model.tiny.with_vae=false", *extra])
        tr = DiffusionGRPOTrainer(cfg, reward_fn=redness)
        tr.train(progress=False)
        return tr, [r for r in read_jsonl(out / "metrics.jsonl") if "reward/mean" in r][0]

    full, s_full = run(tmp_path / "full", ["branch.width_prune=none", "branch.depth_window=0"])
    pr, s_pr = run(tmp_path / "pruned", ["branch.width_prune=topk_per_parent", "branch.prune_k=1",
                                         "branch.depth_window=2"])
    tree = pr.strategy.tree
    assert torch.equal(pr.strategy.last_pool.present, full.strategy.last_pool.present)
    assert s_pr["cost/nfe_policy"] == s_full["cost/nfe_policy"] and s_pr["cost/nfe_lowp"] == s_full["cost/nfe_lowp"]
    present = full.strategy.last_pool.present  # [P, N]
    sde = pr.cfg.sampler.sde_mask(0, force=tuple(tree.split_steps))  # the trained (stochastic) steps

    def rows(mask):  # a node's backward rows: its segment's stochastic steps; summed over the masked nodes
        return sum(int(sde[tree.nodes[n].start:tree.nodes[n].end].sum()) for p in range(mask.shape[0])
                   for n in torch.nonzero(mask[p]).flatten().tolist())
    assert s_full["cost/backward"] == rows(present)  # every regenerated node (the root has no steps)
    # the pruned run's backward rows are exactly its kept nodes' steps: its credit recomputed from its rewards
    sel = pr.strategy.last_pool.selected
    leaf_r = torch.zeros(present.shape[0], tree.num_leaves).scatter_(1, sel, pr.last_rewards.view(present.shape[0], -1))
    keep = tree_advantages(tree, leaf_r, width_prune_mode="topk_per_parent", prune_k=1, depth_window=2, iteration=0,
                           present=present).keep.view(present.shape)
    assert s_pr["cost/backward"] == rows(keep)
    assert 0 < s_pr["cost/backward"] < s_full["cost/backward"]
    assert s_pr["logp_recompute_gap"] == 0.0 and s_pr["onpolicy/max_abs_dlogp"] == 0.0
    # same credit before the mask: pruning changes which nodes are trained, not their advantages
    assert torch.equal(pr.last_advantages, full.last_advantages)
