"""Lookahead@1 (diffusion_rl.lookahead): the first split's candidates previewed by the quantized copy, the best and
worst kept and grown in full precision bit for bit as the plain tree rollout of the same noise, NFE per precision,
BranchGRPO's credit on the kept tree, a short training run (exact ratio, on-policy, resume) and the refusals."""

import pytest
import torch

from diffusion_rl.branch import BranchConfig, tree_rollout
from diffusion_rl.lookahead import kept_present, lookahead_rollout
from diffusion_rl.sampling import SamplerConfig
from grpo.tree import RolloutTree, tree_advantages

from .conftest import redness, redness_score, same_records

PROMPTS = ["a red circle", "a blue square", "a green triangle"]
SC = SamplerConfig(num_steps=5, eta=1.0)


def _score(adapter):
    return redness_score(adapter, PROMPTS)



def test_selection_keeps_best_and_worst_and_the_kept_paths_are_the_plain_tree_bit_for_bit(sd3, explorer):
    wide = BranchConfig(enabled=True, split_steps=[1, 3], branch=[2], lookahead_candidates=4).lookahead_tree(5)
    assert wide.branch == [4, 2] and len(wide) == 1 + 4 + 8
    N = len(wide)
    la = lookahead_rollout(sd3, explorer, PROMPTS, wide, 2, SC, _score(sd3), seed=5, iteration=2)
    ro = la.rollout
    assert la.preview_rewards.shape == (3, 4) and la.kept.shape == (3, 2) and la.selected.shape == (3, 4)
    for p in range(3):  # the best and the worst preview, ascending; the kept tree = root + them + their subtrees
        q = la.preview_rewards[p]
        assert la.kept[p].tolist() == sorted([int(q.argmax()), int(q.argmin())])
        cands = [wide.nodes[0].children[c] for c in la.kept[p].tolist()]
        want = {0, *cands, *(g for c in cands for g in wide.nodes[c].children)}
        assert set(torch.nonzero(la.present[p]).flatten().tolist()) == want
    # the kept trees are the policy's rollout of the wide tree restricted to them, same noise keys, bit for bit
    ref = tree_rollout(sd3, PROMPTS, wide, SC, seed=5, iteration=2, present=la.present)
    same_records(ro, ref)
    assert torch.equal(ro.final, ref.final) and torch.equal(ro.final_rows, ref.final_rows)
    assert torch.equal(ro.extra["edge_log_prob"], ref.extra["edge_log_prob"])
    leaves = [p * N + wide.leaves[i] for p in range(3) for i in la.selected[p].tolist()]
    assert ro.final_rows.tolist() == leaves
    # ... the same samples as the whole full-precision wide tree (other rows in the batch: last float bits only)
    full = tree_rollout(sd3, PROMPTS, wide, SC, seed=5, iteration=2)
    pos = {g: i for i, g in enumerate(full.final_rows.tolist())}
    torch.testing.assert_close(ro.final, full.final[[pos[g] for g in leaves]], atol=1e-5, rtol=1e-5)
    # NFE per precision: previews m (T - s_1) per prompt in low precision, the plain k-tree in full precision
    plain = RolloutTree(5, [1, 3], [2, 2])
    assert la.nfe_lowp == ro.extra["nfe_pool"] == 3 * 4 * (5 - 1)
    assert la.nfe_policy == ro.extra["nfe_policy"] == 3 * plain.nfe() and ro.nfe == la.nfe_lowp + la.nfe_policy
    # a rank holding only prompt 2 previews and keeps what one process does (other rows in the batch: the
    # quantized activations' scales and the float sums move the previews in the 5th digit)
    one = lookahead_rollout(sd3, explorer, PROMPTS, wide, 2, SC, _score(sd3), seed=5, iteration=2, prompt_ids=[2])
    assert torch.equal(one.kept[0], la.kept[2]) and torch.equal(one.present[0], la.present[2])
    torch.testing.assert_close(one.preview_rewards[0], la.preview_rewards[2], atol=1e-4, rtol=0)
    torch.testing.assert_close(one.rollout.final, ro.final[8:], atol=1e-5, rtol=1e-5)
    other = lookahead_rollout(sd3, explorer, PROMPTS, wide, 2, SC, _score(sd3), seed=5, iteration=3)
    assert not torch.equal(other.preview_rewards, la.preview_rewards)  # keyed by the iteration
    with pytest.raises(ValueError, match="keeps 4 of the 4 candidates"):
        lookahead_rollout(sd3, explorer, PROMPTS, wide, 4, SC, _score(sd3), seed=5)


def test_tree_credit_on_the_kept_tree_is_the_plain_trees():
    wide, plain = RolloutTree(5, [1, 3], [4, 2]), RolloutTree(5, [1, 3], [2, 2])
    present = kept_present(wide, torch.tensor([[1, 3]]))[0]
    assert torch.nonzero(present).flatten().tolist() == [0, 2, 4, 7, 8, 11, 12]
    r = torch.tensor([0.9, 0.5, 0.4, 0.1])  # the kept leaves' rewards, leaf order
    sel = [i for i, n in enumerate(wide.leaves) if present[n]]
    leaf_r = torch.zeros(wide.num_leaves)
    leaf_r[sel] = r
    elp = torch.zeros(len(wide))
    elp[torch.nonzero(present).flatten()] = torch.tensor([0.0, 0.3, -0.2, 0.5, 0.1, -0.4, 0.2])
    order = torch.nonzero(present).flatten()  # the kept nodes, in the plain tree's node order
    for kw in (dict(), dict(fusion="path_prob"), dict(baseline="parent", scale="leaf"),
               dict(width_prune_mode="topk_per_parent", prune_k=1, depth_window=2, iteration=1)):
        cw = tree_advantages(wide, leaf_r, elp, present=present, **kw)
        cp = tree_advantages(plain, r, elp[order], **kw)
        torch.testing.assert_close(cw.advantages[order], cp.advantages, atol=1e-6, rtol=0)
        assert torch.equal(cw.keep[order], cp.keep) and cw.advantages[~present].abs().sum() == 0
        assert not cw.keep[~present].any()


def _cfg(out, iters, *extra):
    from diffusion_rl.config import DiffusionRLConfig
    from grpo.config import load_config

    return load_config(DiffusionRLConfig, "configs/diffusion/tiny_sd3_branch.yaml", [
        f"output_dir={out}", "sampler.num_steps=5", "branch.split_steps=[1,3]", "branch.branch=[2]",
        "branch.width_prune=none", "branch.lookahead_candidates=4", "pool.quant.format=nvfp4", "train.lr=0.003",
        f"train.iterations={iters}", "train.save_every=1", "train.log_images=false", "train.eval_steps=3",
        "prompts.source=list", "prompts.num_eval=2", "prompts.prompts=[a red circle,a blue square]",
        "model.tiny.with_vae=false", *extra])


def test_lookahead_training_run_is_exact_and_resumes(tmp_path):
    from diffusion_rl.strategies import LookaheadStrategy, lookahead_cost, tree_cost
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from grpo.metrics import read_jsonl

    tr = DiffusionGRPOTrainer(_cfg(tmp_path / "a", 2), reward_fn=redness)
    assert isinstance(tr.strategy, LookaheadStrategy) and tr.strategy.tree.branch == [4, 2]
    c = tr.cost_per_iteration()
    P = tr.cfg.train.prompts_per_iter
    assert c == lookahead_cost(tr.cfg) and c["nfe_lowp"] == P * 4 * 4
    assert c["nfe_policy"] == tree_cost(tr.cfg)["nfe_policy"] and c["backward"] == tree_cost(tr.cfg)["backward"]
    assert c["gpu_units"] == pytest.approx(c["nfe_policy"] + c["nfe_lowp"] / 2.4 + 3 * c["backward"])
    tr.train(progress=False)
    rows = [r for r in read_jsonl(tmp_path / "a" / "metrics.jsonl") if "reward/mean" in r]
    assert len(rows) == 2
    for s in rows:
        # exact log-probs, float precision
        assert s["logp_recompute_gap"] == 0.0 and s["onpolicy/max_abs_dlogp"] == 0.0 and s["onpolicy/checked"] > 0
        assert s["cost/nfe_lowp"] == c["nfe_lowp"] and s["cost/nfe_policy"] == c["nfe_policy"]
        assert s["cost/backward"] == c["backward"]
        assert s["cost/gpu_units"] == pytest.approx(c["gpu_units"])
    adv = tr.last_advantages
    present = tr.strategy.last_pool.present.reshape(-1)
    assert adv[~present].abs().sum() == 0 and adv[present].abs().sum() > 0
    assert max(float(v.abs().max()) for k, v in tr.adapter.trainable_state_dict().items() if "lora_B" in k) > 0
    # one iteration, then a resumed second: the same weights as two straight
    DiffusionGRPOTrainer(_cfg(tmp_path / "b", 1), reward_fn=redness).train(progress=False)
    res = DiffusionGRPOTrainer(_cfg(tmp_path / "b", 2), reward_fn=redness)
    res.train(progress=False)
    assert res.iteration == 2
    a = tr.adapter.trainable_state_dict()
    for k, v in res.adapter.trainable_state_dict().items():
        assert torch.equal(v, a[k]), k


@pytest.mark.parametrize("extra, message", [
    (["branch.enabled=false"], "branch.lookahead_candidates=4 previews the candidates of a tree's first split: set "
                               "branch.enabled=true"),
    (["pool.enabled=true", "pool.pool_size=4", "pool.train_size=2"],
     "branch.lookahead_candidates=4 with pool.enabled=true"),
    (["branch.lookahead_candidates=2"], "branch.lookahead_candidates=2 must exceed the first split's branch factor 2"),
    (["pool.quant.format=bf16"], "pool.quant.format must be fp8 or nvfp4, got 'bf16'"),
    (["branch.lookahead_candidates=-1"], "branch.lookahead_candidates"),
])
def test_bad_combinations_are_refused_with_one_line(tmp_path, capsys, extra, message):
    from diffusion_rl.cli import main

    out = tmp_path / "o"
    cfg = ["train", "configs/diffusion/tiny_sd3_branch.yaml", f"output_dir={out}", "branch.split_steps=[1,3]",
           "branch.branch=[2]", "branch.lookahead_candidates=4", *extra]
    assert main(cfg) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_dry_run_and_plan_state_the_lookahead_cost(tmp_path, capsys):
    from diffusion_rl.cli import main
    from diffusion_rl.config import DiffusionRLConfig
    from diffusion_rl.plan import cost_modes
    from diffusion_rl.strategies import lookahead_cost, tree_cost
    from grpo.config import load_config

    path = "configs/diffusion/shapes_tree_lookahead.yaml"
    cfg = load_config(DiffusionRLConfig, path, [])
    c, t = lookahead_cost(cfg), tree_cost(cfg)
    P, T, s1 = cfg.train.prompts_per_iter, cfg.sampler.num_steps, cfg.branch.split_steps[0]
    assert c["nfe_lowp"] == P * cfg.branch.lookahead_candidates * (T - s1) and c["nfe_policy"] == t["nfe_policy"]
    assert main(["train", path, f"output_dir={tmp_path}/o", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "BranchGRPO lookahead@1 (4 candidates at the first split previewed by the nvfp4 rollout copy" in out
    assert f"+ {c['nfe_lowp']:.0f} nvfp4 calls / 2.4 (Sol-RL" in out
    modes = cost_modes(load_config(DiffusionRLConfig, "configs/diffusion/shapes_branch.yaml", []))
    la = modes["lookahead@1 4->2 +prune"]
    assert modes["BranchGRPO"].branch.lookahead_candidates == 0 and la.branch.lookahead_candidates == 4
    assert la.branch.width_prune == "topk_per_parent"
