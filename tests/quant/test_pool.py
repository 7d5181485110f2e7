"""Two-stage rollout: config errors, selection, bit-exact bf16 regeneration, generic velocity callables, trainer."""

import pytest
import torch

from diffusion_rl.adapters import ModelConfig, build_adapter
from diffusion_rl.pool_rollout import PoolConfig, QuantizedAdapterView, VelocityModel, pool_rollout, two_stage_rollout
from diffusion_rl.quant import QuantConfig, make_rollout_copy
from diffusion_rl.sampling import SamplerConfig, flat_rollout
from grpo.config import ConfigError, build_config
from grpo.selection import SELECT_METHODS, select_per_group, select_subset

PROMPTS = ["a red circle", "a blue square"]


def test_pool_smaller_than_train_set_is_a_config_error():
    with pytest.raises(ValueError, match=r"pool_size=2 is smaller than pool.train_size=4"):
        PoolConfig(pool_size=2, train_size=4)
    with pytest.raises(ConfigError, match=r"'pool.select' expects one of 'best_worst', .*got 'top'"):
        build_config(PoolConfig, {"select": "top"}, "pool")
    with pytest.raises(ConfigError, match=r"'pool.pool_sampler' expects one of 'sde', 'ode', got 'euler'"):
        build_config(PoolConfig, {"pool_sampler": "euler"}, "pool")


@pytest.mark.parametrize("method", SELECT_METHODS)
def test_selection_returns_n_distinct_indices(method):
    g = torch.Generator().manual_seed(0)
    for k, n in [(8, 4), (8, 8), (5, 1), (6, 2), (7, 3)]:
        for r in (torch.randn(k, generator=g), torch.zeros(k), torch.tensor([1.0, 1.0] * k)[:k]):
            idx = select_subset(r, n, method, g)
            assert idx.numel() == n and idx.unique().numel() == n and int(idx.min()) >= 0 and int(idx.max()) < k
    rows = select_per_group(torch.randn(3, 8, generator=g), 4, method, g)
    assert rows.shape == (3, 4) and all(r.unique().numel() == 4 for r in rows)


def test_best_worst_keeps_the_extremes():
    r = torch.tensor([0.1, 0.9, 0.5, -0.3, 0.7, 0.0])
    assert select_subset(r, 4, "best_worst").tolist() == [1, 3, 4, 5]


def _adapter(dtype="bf16"):
    mc = ModelConfig(kind="sd3", dtype=dtype, height=16, width=16, tiny={"with_vae": False})
    mc.lora.enabled = False
    return build_adapter(mc)


def _jpeg_score(adapter):
    from rewards.jpeg import jpeg_size_kb

    return lambda lat, pidx: -jpeg_size_kb(adapter.decode(lat))


SC = SamplerConfig(num_steps=4, eta=1.0, same_init_noise=False)


@pytest.fixture(scope="module")
def adapter():
    return _adapter()


@pytest.mark.parametrize("fmt", ["nvfp4", "bf16"])
def test_stage2_is_the_bf16_rollout_bit_for_bit(adapter, fmt):
    explorer = QuantizedAdapterView(adapter, make_rollout_copy(adapter.transformer, QuantConfig(format=fmt)))
    pc = PoolConfig(pool_size=6, train_size=3, select="best_worst", chunk=5)
    pr = pool_rollout(adapter, explorer, PROMPTS, SC, pc, _jpeg_score(adapter), seed=7, iteration=2, keep_pool=True)
    ro = pr.rollout
    assert pr.pool_rewards.shape == (2, 6) and pr.selected.shape == (2, 3) and pr.pool_final.shape[0] == 12
    g_sel = ro.extra["pool_rows"]
    assert g_sel.tolist() == [p * 6 + j for p in range(2) for j in pr.selected[p].tolist()]
    assert ro.final_rows.tolist() == list(range(6)) and ro.final_prompt_idx.tolist() == [0, 0, 0, 1, 1, 1]
    # the direct bf16 flat rollout of the same candidates (same seeds, same batch) -- bit for bit
    ref = flat_rollout(adapter, PROMPTS, 6, SC, seed=7, iteration=2, rows=g_sel.tolist())
    assert torch.equal(ro.final, ref.final)
    assert all(torch.equal(a.log_prob, b.log_prob) and torch.equal(a.x_next, b.x_next)
               for a, b in zip(ro.records, ref.records))
    assert any(r.stochastic for r in ro.records)
    assert pr.nfe_pool == 12 * SC.num_steps and pr.nfe_train == 6 * SC.num_steps
    # selection really used the pool rewards: best-of-pool is among the selected
    assert all(int(pr.pool_rewards[p].argmax()) in pr.selected[p].tolist() for p in range(2))
    if fmt == "bf16":  # a bf16 explorer of the bf16 policy: stage-2 rewards reproduce the pool rewards (JPEG kB)
        picked = torch.stack([pr.pool_rewards[p, pr.selected[p]] for p in range(2)]).flatten()
        assert torch.allclose(pr.rewards, picked, atol=0.05)


def test_generic_velocity_callables_and_ode_pool():
    torch.manual_seed(0)
    w = torch.randn(3, 3) * 0.1

    def vel(x, sigma, cond):
        return torch.einsum("bchw,cd->bdhw", x, w) + cond["c"][:, :, None, None] * sigma[:, None, None, None]

    policy = VelocityModel(vel)
    explorer = VelocityModel(lambda x, s, c: vel(x.bfloat16().float(), s, c))
    cond = {"c": torch.randn(3, 3)}
    score = lambda lat, pidx: lat.mean(dim=(1, 2, 3))  # noqa: E731
    sc = SamplerConfig(num_steps=3, eta=0.8, same_init_noise=False)
    pc = PoolConfig(pool_size=5, train_size=2, pool_sampler="ode", select="extremes_random")
    pr = two_stage_rollout(policy, explorer, cond, score, (3, 4, 4), sc, pc, seed=1, prompt_ids=[0, 2])
    assert pr.pool_rewards.shape == (2, 5) and pr.rollout.final.shape == (4, 3, 4, 4)
    assert pr.rollout.final_prompt_idx.tolist() == [0, 0, 2, 2] and pr.rewards.shape == (4,)
    with pytest.raises(ValueError, match="same_init_noise"):
        two_stage_rollout(policy, explorer, cond, score, (3, 4, 4), SamplerConfig(num_steps=3), pc, seed=1)


def _tiny_trainer_config(tmp_path):
    """A 16 px tiny SD3 LoRA trainer config: 2 prompts x group of 3, 4 SDE steps, no images logged."""
    from diffusion_rl.prompts import PromptConfig
    from diffusion_rl.trainer import DiffusionRLConfig

    cfg = DiffusionRLConfig(output_dir=str(tmp_path / "run"), resume=False,
                            prompts=PromptConfig(source="list", prompts=PROMPTS, num_eval=2))
    cfg.model.height = cfg.model.width = 16
    cfg.model.lora.rank = 4
    cfg.model.tiny = {"with_vae": False}
    cfg.sampler = SamplerConfig(num_steps=4, eta=1.0, same_init_noise=False)
    cfg.grpo.group_size = 3
    cfg.train.prompts_per_iter = 2
    cfg.train.log_images = False
    return cfg


def test_pool_trainer_step_refreshes_the_explorer(tmp_path):
    from diffusion_rl.strategies import PoolStrategy
    from diffusion_rl.trainer import DiffusionGRPOTrainer

    from ..diffusion_rl.conftest import redness

    cfg = _tiny_trainer_config(tmp_path)
    cfg.train.lr = 3e-2
    cfg.pool = PoolConfig(enabled=True, pool_size=6, train_size=4)
    with pytest.raises(ValueError, match="group_size=3 must equal pool.train_size=4"):
        DiffusionGRPOTrainer(cfg, reward_fn=redness, log=False)
    cfg.pool = PoolConfig(enabled=True, pool_size=6, train_size=3, quant=QuantConfig(format="nvfp4"))
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness, log=False)
    pool = tr.strategy
    assert isinstance(pool, PoolStrategy)
    lin = pool.model_q.get_submodule("transformer_blocks.0.attn.to_q")
    codes = lin.weight.clone()
    s = tr.step()
    assert s["logp_recompute_gap"] == 0.0 and s["cost/backward"] > 0
    assert pool.last_pool.pool_rewards.shape == (2, 6)
    assert not torch.equal(lin.weight, codes)  # LoRA moved -> the explorer was re-quantized in place
    assert pool.model_q.get_submodule("transformer_blocks.0.attn.to_q") is lin


def test_nft_loss_equation_and_direction():
    from grpo.nft_loss import nft_loss, optimality_probability

    g = torch.Generator().manual_seed(0)
    vo, tgt = torch.randn(4, 3, 2, 2, generator=g), torch.randn(4, 3, 2, 2, generator=g)
    vt = vo.clone().requires_grad_(True)
    r = torch.tensor([1.0, 0.0, 0.5, 0.25])
    out = nft_loss(vt, vo, tgt, r, beta=0.5)
    # at v_theta = v_old both implicit policies equal v_old: L = mean ||v_old - target||^2
    assert torch.allclose(out.loss, ((vo - tgt) ** 2).mean(), atol=1e-6)
    out.loss.backward()
    # gradient wrt v_theta: 2 beta [r (v+ - tgt) - (1 - r)(v- - tgt)] / (B * D): r=1 pulls towards the target,
    # r=0 pushes away, r=0.5 cancels at v_theta = v_old
    d = (vo - tgt)
    assert torch.allclose(vt.grad[0], 2 * 0.5 * d[0] / d.numel(), atol=1e-7)
    assert torch.allclose(vt.grad[1], -2 * 0.5 * d[1] / d.numel(), atol=1e-7)
    assert torch.allclose(vt.grad[2], torch.zeros_like(d[2]), atol=1e-7)
    assert torch.equal(optimality_probability(torch.tensor([-10.0, 0.0, 2.5]), 5.0), torch.tensor([0.0, 0.5, 0.75]))
    with pytest.raises(ValueError, match=r"r must lie in \[0, 1\]"):
        nft_loss(vt, vo, tgt, torch.tensor([2.0, 0, 0, 0]))


def test_pool_config_through_yaml_and_cli(tmp_path, capsys):
    """`pool:` in the YAML selects the pool strategy; bad pool/quant settings stop the CLI at start (exit 2)."""
    from diffusion_rl.cli import _build, main
    from diffusion_rl.trainer import DiffusionRLConfig
    from grpo.config import load_config

    base = ["configs/diffusion/shapes_pool_fp8.yaml", f"output_dir={tmp_path}/o"]
    cfg = load_config(DiffusionRLConfig, base[0], base[1:])
    assert cfg.pool.enabled and cfg.pool.quant.format == "fp8" and cfg.pool.train_size == cfg.grpo.group_size
    from diffusion_rl.strategies import FlatStrategy, PoolStrategy, TreeStrategy, check_strategy, strategy_class

    assert strategy_class(_build(base[0], base[1:])[0]) is PoolStrategy
    assert strategy_class(_build(base[0], [*base[1:], "pool.enabled=false"])[0]) is FlatStrategy
    cfg.pool.enabled, cfg.branch.enabled = False, True
    assert strategy_class(cfg) is TreeStrategy
    cfg.pool.enabled = True
    assert main(["train", *base, "pool.pool_size=2", "--dry-run"]) == 2
    assert "pool_size=2 is smaller than pool.train_size=4" in capsys.readouterr().err
    assert main(["train", *base, "pool.quant.format=fp4", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "pool.quant.format" in err and "'nvfp4'" in err
    assert main(["train", *base, "pool.quant.backend=gpu", "--dry-run"]) == 2
    assert "pool.quant.backend" in capsys.readouterr().err
    assert main(["train", *base, "grpo.group_size=8", "--dry-run"]) == 2
    assert "must equal pool.train_size" in capsys.readouterr().err
    assert main(["train", *base, "branch.enabled=true", "--dry-run"]) == 2  # refused (the YAML's group_size: inactive)
    assert "branch.enabled=true" in capsys.readouterr().err
    from diffusion_rl.strategies import TreePoolStrategy

    assert strategy_class(cfg) is TreePoolStrategy  # a pool with a tree: the tree's leaves are the pool
    check_strategy(cfg, 1)  # the default tree (splits 2, 4, 6, 8, factor 2) has the pool's 16 leaves
    cfg.pool.pool_size = 8
    with pytest.raises(ValueError, match="pool.pool_size=8 must equal the tree's 16 leaves"):
        check_strategy(cfg, 1)
    assert main(["train", *base, "train.loss=dpo", "--dry-run"]) == 2
    assert "train.loss" in capsys.readouterr().err
    assert main(["train", *base, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pool-and-select GRPO (pool 16 -> train 4 per prompt, fp8 rollout copy" in out
    assert "NFE 800 (rollout) (640 of them in the quantized pool)" in out


@pytest.mark.parametrize("pool", [False, True])
def test_nft_loss_selectable_in_the_trainer(tmp_path, pool):
    """train.loss=nft trains with DiffusionNFT (no log-probs): finite loss, the weights move, the cost is counted."""
    from diffusion_rl.trainer import DiffusionGRPOTrainer

    from ..diffusion_rl.conftest import redness

    cfg = _tiny_trainer_config(tmp_path)
    cfg.train.loss = "nft"
    cfg.train.nft_timesteps = 2
    cfg.train.updates_per_iter = 2
    if pool:
        cfg.pool = PoolConfig(enabled=True, pool_size=6, train_size=3, quant=QuantConfig(format="fp8"))
    tr = DiffusionGRPOTrainer(cfg, reward_fn=redness, log=False)
    assert type(tr.strategy).__name__ == ("PoolStrategy" if pool else "FlatStrategy")
    before = {k: v.clone() for k, v in tr.adapter.trainable_state_dict().items()}
    s = tr.step()
    assert torch.isfinite(torch.tensor(s["loss/nft_loss"])) and s["skipped_updates"] == 0
    assert s["cost/backward"] == 2 * 3 * 2 == tr.cost_per_iteration()["backward"]  # samples x timesteps
    assert s["cost/nfe_train"] == 2 * 6 * 2  # v_old pass + the trained pass
    assert any(not torch.equal(before[k], v) for k, v in tr.adapter.trainable_state_dict().items())
    with pytest.raises(ConfigError, match="'train.loss' expects one of 'grpo', 'nft', got 'dpo'"):
        build_config(type(cfg.train), {"loss": "dpo"}, "train")
