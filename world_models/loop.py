"""World-VLA-Loop as one command: train the world model on simulator data, RL the VLA inside it, check the
policy in the real simulator, add the policy's failures and near-successes to the data, fine-tune, repeat.

    python -m world_models.loop configs/world_models/loop_reach_one.yaml [key=value ...]   # the demo (make demo-wm)

Stages (all logged to ``<output_dir>/metrics.jsonl`` and TensorBoard with ``grpo.metrics.MetricsLogger``;
step = cycle)::

    data      SANS-style mix of successes / near-successes / failures / random episodes (world_models.data),
              plus a held-out mix from disjoint initial states
    models    video world model (frames + success head), proprio state model, IDM; cycle-0 metrics on the
              held-out mix: open-loop frame MSE vs the simulator under the same actions (and the
              copy-first-frame baseline), success agreement, IDM action error
    policy    SFT of the VLA in the real simulator (vla_rl.trainer.VLARLTrainer with rl.iterations=0)
    cycle c   1. register "wm/<task>" in sims' registry (world_models.wm_env.register_world_model_env)
              2. VLARLTrainer, unchanged, with env.tasks=["wm/<task>"]: GRPO inside the world model
              3. real-simulator evaluation (vla_rl.rollout.evaluate) on held-out initial states
              4. fresh real rollouts of the policy: the world model's action-following error on them
                 *before* they are added (frame MSE, IDM-decoded action error, success agreement)
              5. add the failed and near-success rollouts to the data; fine-tune world model + state model
              6. log ``cycle/*``

Devices: ``device`` (``auto``: CUDA when available) places the world model, state model, IDM and the VLA; the
data (uint8 episodes; training windows are cut per batch, ``world_models.data.WindowSet``), the start pool and
every metric stay in CPU RAM, and batches move to the models.

The world model is a module's worth of tensors and the policy a ``SmallVLA`` directory, so every stage
is checkpointed under ``output_dir`` (``cycle_<c>/``); the loop itself is not resumable mid-cycle.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo.device import check_device_name, resolve_device

from .data import NEAR_PROGRESS, StatePredictor, Trajectories, WindowSet, collect_policy_episodes, collect_sans, \
    predict_states, state_predictor_error, train_state_predictor
from .idm import IDMConfig, InverseDynamicsModel, idm_action_error, train_idm
from .video_wm import VideoWorldModel, WorldModelConfig, train_success_head, train_world_model

try:  # vla_rl is another frontend; the loop needs it, the world-model pieces above do not
    from vla_rl.trainer import VLARLConfig
except ImportError:  # pragma: no cover
    VLARLConfig = None  # type: ignore[assignment,misc]


WM_CAMERA = "agentview"  # the one camera the data, the world model and its env use


@dataclass
class DataConfig:
    task: str = "tabletop/reach"
    image_size: int = 32
    horizon: int = 16
    train: dict[str, int] = field(default_factory=lambda: {"success": 24, "near": 24, "failure": 12, "random": 12})
    test: dict[str, int] = field(default_factory=lambda: {"success": 6, "near": 6, "failure": 3, "random": 3})
    noise: float = 0.1
    train_seed_offset: int = 200_000
    test_seed_offset: int = 300_000
    start_pool: int = 128  # real initial observations (init seeds 0..N-1) the world-model env starts from
    # task progress at which a near-success stops following the expert (collect_sans; the task's own scale:
    # tabletop (0.5, 0.85), robosuite Lift ~(0.25, 0.5): 0.4 over the cube, 0.5 once grasped)
    near_progress: tuple[float, float] = NEAR_PROGRESS


@dataclass
class ModelsConfig:
    wm: WorldModelConfig = field(default_factory=lambda: WorldModelConfig(image_size=32, chunk=4, sampling_steps=4))
    wm_steps: int = 1500
    wm_finetune_steps: int = 300
    success_steps: int = 1500  # extra, class-balanced training of the success head alone (after the world model)
    wm_batch: int = 16
    wm_lr: float = 1e-3
    idm: IDMConfig = field(default_factory=lambda: IDMConfig(image_size=32, channels=(16, 32, 32), hidden=64))
    idm_steps: int = 600
    state_steps: int = 800
    # the success head also learns on the world model's own open-loop rollouts of the training episodes
    # (imagined frames labelled with the real episode's success), mixed with real frames: the env's reward
    # reads imagined frames only, where a head fit on real frames is at chance
    success_imagined: bool = True
    success_imagined_rollouts: int = 2  # noise seeds per training episode
    success_imagined_fraction: float = 0.5  # share of imagined samples per head batch
    success_augment: bool = True  # random flips / 2-pixel shifts of the head's frames (label-preserving)
    success_balance: bool = True  # weight positives by the negative/positive ratio (else: the data's own prior)
    success_threshold: float = 0.5
    # state-aware success head: it also reads the state at each frame (wm.state_dim is set from the data's
    # state dim; in the env and for its imagined training samples, the state model's open-loop prediction)
    success_state: bool = False
    success_state_points: list[int] = field(default_factory=list)  # -> wm.state_points (e.g. [0, 9, 12, 15] on reach)
    success_camera: list[float] = field(default_factory=list)  # -> wm.state_camera (instruction grounding)
    success_ground_weight: float = 1.0  # grounding cross-entropy on successful samples (train_success_head)
    env_sampling_steps: int = 2  # denoising steps per chunk inside the RL env (and in the metrics); x0-prediction keeps 2 sharp


@dataclass
class LoopConfig:
    seed: int = 0
    output_dir: str = "runs/wm_loop"
    # where the world model, state model, IDM and the VLA run ("auto": CUDA when available, else CPU; the VLA
    # stages use the same unless vla.device names another); data, start pools and windows stay in CPU RAM
    device: str = "auto"
    data: DataConfig = field(default_factory=DataConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    vla: Any = None  # a vla_rl.trainer.VLARLConfig (typed, see __post_init__)
    cycles: int = 3
    rl_iterations: int = 10  # GRPO iterations inside the world model per cycle
    real_eval_episodes: int = 32  # held-out real-simulator initial states
    rollouts_per_cycle: int = 16  # fresh real rollouts of the policy per cycle (metrics, then added to the data)
    policy_seed_offset: int = 400_000

    def __post_init__(self) -> None:
        from grpo.config import ConfigError, _build

        if VLARLConfig is None:
            raise ConfigError("world_models.loop needs vla_rl (the VLA frontend) importable")
        if self.vla is None:
            self.vla = VLARLConfig()
        elif isinstance(self.vla, dict):
            self.vla = _build(VLARLConfig, self.vla, "vla", "loop config")
        try:
            check_device_name(self.device)
        except ValueError as e:
            raise ConfigError(f"device: {e}") from None
        if self.cycles < 0 or self.rl_iterations < 0:
            raise ValueError("cycles and rl_iterations must be >= 0")
        pol = self.vla.policy
        if pol.use_images and list(pol.cameras) != [WM_CAMERA]:
            raise ConfigError(f"vla.policy.cameras={list(pol.cameras)}: the world model imagines only the {WM_CAMERA!r} "
                              f"camera, so the policy can read only [{WM_CAMERA}] (and the state: with "
                              "vla.env.kwargs.object_state=true it holds the object positions too)")


# ---- metrics ----------------------------------------------------------------------------------------
@torch.no_grad()
def rollout_video(wm: VideoWorldModel, first: torch.Tensor, actions: torch.Tensor, seed: int = 0,
                  steps: int | None = None, batch: int = 64, instructions: list[str] | None = None,
                  states: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Open-loop imagination: first frames ``[N, 3, H, W]`` + actions ``[N, T, A]`` -> video ``[N, T+1, 3, H, W]``
    and success logits ``[N, T]`` (chunk by chunk, the last chunk zero-padded). A state-aware head
    (``wm.cfg.state_dim > 0``) needs ``states[N, T, D]``, the state at frames ``1..T`` (as the env feeds it: the
    state model's open-loop prediction, :func:`world_models.data.predict_states`)."""
    if wm.cfg.state_dim and (states is None or states.shape[:2] != actions.shape[:2]):
        raise ValueError(f"a state-aware world model needs states [N, T, {wm.cfg.state_dim}] matching actions "
                         f"{tuple(actions.shape)}, got {None if states is None else tuple(states.shape)}")
    c = wm.cfg
    n, t = actions.shape[:2]
    gen = torch.Generator().manual_seed(seed)  # a CPU generator: the same noise on any device
    dev = wm.device
    vids, logs = [], []
    for i in range(0, n, batch):  # inputs and outputs in CPU RAM, one batch at a time on the model's device
        f0, act = first[i:i + batch].to(dev).float(), actions[i:i + batch].to(dev).float()
        ctx = f0[:, None].expand(-1, c.context_frames, -1, -1, -1)
        frames, logits = [f0[:, None]], []
        for s in range(0, t, c.chunk):
            a = act[:, s:s + c.chunk]
            k = a.shape[1]
            st = None
            if c.state_dim:  # pad like the env: the last state repeats
                st = states[i:i + batch, s:s + c.chunk].to(dev).float()
                st = torch.cat([st, st[:, -1:].expand(-1, c.chunk - k, -1)], dim=1)
            if k < c.chunk:
                a = torch.cat([a, a.new_zeros(a.shape[0], c.chunk - k, a.shape[2])], dim=1)
            fut, lg = wm.predict(ctx, a, generator=gen, steps=steps,
                                 text=None if instructions is None else instructions[i:i + batch], state=st,
                                 ref=f0 if c.state_camera else None)
            frames.append(fut[:, :k])
            logits.append(lg[:, :k])
            ctx = torch.cat([ctx, fut[:, :k]], dim=1)[:, -c.context_frames:]
        vids.append(torch.cat(frames, dim=1).cpu())
        logs.append(torch.cat(logits, dim=1).cpu())
    return torch.cat(vids), torch.cat(logs)


def _open_loop_states(wm: VideoWorldModel, state_model: torch.nn.Module | None, data: Trajectories,
                      purpose: str) -> torch.Tensor | None:
    """What the env feeds a state-aware head: ``state_model``'s open-loop states ``[N, T, D]`` from each episode's
    first real state under its recorded actions (None for a frames-only head)."""
    if not wm.cfg.state_dim:
        return None
    if state_model is None:
        raise ValueError(f"a state-aware success head (state_dim > 0) needs state_model for {purpose}")
    return predict_states(state_model.eval(), data.state[:, 0], data.actions).cpu()


@torch.no_grad()
def imagined_success_samples(wm: VideoWorldModel, data: Trajectories, rollouts: int = 1, seed: int = 0,
                             steps: int | None = None, state_model: torch.nn.Module | None = None
                             ) -> tuple[torch.Tensor, ...]:
    """The success head's training samples on the world model's *own* frames ("state-aware", World-VLA-Loop).

    For each episode of ``data`` (``N`` episodes, ``T`` actions) and each of ``rollouts`` noise seeds, the world
    model imagines the episode open-loop from its first real frame under the recorded actions, chunk by chunk
    exactly as the world-model env does (:func:`rollout_video`, ``steps`` denoising steps per chunk); imagined
    frame ``t`` (``1..T``) is labelled with the *simulator's* success flag at frame ``t`` of the real episode.
    Returns ``(frames[R*N*T, 3, H, W] in [0, 1], actions[R*N*T, A], labels[R*N*T], text[R*N*T, D] or None)``
    (:func:`world_models.video_wm.success_samples`' tuple, as a :class:`~world_models.video_wm.FrameSamples` that
    keeps the per-episode entries once per episode), ready for ``train_success_head(imagined=...)``.

    A state-aware head (``wm.cfg.state_dim > 0``) needs ``state_model``: each sample then also carries the
    state model's *open-loop* prediction of the state at that frame (from the episode's first real state,
    under the recorded actions: what the env feeds the head), a fifth entry ``state[R*N*T, D]``, and with
    ``wm.cfg.state_camera`` a sixth, the episode's first real frame ``ref[R*N*T, 3, H, W]``."""
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, got {rollouts}")
    from .video_wm import FrameSamples

    states = _open_loop_states(wm, state_model, data, "its imagined samples")
    text = wm.text_features(data.instructions).cpu() if wm.cfg.text_dim else None
    n, t = data.actions.shape[:2]
    s = wm.cfg.image_size
    frames = torch.empty(rollouts, n, t, 3, s, s, device="cpu")  # filled rollout by rollout: no concatenated copy
    for r in range(rollouts):
        frames[r] = rollout_video(wm, data.videos[:, 0], data.actions, seed=seed + 7919 * r, steps=steps,
                                  instructions=data.instructions, states=states)[0][:, 1:]
    rep = lambda x: x.flatten(0, 1).float().repeat(rollouts, *([1] * (x.dim() - 2)))  # noqa: E731  [N, T, ...] -> [R*N*T, ...]
    per_sample = [frames.view(-1, 3, s, s), rep(data.actions), rep(data.success[:, 1:]), None]
    per_episode = {3: text}
    if states is not None:
        per_sample.append(rep(states))
        if wm.cfg.state_camera:
            per_sample.append(None)
            per_episode[5] = data.videos[:, 0]
    episode = torch.arange(n, device="cpu").repeat_interleave(t).repeat(rollouts)
    return FrameSamples(per_sample, per_episode, episode)


@torch.no_grad()
def world_model_report(wm: VideoWorldModel, data: Trajectories, idm: InverseDynamicsModel | None = None,
                       threshold: float = 0.5, seed: int = 0, steps: int | None = None,
                       state_model: torch.nn.Module | None = None) -> dict[str, float]:
    """Open-loop rollouts of ``wm`` under the recorded actions of ``data`` vs the simulator's own frames.

    frame_mse (vs copy_first_frame_mse, the "nothing moves" baseline; and one_chunk_* for the first chunk
    only), success agreement per frame and per episode (the head on predicted frames vs the simulator's
    flag; balanced accuracy too, successes are rarer), and with an IDM the action-following error:
    MSE of the IDM's decoding of the imagined video vs the commanded actions (idm_on_real_mse: the same
    IDM on the real video, the floor). A state-aware head reads ``state_model``'s open-loop states, as in the
    env; ``episode_false_positive_rate``: share of the unsuccessful episodes the head calls successful (what
    the policy can exploit)."""
    real = data.videos
    states = _open_loop_states(wm, state_model, data, "the report")
    pred, logits = rollout_video(wm, real[:, 0], data.actions, seed=seed, steps=steps, instructions=data.instructions,
                                 states=states)
    t1 = real[:, 1:]
    k = wm.cfg.chunk
    out = {"frame_mse": float(((pred[:, 1:] - t1) ** 2).mean()),
           "copy_first_frame_mse": float(((real[:, :1] - t1) ** 2).mean()),
           "one_chunk_frame_mse": float(((pred[:, 1:k + 1] - real[:, 1:k + 1]) ** 2).mean()),
           "one_chunk_copy_mse": float(((real[:, :1] - real[:, 1:k + 1]) ** 2).mean())}
    truth = data.success[:, 1:] > 0.5
    guess = torch.sigmoid(logits) > threshold
    out["success_agreement"] = float((guess == truth).float().mean())
    tpr = float(guess[truth].float().mean()) if truth.any() else float("nan")
    tnr = float((~guess[~truth]).float().mean()) if (~truth).any() else float("nan")
    out["success_balanced_acc"] = float(np.nanmean([tpr, tnr]))
    out["episode_success_agreement"] = float((guess.any(1) == truth.any(1)).float().mean())
    neg = ~truth.any(1)
    out["episode_false_positive_rate"] = float(guess.any(1)[neg].float().mean()) if neg.any() else float("nan")
    if idm is not None:
        a = data.actions
        out["action_following_mse"] = float(((idm.decode_video(pred).cpu() - a) ** 2).mean())
        out["idm_on_real_mse"] = float(((idm.decode_video(real).cpu() - a) ** 2).mean())
        out["action_var"] = float(((a - a.mean(dim=(0, 1))) ** 2).mean())
    return out


# ---- model fitting -----------------------------------------------------------------------------------
def fit_success_head(wm: VideoWorldModel, m: ModelsConfig, train: Trajectories, windows: tuple | WindowSet, steps: int,
                     seed: int, state_model: torch.nn.Module | None = None) -> list[float]:
    """Class-balanced training of the success head: on the real frames of ``windows`` and, with
    ``m.success_imagined``, on the world model's own rollouts of ``train`` (:func:`imagined_success_samples`,
    sampled with ``m.env_sampling_steps`` as in the env), ``m.success_imagined_fraction`` of each batch;
    ``m.success_augment``: label-preserving flips and shifts (``train_success_head(augment=True)``).

    Measured on reach (loop_reach.yaml data and world model, 1000 head steps, 72 held-out episodes, balanced
    accuracy of the head on the model's *imagined* frames at threshold 0.5 / 0.7): real frames only 0.54 /
    0.54; + imagined frames 0.60 / 0.57; + imagined frames + augmentation (the default) 0.69 / 0.68 (0.70 /
    0.69 with a world model trained 3000 steps at batch 32). On real held-out frames: 0.60 -> 0.69.

    State-aware head (``m.success_state``; the state model must be trained first, ``state_model``): the
    imagined samples carry the state model's open-loop states. Same world model, 72 held-out episodes,
    threshold 0.7, per-frame balanced accuracy / episode agreement / episode false-positive rate: frames only
    0.62 / 0.58 / 0.61; + state 0.66 / 0.65 / 0.34; + state, distances and the camera grounding with
    ``success_ground_weight`` 5 and 2000 steps (loop_reach.yaml) 0.79 / 0.85 / 0.07; the rule "predicted grip
    point within 3 cm of the true target" (the ceiling of the state model) 0.99 / 0.99 / 0.0."""
    imagined = None
    if m.success_imagined:
        imagined = imagined_success_samples(wm, train, m.success_imagined_rollouts, seed=seed + 1,
                                            steps=m.env_sampling_steps, state_model=state_model)
    return train_success_head(wm, windows, steps, seed=seed, imagined=imagined,
                              imagined_fraction=m.success_imagined_fraction, augment=m.success_augment,
                              balance=m.success_balance, ground_weight=m.success_ground_weight)


def success_state_config(m: ModelsConfig, train: Trajectories) -> WorldModelConfig:
    """``m.wm`` with ``state_dim`` set from the data when ``m.success_state`` (else as configured)."""
    wcfg = copy.deepcopy(m.wm)
    if m.success_state:
        d = int(train.state.shape[-1]) if train.state is not None and train.state.dim() == 3 else 0
        if d == 0:
            raise ValueError("models.success_state=true needs trajectories with a state [N, T+1, D]; this data has none "
                             "(collect it with the env kwarg object_state: true to include the object positions)")
        if m.success_camera and not m.success_state_points:
            raise ValueError(f"models.success_camera={m.success_camera} grounds the instruction in the objects of "
                             "models.success_state_points, which is empty")
        if wcfg.state_dim not in (0, d):
            raise ValueError(f"models.wm.state_dim={wcfg.state_dim} does not match the data's state dim {d}")
        wcfg.state_dim = d
        if m.success_state_points:
            wcfg.state_points = tuple(int(p) for p in m.success_state_points)
            wcfg.state_camera = tuple(float(c) for c in m.success_camera)
            wcfg.__post_init__()  # checks the points against the state dim
    return wcfg


def fit_models(cfg: LoopConfig | ModelsConfig, train: Trajectories, seed: int = 0, log=print,
               device: str | torch.device = "cpu") -> dict[str, Any]:
    """Train the world model, state model and IDM from scratch on ``train``, on ``device`` (the data stays in CPU
    RAM, batches move); returns them with loss curves."""
    m = cfg.models if isinstance(cfg, LoopConfig) else cfg
    a_dim = int(train.actions.shape[-1])
    for name, got in (("models.wm.action_dim", m.wm.action_dim), ("models.idm.action_dim", m.idm.action_dim)):
        if got != a_dim:
            raise ValueError(f"{name}={got} but the data's actions have {a_dim} dims (the simulator's action space: "
                             "tabletop 4, robosuite 7)")
    wcfg = success_state_config(m, train)
    dev = resolve_device(device)
    torch.manual_seed(seed)  # initial weights: drawn on the CPU, then moved, so the same on any device
    t0 = time.time()
    # the state model first: a state-aware success head trains on its open-loop predictions
    sp = StatePredictor(train.state.shape[-1], train.actions.shape[-1]).to(dev)
    sp_loss = train_state_predictor(sp, train, m.state_steps, seed=seed)
    wm = VideoWorldModel(wcfg).to(dev)
    win = WindowSet(train, m.wm.context_frames, m.wm.chunk, text_dim=m.wm.text_dim, state=bool(wcfg.state_dim))
    wm_loss = train_world_model(wm, win, m.wm_steps, m.wm_batch, m.wm_lr, seed)
    fit_success_head(wm, m, train, win, m.success_steps, seed, state_model=sp)
    t_wm = time.time() - t0
    idm = InverseDynamicsModel(copy.deepcopy(m.idm)).to(dev)
    idm_loss = train_idm(idm, train.videos, train.actions, m.idm_steps, batch=64, lr=2e-3, seed=seed)
    log(f"models: world model {m.wm_steps} steps ({t_wm:.0f}s, loss {np.mean(wm_loss[:20]):.3f} -> "
        f"{np.mean(wm_loss[-50:]):.3f}), state model loss {sp_loss[-1]:.4f}, IDM loss {np.mean(idm_loss[-20:]):.4f}, "
        f"{time.time() - t0:.0f}s")
    return {"wm": wm, "state": sp, "idm": idm, "wm_loss": wm_loss, "idm_loss": idm_loss, "state_loss": sp_loss}


def finetune(models: dict, cfg: ModelsConfig, train: Trajectories, steps: int, seed: int) -> list[float]:
    w = WindowSet(train, cfg.wm.context_frames, cfg.wm.chunk, text_dim=cfg.wm.text_dim,
                  state=bool(models["wm"].cfg.state_dim))
    train_state_predictor(models["state"], train, max(steps, 100), seed=seed, fit_normalizers=False)
    losses = train_world_model(models["wm"], w, steps, cfg.wm_batch, cfg.wm_lr * 0.5, seed)
    fit_success_head(models["wm"], cfg, train, w, cfg.success_steps // 3, seed, state_model=models["state"])
    return losses


# ---- the loop ----------------------------------------------------------------------------------------
def _vla_cfg(cfg: LoopConfig, **changes) -> Any:
    """A copy of ``cfg.vla`` with dotted ``changes`` (``{"rl.iterations": 0}``)."""
    out = copy.deepcopy(cfg.vla)
    for key, val in changes.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = getattr(node, p)
        if not hasattr(node, parts[-1]):
            raise AttributeError(f"VLARLConfig has no field {key!r}")
        setattr(node, parts[-1], val)
    return out


def run_loop(cfg: LoopConfig, quiet: bool = False) -> dict[str, Any]:
    from grpo.config import config_to_dict
    from grpo.metrics import MetricsLogger
    from vla_rl.policy import SmallVLA
    from vla_rl.rollout import EnvPool, evaluate
    from vla_rl.trainer import VLARLTrainer

    from .wm_env import StartPool, register_world_model_env

    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    t_start = time.time()
    dev = resolve_device(cfg.device)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    logger = MetricsLogger(out, config=config_to_dict(cfg))
    d, m = cfg.data, cfg.models
    wm_name = "wm/" + d.task.split("/", 1)[-1]
    env_kwargs = dict(cfg.vla.env.kwargs, image_size=d.image_size)
    max_steps = cfg.vla.env.max_episode_steps

    # data + models
    t0 = time.time()
    sim_kw = {k: v for k, v in env_kwargs.items() if k not in ("image_size", "cameras")}  # e.g. object_state
    train = collect_sans(d.task, d.train, d.horizon, d.image_size, cfg.seed, d.train_seed_offset, d.noise, WM_CAMERA,
                         env_kwargs=sim_kw, near_progress=d.near_progress)
    test = collect_sans(d.task, d.test, d.horizon, d.image_size, cfg.seed + 1, d.test_seed_offset, d.noise, WM_CAMERA,
                       env_kwargs=sim_kw, near_progress=d.near_progress)
    say(f"data: train {train.counts()}, held-out {test.counts()}, {time.time() - t0:.0f}s")
    models = fit_models(cfg, train, cfg.seed, say, device=dev)
    starts = StartPool.from_sim(d.task, range(d.start_pool), d.image_size, WM_CAMERA, env_kwargs=sim_kw)
    idm_err = idm_action_error(models["idm"], test.videos, test.actions)
    rep = world_model_report(models["wm"], test, models["idm"], m.success_threshold, cfg.seed, m.env_sampling_steps,
                             models["state"])
    rep.update(state_predictor_error(models["state"], test))
    say("cycle 0 world model on held-out SANS: " + ", ".join(f"{k} {v:.4f}" for k, v in rep.items()))

    # policy: SFT in the real simulator
    sft_dir = out / "sft"
    vla_device = cfg.vla.device if cfg.vla.device != "auto" else str(dev)  # the loop's device unless vla sets one
    sft_cfg = _vla_cfg(cfg, output_dir=str(sft_dir), resume=False, device=vla_device,
                       **{"env.tasks": [d.task], "env.kwargs": env_kwargs, "rl.iterations": 0, "rl.num_videos": 0})
    VLARLTrainer(sft_cfg, quiet=True).train()
    policy_dir = sft_dir / "policy"
    pool = EnvPool(env_kwargs, cfg.vla.env.video_camera)
    eval_seeds = [cfg.vla.rl.eval_seed_offset + i for i in range(cfg.real_eval_episodes)]

    def real_success(policy) -> float:
        return evaluate(policy, pool, [d.task], eval_seeds, max_steps, seed=cfg.seed).success_rate

    policy = SmallVLA.from_pretrained(policy_dir).to(vla_device)
    history = [{"cycle": 0, "real_success": real_success(policy), **{f"wm_heldout/{k}": v for k, v in rep.items()},
                "idm/heldout_mse": idm_err["mse"], "idm/heldout_r2": idm_err["r2"], "data/episodes": len(train)}]
    logger.log(0, {k: v for k, v in history[0].items() if k != "cycle"})
    say(f"cycle 0: real-sim success after SFT {history[0]['real_success']:.3f}")

    for c in range(1, cfg.cycles + 1):
        tc = time.time()
        cdir = out / f"cycle_{c}"
        register_world_model_env(wm_name, models["wm"], models["state"], starts, threshold=m.success_threshold,
                                 seed=cfg.seed + c, sampling_steps=m.env_sampling_steps)
        vcfg = _vla_cfg(cfg, output_dir=str(cdir / "vla"), resume=False, seed=cfg.vla.seed + c, device=vla_device,
                        **{"env.tasks": [wm_name], "env.kwargs": env_kwargs, "sft.init_policy": str(policy_dir),
                           "rl.iterations": cfg.rl_iterations, "rl.eval_every": 0, "rl.num_videos": 0})
        summary = VLARLTrainer(vcfg, quiet=True).train()
        policy_dir = cdir / "vla" / "policy"
        policy = summary["policy"]
        rs = real_success(policy)
        seeds = [cfg.policy_seed_offset + c * 1000 + i for i in range(cfg.rollouts_per_cycle)]
        fresh = collect_policy_episodes(policy, d.task, seeds, d.horizon, d.image_size, stochastic=True, seed=cfg.seed + c,
                                        camera=WM_CAMERA, env_kwargs=sim_kw)
        on_policy = world_model_report(models["wm"], fresh, models["idm"], m.success_threshold, cfg.seed,
                                       m.env_sampling_steps, models["state"])
        add = [i for i, k in enumerate(fresh.kinds) if not k.endswith("_success")]
        if add:
            train = train.cat(fresh.subset(add))
        ft_loss = finetune(models, m, train, m.wm_finetune_steps, cfg.seed + c) if m.wm_finetune_steps > 0 else []
        held = world_model_report(models["wm"], test, models["idm"], m.success_threshold, cfg.seed, m.env_sampling_steps,
                                  models["state"])
        rec = {"cycle": c, "real_success": rs, "wm_success_before_rl": summary["sft_success"],
               "wm_success_after_rl": summary["final_success"],
               "policy_rollouts/real_success": float(fresh.episode_success.float().mean()),
               **{f"wm_on_policy/{k}": v for k, v in on_policy.items()},
               **{f"wm_heldout/{k}": v for k, v in held.items()},
               "data/episodes": len(train), "data/added": len(add),
               "wm/finetune_loss": float(np.mean(ft_loss[-50:])) if ft_loss else float("nan"),
               "time/cycle_s": time.time() - tc}
        history.append(rec)
        logger.log(c, {k: v for k, v in rec.items() if k != "cycle" and v is not None})
        torch.save({"wm": models["wm"].state_dict(), "state": models["state"].state_dict()}, cdir / "world_model.pt")
        say(f"cycle {c}: WM-imagined success {summary['sft_success']:.3f} -> {summary['final_success']:.3f}; "
            f"real-sim success {rs:.3f}; on the policy's real rollouts: frame MSE {on_policy['frame_mse']:.4f} "
            f"(copy {on_policy['copy_first_frame_mse']:.4f}), action-following MSE {on_policy['action_following_mse']:.4f} "
            f"(IDM on real {on_policy['idm_on_real_mse']:.4f}), success agreement {on_policy['episode_success_agreement']:.3f}; "
            f"+{len(add)} episodes; held-out frame MSE {held['frame_mse']:.4f}; {rec['time/cycle_s']:.0f}s")
    logger.close()
    (out / "history.json").write_text(json.dumps(history, indent=1))
    say(f"real-sim success per cycle: {[round(h['real_success'], 3) for h in history]} ({time.time() - t_start:.0f}s); "
        f"outputs in {out.resolve()}")
    return {"history": history, "models": models, "train": train, "test": test, "policy_dir": str(policy_dir)}


def main(argv: list[str] | None = None) -> int:
    from grpo.config import ConfigError, dump_config, load_config

    p = argparse.ArgumentParser(prog="python -m world_models.loop", description=__doc__.split("\n\n")[0])
    p.add_argument("config", nargs="?", default=None, help="YAML config (LoopConfig)")
    p.add_argument("overrides", nargs="*", help="key=value overrides, e.g. cycles=2 vla.rl.lr=5e-4")
    p.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")
    args = p.parse_args(argv)
    try:
        cfg = load_config(LoopConfig, args.config, args.overrides)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(dump_config(cfg))
        return 0
    run_loop(cfg)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
