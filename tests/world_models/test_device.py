"""Device placement on the world-model side: every model runs where its parameters are, the data stays in CPU RAM.

No GPU here, so the CPU stands in for one with :func:`tests.strict_device.strict_device`: inside it, a tensor
created without saying where lands on ``meta`` and the first op mixing it with the models' CPU tensors raises,
as a CUDA run would. The models are built outside the block (building them is not under test); every stage of
the loop runs inside it. A CUDA test runs the same stages on a GPU when one is present.
"""

import math

import numpy as np
import pytest
import torch

from grpo.config import ConfigError
from grpo.device import check_device_name, module_device, resolve_device
from tests.strict_device import strict_device
from world_models.data import StatePredictor, collect_sans, predict_states, state_predictor_error, train_state_predictor
from world_models.encoders import SmallEncoderConfig, SmallVideoEncoder, train_small_encoder
from world_models.eva_alignment import ConditionTable, EVAVideoReward, alignment_report, calibrate_on_pretrained
from world_models.fit import ModelsConfig, imagined_success_samples, world_model_report
from world_models.idm import IDMConfig, InverseDynamicsModel, idm_action_error, train_idm
from world_models.video_wm import (
    VideoWorldModel,
    WorldModelConfig,
    train_success_head,
    train_world_model,
    world_model_metrics,
)
from world_models.windows import WindowSet, wm_windows
from world_models.wm_env import StartPool, WorldModelEnv, WorldModelVecEnv

TINY_WM = dict(image_size=32, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32)
# reach with object_state: grip point at 0, balls at 9/12/15; the agentview camera of sims/tabletop/scene.py
GROUND = dict(state_dim=18, state_points=(0, 9, 12, 15), state_camera=(0, -0.4, 0.42, 1, 0, 0, 0, 0.686, 0.727, 50))


@pytest.fixture(scope="module")
def reach():
    kw = {"object_state": True}
    train = collect_sans("tabletop/reach", {"success": 3, "near": 2, "failure": 2, "random": 1}, horizon=8,
                         image_size=32, env_kwargs=kw)
    test = collect_sans("tabletop/reach", {"success": 1, "near": 1, "failure": 1}, horizon=8, image_size=32, seed=1,
                        env_kwargs=kw)
    starts = StartPool.from_sim("tabletop/reach", range(3), 32, env_kwargs=kw)
    return train, test, starts


def _models(device="cpu"):
    torch.manual_seed(0)
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM, **GROUND)).to(device)
    sp = StatePredictor(18, 4, hidden=16).to(device)
    idm = InverseDynamicsModel(IDMConfig(image_size=32, channels=(8, 8), hidden=16)).to(device)
    enc = SmallVideoEncoder(SmallEncoderConfig(dim=16, channels=(8, 8), image_size=32)).to(device)
    return wm, sp, idm, enc


def _run_every_stage(reach, wm, sp, idm, enc) -> dict:
    """The loop's stages on tiny steps: fit, metrics, imagined samples, the success head, both envs, the IDM, the
    encoder and the EVA reward. Returns what they produced."""
    train, test, starts = reach
    out = {}
    out["state_loss"] = train_state_predictor(sp, train, steps=3, batch=16)
    out["states"] = predict_states(sp, train.state[:, 0], train.actions)
    out["state_err"] = state_predictor_error(sp, test)
    win = WindowSet(train, 2, 2, text_dim=wm.cfg.text_dim, state=True)  # the loop's windows, cut per batch
    held = wm_windows(test, 2, 2, text_dim=wm.cfg.text_dim, state=True)
    out["wm_loss"] = train_world_model(wm, win, steps=2, batch=4)
    out["wm_metrics"] = world_model_metrics(wm, held, batch=8)
    imagined = imagined_success_samples(wm, train, rollouts=1, steps=2, state_model=sp)
    out["imagined_device"] = {str(t.device) for t in (*vars(imagined.samples).values(), *imagined.per_episode.values())
                              if t is not None}
    out["head_loss"] = train_success_head(wm, win, steps=2, batch=8, imagined=imagined, augment=True)
    out["idm_loss"] = train_idm(idm, train.videos, train.actions, steps=2, batch=4)
    out["idm_err"] = idm_action_error(idm, test.videos, test.actions)
    out["report"] = world_model_report(wm, test, idm, steps=2, state_model=sp)
    out["enc_loss"] = train_small_encoder(enc, train.videos, steps=2, batch=2, frames=4)
    out["emb"] = enc.encode(test.videos)

    env = WorldModelEnv(wm, sp, starts, max_steps=3, seed=0)
    obs, _ = env.reset(seed=0, options={"init_seed": 1})
    env_steps = [env.step(np.array([0.3, 0.0, -0.1, 0.0], np.float32)) for _ in range(3)]
    batch = [WorldModelEnv(wm, sp, starts, max_steps=3, seed=j) for j in range(2)]
    for j, e in enumerate(batch):
        e.reset(seed=j, options={"init_seed": j})
    batched = WorldModelEnv.step_batch(batch, [np.full(4, 0.2, np.float32)] * 2)
    out["env"] = [obs] + [s[0] for s in env_steps] + [r[0] for r in batched]
    out["env_rewards"] = [s[1] for s in env_steps] + [r[1] for r in batched]

    first = train.videos[:3, :1].expand(-1, 2, -1, -1, -1)
    venv = WorldModelVecEnv(wm, first, train.instructions[:3], num_envs=2, state_model=sp,
                            start_states=train.state[:3, 0])
    vobs, _ = venv.reset(seed=0)
    vobs, vrew, *_ = venv.step(np.full((2, 2, 4), 0.3, np.float32))
    out["vec"] = (vobs, vrew)

    table = ConditionTable(held.context[:4], held.actions[:4], held.future[:4])
    from rewards.eva import EVAConfig

    eva = calibrate_on_pretrained(wm, idm, table, EVAConfig())
    out["eva_report"] = alignment_report(wm, idm, table, eva)

    class Batch:  # what the diffusion trainer hands a reward: condition keys and the sampled latents
        prompts = table.keys()[:2]
        images = torch.zeros(2, 3, 2, 32, 32, device=module_device(wm))

    out["eva_reward"] = EVAVideoReward(idm, table, eva)(Batch())
    return out


def _check(out: dict) -> None:
    floats = [*out["state_loss"], *out["wm_loss"], *out["head_loss"], *out["idm_loss"], *out["enc_loss"],
              *out["state_err"].values(), *out["wm_metrics"].values(), *out["idm_err"].values(),
              *out["eva_report"].values(), *out["env_rewards"]]
    floats += [v for v in out["report"].values() if not math.isnan(v)]
    assert all(math.isfinite(v) for v in floats)
    assert out["imagined_device"] == {"cpu"}  # samples for later batches are kept in CPU RAM
    for obs in out["env"]:  # observations leave the env as numpy, like a simulator's
        assert obs["images"]["agentview"].dtype == np.uint8 and obs["images"]["agentview"].shape == (32, 32, 3)
        assert isinstance(obs["state"], np.ndarray) and obs["state"].shape == (18,)
    vobs, vrew = out["vec"]
    assert vobs["images"]["agentview"].shape == (2, 32, 32, 3) and vrew.dtype == np.float32
    assert out["eva_reward"].total.device.type == "cpu" and torch.isfinite(out["eva_reward"].total).all()
    assert out["states"].shape[-1] == 18 and out["emb"].shape == (3, 16)


def _same(a, b) -> bool:
    """Equal to the last bit (NaN equals NaN), through dicts, lists and tuples of tensors, arrays and numbers."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if hasattr(a, "total"):  # a RewardOutput
        return _same(a.total, b.total) and _same(a.details, b.details)
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def test_every_stage_keeps_its_tensors_on_the_models_device(reach):
    expect = _run_every_stage(reach, *_models("cpu"))
    wm, sp, idm, enc = _models("cpu")
    with strict_device():
        out = _run_every_stage(reach, wm, sp, idm, enc)
    _check(out)
    # the same run: a meta tensor can slip through silently (indexing a CPU tensor with one reads garbage)
    assert _same(out, expect)


def test_policy_rollouts_for_the_loop_follow_the_policys_device():
    from tests.vla_rl.test_device import _policy_and_pool
    from vla_rl.wm_loop import policy_actor
    from world_models.data import collect_policy_episodes

    cfg, _, policy = _policy_and_pool("flow")
    kw = {k: v for k, v in cfg.env.kwargs.items() if k != "image_size"}
    run = lambda: collect_policy_episodes(policy_actor(policy), cfg.env.tasks[0], [0, 1], horizon=4,  # noqa: E731
                                          image_size=32, env_kwargs=kw)
    expect = run()
    with strict_device():
        got = run()
    assert got.frames.shape == (2, 5, 3, 32, 32) and torch.equal(got.frames, expect.frames)
    assert torch.equal(got.actions, expect.actions) and got.kinds == expect.kinds


def test_strict_device_catches_a_tensor_made_without_a_device():
    """The stand-in bites: a CPU model fed a tensor created without a device fails inside the block."""
    wm, *_ = _models("cpu")
    with strict_device():
        with pytest.raises(RuntimeError, match="meta"):
            wm.success_head(torch.rand(1, 2, 3, 32, 32), torch.zeros(1, 2, 4), state=torch.zeros(1, 2, 18),
                            ref=torch.zeros(1, 3, 32, 32, device="cpu"))


def test_device_option_is_checked():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="'gpu'"):
        resolve_device("gpu")
    with pytest.raises(ValueError, match="'gpu' is not a torch device"):
        check_device_name("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda'.*torch.cuda.is_available"):
            resolve_device("cuda")
    assert check_device_name("cuda:1") == "cuda:1"  # a GPU config loads (and dry-runs) on a machine without one
    from vla_rl.wm_loop import WorldLoopConfig

    with pytest.raises(ConfigError, match="device.*'tpu0'"):
        WorldLoopConfig(device="tpu0")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_every_stage_runs_on_cuda_and_matches_the_cpu(reach):
    cpu = _run_every_stage(reach, *_models("cpu"))
    models = _models("cuda")
    gpu = _run_every_stage(reach, *models)
    assert all(module_device(m).type == "cuda" for m in models)
    _check(gpu)
    # the same seeds draw the same noise on both devices (CPU generators): the numbers agree up to kernels' rounding
    assert np.allclose(cpu["wm_loss"], gpu["wm_loss"], rtol=1e-3, atol=1e-4)
    assert abs(cpu["wm_metrics"]["frame_mse"] - gpu["wm_metrics"]["frame_mse"]) < 1e-3


def test_fit_models_places_models_on_the_device(reach):
    from world_models.fit import fit_models

    train, _, _ = reach
    m = ModelsConfig(wm=WorldModelConfig(**TINY_WM), wm_steps=2, wm_finetune_steps=1, success_steps=2, idm_steps=2,
                     state_steps=2, idm=IDMConfig(image_size=32, channels=(8, 8), hidden=16), success_imagined=False)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    models = fit_models(m, train, log=lambda *a: None, device=dev)
    assert {module_device(models[k]).type for k in ("wm", "state", "idm")} == {dev}
    with pytest.raises(ValueError, match="'gpu'"):
        fit_models(m, train, log=lambda *a: None, device="gpu")
