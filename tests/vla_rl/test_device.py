"""The VLA frontend's ``device`` option: config validation, and every tensor the policy meets on its device.

No GPU here, so :func:`tests.strict_device.strict_device` stands in for one: inside it a tensor created without an
explicit device lands on ``meta`` and the first op that mixes it with the (CPU) policy's tensors raises, as a
CUDA run would. Policies, envs and trainers are built outside the block; the code under test runs inside it.
The CUDA test runs a real trainer iteration on a GPU (skipped without one).
"""

import math

import numpy as np
import pytest
import torch

from grpo.config import ConfigError, load_config
from grpo.device import resolve_device
from grpo.metrics import read_jsonl
from vla_rl.policy import SmallVLA
from vla_rl.rollout import EnvPool, EpisodeSpec, evaluate, obs_to_batch, run_episodes
from vla_rl.sft import SFTConfig, train_sft
from vla_rl.tokenizer import WordTokenizer
from vla_rl.trainer import VLARLConfig, VLARLTrainer, probe_envs

from ..strict_device import strict_device
from .test_trainer_e2e import TINY

CFG = "configs/vla/tabletop_reach.yaml"


def test_device_option_is_validated():
    assert resolve_device("cpu") == torch.device("cpu")
    assert load_config(VLARLConfig, CFG, ["device=cpu"]).device == "cpu"
    assert VLARLConfig().device == "auto"
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
        gpu_cfg = load_config(VLARLConfig, CFG, TINY + ["device=cuda"])  # a GPU config loads (and dry-runs) here
        with pytest.raises(ValueError, match="'cuda'.*torch.cuda.is_available"):
            VLARLTrainer(gpu_cfg, quiet=True)  # and is refused when it would run
        with pytest.raises(ValueError, match="'cuda:1'"):
            resolve_device("cuda:1")
    with pytest.raises(ValueError, match="'gpu0'"):
        VLARLConfig(device="gpu0")
    with pytest.raises(ConfigError, match="device 'gpu0' is not a torch device"):
        load_config(VLARLConfig, CFG, ["device=gpu0"])
    with pytest.raises(ValueError, match="device '' is not a torch device"):
        VLARLConfig(device="")


def _policy_and_pool(head: str):
    cfg = load_config(VLARLConfig, CFG, TINY + [f"policy.head={head}"])
    pool = EnvPool(cfg.env.kwargs)
    instr, sd, ad = probe_envs(pool, cfg.env.tasks)
    cfg.policy.state_dim, cfg.policy.action_dim = sd, ad
    torch.manual_seed(0)
    return cfg, pool, SmallVLA(cfg.policy, WordTokenizer.build(instr.values()))


def _policy_calls(policy, pool, cfg, demos) -> dict:
    """Every path of the policy on a real obs batch: sampling (one / per-row generators, stochastic or not), the
    LeRobot queue, log-prob recomputation, a keyed rollout, evaluation, SRPO embeddings, two SFT steps."""
    from rewards.srpo import SRPOConfig, SRPOReward
    from vla_rl.srpo_encoders import build_trajectory_encoder

    torch.manual_seed(0)  # the SFT loss draws its noise from the global stream
    env = pool.get("tabletop/reach", 1)[0]
    batch = obs_to_batch([env.reset(seed=s, options={"init_seed": s})[0] for s in (1, 2)], cfg.policy.cameras)
    out: dict = {}
    for stochastic in (True, False):
        for gens in (torch.Generator().manual_seed(0), [torch.Generator().manual_seed(k) for k in range(2)]):
            s = policy.sample_chunk(batch, stochastic=stochastic, generator=gens)
            out[f"chunk_{stochastic}_{type(gens).__name__}"] = (s.actions, s.logp)
    policy.reset()
    out["select_action"] = policy.select_action(batch, generator=torch.Generator().manual_seed(1))
    s = policy.sample_chunk(batch, generator=torch.Generator().manual_seed(2))
    out["log_prob"] = policy.chunk_log_prob(batch, s.record).logp.detach()
    roll = run_episodes(policy, pool, [EpisodeSpec("tabletop/reach", 5, 0, s) for s in range(3)], 6, noise_key=(0, 1))
    out["rollout"] = (roll.old_logp, roll.record["chain" if "chain" in roll.record else "actions"], roll.episode_of)
    res = evaluate(policy, pool, cfg.env.tasks, [7, 8], 6)
    out["eval"] = torch.tensor([e.length for e in res.episodes], device="cpu")
    srpo_cfg = SRPOConfig(encoder="policy", num_frames=3, frame_size=32)
    srpo = SRPOReward(srpo_cfg, build_trajectory_encoder(srpo_cfg, policy))  # no module built
    out["srpo"] = srpo.embed([np.stack(e.frames) for e in roll.episodes])
    out["sft"] = torch.tensor(train_sft(policy, demos, SFTConfig(steps=2, batch_size=8, image_shift=2), seed=0),
                              device="cpu")
    return out


@pytest.mark.parametrize("head,noise_mode", [("flow", "all"), ("flow", "one"), ("gaussian", "all")])
def test_policy_rollout_and_sft_keep_tensors_on_the_policy_device(head, noise_mode, tmp_path):
    """Under strict_device every path runs and gives bit-identical numbers to a plain run (a CPU tensor indexed by a
    meta index silently reads garbage instead of raising, so the comparison is part of the check)."""
    import copy

    from vla_rl.demos import collect_demos

    cfg, pool, policy = _policy_and_pool(head)
    policy.head.cfg.noise_mode = noise_mode
    demos = collect_demos(cfg.env.tasks, 1, tmp_path / "demos.hdf5", cfg.env.kwargs, cfg.policy.cameras,
                          cfg.sft.demo_seed_offset, cfg.env.max_episode_steps)
    ref = _policy_calls(copy.deepcopy(policy), pool, cfg, demos)
    with strict_device():
        got = _policy_calls(policy, pool, cfg, demos)
    assert got.keys() == ref.keys()
    for k in ref:
        a, b = (ref[k], got[k]) if isinstance(ref[k], tuple) else ((ref[k],), (got[k],))
        assert all(y.device.type == "cpu" and torch.equal(x, y) for x, y in zip(a, b)), k
    assert all(torch.isfinite(x).all() for x in ref["rollout"][:2]) and torch.isfinite(ref["sft"]).all()
    pool.close()


def test_rl_iteration_under_strict_device(tmp_path):
    """SFT, evaluation and one GRPO+SRPO iteration (rollout, rewards, update with a KL term, checkpoint) of the real
    trainer with ``device="cpu"`` under strict_device: it runs, and ends bit-identical to the same run without it."""
    def trainer(out):
        over = TINY + [f"output_dir={out}", "device=cpu", "rl.iterations=1", "sft.steps=2", "rl.eval_episodes=2",
                       "rl.num_videos=0", "grpo.kl_coef=0.01"]
        return VLARLTrainer(load_config(VLARLConfig, CFG, over), quiet=True)

    ref = trainer(tmp_path / "ref")
    ref.train()
    tr = trainer(tmp_path / "strict")
    assert tr.device == torch.device("cpu")
    with strict_device():
        res = tr.train()
    assert res["iterations"] == 1 and 0.0 <= res["final_success"] <= 1.0
    row = [r for r in read_jsonl(tmp_path / "strict" / "metrics.jsonl") if "rollout/success_rate" in r][-1]
    assert row["loss/rows"] > 0 and math.isfinite(row["loss/loss"])  # the update ran (grpo.kl_coef > 0)
    for k, v in ref.last_iteration.items():
        assert torch.equal(tr.last_iteration[k], v), k
    a, b = ref.policy.state_dict(), tr.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_noise_helpers_keep_rollouts_identical():
    """Noise drawn through grpo.device (on the generator's device, then moved) is the plain torch.randn draw of the
    same generator: the same seed gives the same chunk and the same rollout (test_trainer_e2e / test_distributed
    check the recorded numbers)."""
    cfg, pool, policy = _policy_and_pool("flow")
    env = pool.get("tabletop/reach", 1)[0]
    batch = obs_to_batch([env.reset(seed=s, options={"init_seed": s})[0] for s in (1, 2)], cfg.policy.cameras)
    shape = (cfg.policy.chunk_size, cfg.policy.action_dim)
    s = policy.sample_chunk(batch, generator=[torch.Generator().manual_seed(k) for k in (4, 5)])
    first = torch.stack([torch.randn(shape, generator=torch.Generator().manual_seed(k)) for k in (4, 5)])
    assert torch.equal(s.record["chain"][:, 0], first)  # the initial noise of each row, per-row generators
    s = policy.sample_chunk(batch, generator=torch.Generator().manual_seed(6))
    assert torch.equal(s.record["chain"][:, 0], torch.randn((2, *shape), generator=torch.Generator().manual_seed(6)))
    specs = [EpisodeSpec("tabletop/reach", 9, 0, s) for s in range(2)]
    a = run_episodes(policy, pool, specs, 6, noise_key=(3, 0))
    with strict_device():
        b = run_episodes(policy, pool, specs, 6, noise_key=(3, 0))
    assert torch.equal(a.old_logp, b.old_logp) and torch.equal(a.record["chain"], b.record["chain"])
    assert [e.length for e in a.episodes] == [e.length for e in b.episodes]
    assert all(np.array_equal(x, y) for ea, eb in zip(a.episodes, b.episodes) for x, y in zip(ea.frames, eb.frames))
    pool.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_rl_iteration_on_cuda(tmp_path):
    over = TINY + [f"output_dir={tmp_path}", "device=cuda", "rl.iterations=1", "sft.steps=2", "rl.eval_episodes=2",
                   "rl.num_videos=0", "grpo.kl_coef=0.01"]
    tr = VLARLTrainer(load_config(VLARLConfig, CFG, over), quiet=True)
    assert all(p.device.type == "cuda" for p in tr.policy.parameters())
    res = tr.train()
    assert res["iterations"] == 1 and 0.0 <= res["final_success"] <= 1.0
    assert all(p.device.type == "cuda" and torch.isfinite(p).all() for p in tr.policy.parameters())
    assert torch.isfinite(tr.last_iteration["rewards"]).all()
    assert all(v.device.type == "cuda" for s in tr.optimizer.state.values() for k, v in s.items() if k != "step")
    # the checkpoint resumes onto the configured device and loads on the CPU
    from grpo.checkpoint import load_checkpoint

    st = load_checkpoint(tmp_path / "checkpoints")
    assert all(v.device.type == "cpu" for v in st["model"].values())
    tr2 = VLARLTrainer(load_config(VLARLConfig, CFG, over), quiet=True)
    assert tr2.maybe_resume() and all(p.device.type == "cuda" for p in tr2.policy.parameters())
