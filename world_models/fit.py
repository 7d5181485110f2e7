"""Fitting and judging the World-VLA-Loop's models, with no RL loop: the world model (frames + success head), the
proprio state model and the IDM, trained on simulator data, and reports of the world model against the simulator.

    models = fit_models(ModelsConfig(...), train_trajectories, seed=0, device="cpu")   # {"wm", "state", "idm", ...}
    report = world_model_report(models["wm"], held_out, models["idm"], state_model=models["state"])
    finetune(models, models_cfg, more_trajectories, steps=300, seed=1)

:class:`DataConfig` (the SANS data mix, ``world_models.data.collect_sans``) and :class:`ModelsConfig` (models and
their training) are the ``data:`` / ``models:`` sections of the loop's config; the loop itself, which runs the
VLA's RL trainer inside the world model, is the VLA frontend's (``vla_rl.wm_loop``, ``vla-rl loop CONFIG``).

Devices: ``fit_models(device=...)`` places the world model, state model and IDM; the data (uint8 episodes;
training windows are cut per batch, ``world_models.windows.WindowSet``) and every metric stay in CPU RAM, and
batches move to the models.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from grpo.config import MAX_BATCH, MAX_EPISODE_STEPS, MAX_EPISODES, MAX_LR, require_at_least, require_at_most
from grpo.device import resolve_device

from .data import KINDS, NEAR_PROGRESS, StatePredictor, Trajectories, predict_states, train_state_predictor
from .idm import IDMConfig, InverseDynamicsModel, train_idm
from .video_wm import VideoWorldModel, WorldModelConfig, train_success_head, train_world_model
from .windows import FrameBatch, FrameSamples, WindowBatch, WindowSet

WM_CAMERA = "agentview"  # the one camera the data, the world model and its env use


@dataclass
class DataConfig:
    task: str = "tabletop/reach"  # sims task the data is collected on
    image_size: int = 32  # frame side in pixels
    horizon: int = 16  # steps per episode
    train: dict[str, int] = field(  # training episodes per kind
        default_factory=lambda: {"success": 24, "near": 24, "failure": 12, "random": 12})
    test: dict[str, int] = field(  # held-out episodes per kind
        default_factory=lambda: {"success": 6, "near": 6, "failure": 3, "random": 3})
    noise: float = 0.1  # action noise of the scripted expert
    train_seed_offset: int = 200_000  # initial states of the training episodes start here
    test_seed_offset: int = 300_000  # initial states of the held-out episodes start here
    start_pool: int = 128  # real initial observations (init seeds 0..N-1) the world-model env starts from
    # task progress at which a near-success stops following the expert (collect_sans; the task's own scale:
    # tabletop (0.5, 0.85), robosuite Lift ~(0.25, 0.5): 0.4 over the cube, 0.5 once grasped)
    near_progress: tuple[float, float] = NEAR_PROGRESS  # task progress at which a near-success
                                                        # stops following the expert

    def __post_init__(self) -> None:
        require_at_least("data", self, noise=0.0, train_seed_offset=0, test_seed_offset=0, start_pool=1)
        require_at_most("data", self, start_pool=MAX_EPISODES,  # (initial observations recorded when the loop starts)
                        horizon=MAX_EPISODE_STEPS)  # (1e9 steps: every episode recorded for days)
        for name in ("train", "test"):
            counts = getattr(self, name)
            unknown = sorted(set(counts) - set(KINDS))
            if unknown:
                raise ValueError(f"data.{name} has unknown episode kind(s) {unknown}; expected {', '.join(KINDS)}")
            bad = {k: v for k, v in counts.items() if v < 0}
            if bad:
                raise ValueError(f"data.{name} must count episodes >= 0 per kind, got {bad}")
            big = {k: v for k, v in counts.items() if v > MAX_EPISODES}  # (1e9: recorded for days)
            if big:
                raise ValueError(f"data.{name}={big}: expected at most {MAX_EPISODES} episodes per kind")
            if not any(counts.values()):  # (was: accepted; the models fit on / report over no episode after the
                # data collection began)
                raise ValueError(f"data.{name}={counts}: no episode at all; expected at least one episode of some "
                                 f"kind ({', '.join(KINDS)})")
        lo, hi = self.near_progress
        if not 0 <= lo < hi <= 1:
            raise ValueError(f"data.near_progress must be (low, high) with 0 <= low < high <= 1, got "
                             f"{list(self.near_progress)}")


@dataclass
class ModelsConfig:
    wm: WorldModelConfig = field(  # world model
        default_factory=lambda: WorldModelConfig(image_size=32, chunk=4, sampling_steps=4))
    wm_steps: int = 1500  # world-model training steps before the first cycle
    wm_finetune_steps: int = 300  # world-model fine-tuning steps per cycle
    success_steps: int = 1500  # extra, class-balanced training of the success head alone (after the world model)
    wm_batch: int = 16  # world-model training batch (windows)
    wm_lr: float = 1e-3  # world-model learning rate
    idm: IDMConfig = field(  # the IDM
        default_factory=lambda: IDMConfig(image_size=32, channels=(16, 32, 32), hidden=64))
    idm_steps: int = 600  # IDM training steps
    state_steps: int = 800  # state-model training steps
    # the success head also learns on the world model's own open-loop rollouts of the training episodes
    # (imagined frames labelled with the real episode's success), mixed with real frames: the env's reward
    # reads imagined frames only, where a head fit on real frames is at chance
    success_imagined: bool = True  # also train the success head on the world model's own rollouts
    success_imagined_rollouts: int = 2  # noise seeds per training episode
    success_imagined_fraction: float = 0.5  # share of imagined samples per head batch
    success_augment: bool = True  # random flips / 2-pixel shifts of the head's frames (label-preserving)
    success_balance: bool = True  # weight positives by the negative/positive ratio (else: the data's own prior)
    success_threshold: float = 0.5  # success probability above which an imagined step counts as success
    # state-aware success head: it also reads the state at each frame (wm.state_dim is set from the data's
    # state dim; in the env and for its imagined training samples, the state model's open-loop prediction)
    success_state: bool = False  # the success head also reads the (predicted) state
    success_state_points: list[int] = field(default_factory=list)  # -> wm.state_points (e.g. [0, 9, 12, 15] on reach)
    success_camera: list[float] = field(default_factory=list)  # -> wm.state_camera (instruction grounding)
    success_ground_weight: float = 1.0  # grounding cross-entropy on successful samples (train_success_head)
    env_sampling_steps: int = 2  # denoising steps per chunk inside the RL env (and in the metrics);
                                 # x0-prediction keeps 2 sharp

    def __post_init__(self) -> None:
        require_at_least("models", self, wm_steps=0, wm_finetune_steps=0, success_steps=0, wm_batch=1, idm_steps=0,
                         state_steps=0, success_imagined_rollouts=0, success_imagined_fraction=0.0,
                         success_ground_weight=0.0, env_sampling_steps=1)
        if self.wm_lr <= 0:
            raise ValueError(f"models.wm_lr must be > 0, got {self.wm_lr}")
        require_at_most("models", self, wm_lr=MAX_LR)  # (1e300: AdamW's float32 overflow, a traceback)
        require_at_most("models", self, wm_batch=MAX_BATCH,  # (1e9 windows a batch: the memory, after the data)
                        env_sampling_steps=10_000,  # (as wm.sampling_steps: 1e9 denoising steps per imagined chunk)
                        success_imagined_rollouts=1000)  # (world-model rollouts per training episode)
        if self.success_imagined_fraction > 1:
            raise ValueError(f"models.success_imagined_fraction must be in [0, 1], got "
                             f"{self.success_imagined_fraction}")
        if not 0 < self.success_threshold < 1:
            raise ValueError(f"models.success_threshold must be a probability in (0, 1), got {self.success_threshold}")
        pts = list(self.success_state_points)
        if pts and not self.success_state:  # (was: accepted and read nowhere)
            raise ValueError(f"models.success_state_points={pts} with models.success_state=false: expected [] (only a "
                             "state-aware success head reads them)")
        if pts and (len(pts) < 2 or len(set(pts)) != len(pts) or min(pts) < 0):  # (was: refused after the data)
            raise ValueError(f"models.success_state_points={pts}: expected [] or at least 2 distinct state offsets "
                             ">= 0 of xyz points (e.g. [0, 9]: the grip point and one object)")


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
                             steps: int | None = None, state_model: torch.nn.Module | None = None) -> FrameSamples:
    """The success head's training samples on the world model's *own* frames ("state-aware", World-VLA-Loop).

    For each episode of ``data`` (``N`` episodes, ``T`` actions) and each of ``rollouts`` noise seeds, the world
    model imagines the episode open-loop from its first real frame under the recorded actions, chunk by chunk
    exactly as the world-model env does (:func:`rollout_video`, ``steps`` denoising steps per chunk); imagined
    frame ``t`` (``1..T``) is labelled with the *simulator's* success flag at frame ``t`` of the real episode.
    Returns ``R*N*T`` samples (rollout-major, then episodes, then frames): ``frames [3, H, W]`` in [0, 1],
    ``actions [A]``, ``labels`` and the instruction features ``text`` (or None), as a
    :class:`~world_models.windows.FrameSamples` that keeps the per-episode entries once per episode, ready for
    ``train_success_head(imagined=...)``.

    A state-aware head (``wm.cfg.state_dim > 0``) needs ``state_model``: each sample then also carries the
    state model's *open-loop* prediction of the state at that frame (from the episode's first real state,
    under the recorded actions: what the env feeds the head) as ``state [D]``, and with ``wm.cfg.state_camera``
    the episode's first real frame as ``ref [3, H, W]``."""
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, got {rollouts}")
    states = _open_loop_states(wm, state_model, data, "its imagined samples")
    text = wm.text_features(data.instructions).cpu() if wm.cfg.text_dim else None
    n, t = data.actions.shape[:2]
    s = wm.cfg.image_size
    frames = torch.empty(rollouts, n, t, 3, s, s, device="cpu")  # filled rollout by rollout: no concatenated copy
    for r in range(rollouts):
        frames[r] = rollout_video(wm, data.videos[:, 0], data.actions, seed=seed + 7919 * r, steps=steps,
                                  instructions=data.instructions, states=states)[0][:, 1:]
    rep = lambda x: x.flatten(0, 1).float().repeat(rollouts, *([1] * (x.dim() - 2)))  # noqa: E731  [N, T, ...] -> [R*N*T, ...]
    samples = FrameBatch(frames.view(-1, 3, s, s), rep(data.actions), rep(data.success[:, 1:]),
                         state=None if states is None else rep(states))
    ref = data.videos[:, 0] if states is not None and wm.cfg.state_camera else None
    episode = torch.arange(n, device="cpu").repeat_interleave(t).repeat(rollouts)
    return FrameSamples(samples, {"text": text, "ref": ref}, episode)


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
def fit_success_head(wm: VideoWorldModel, m: ModelsConfig, train: Trajectories, windows: WindowBatch | WindowSet,
                     steps: int,
                     seed: int, state_model: torch.nn.Module | None = None) -> list[float]:
    """Class-balanced training of the success head: on the real frames of ``windows`` and, with
    ``m.success_imagined``, on the world model's own rollouts of ``train`` (:func:`imagined_success_samples`,
    sampled with ``m.env_sampling_steps`` as in the env), ``m.success_imagined_fraction`` of each batch;
    ``m.success_augment``: label-preserving flips and shifts (``train_success_head(augment=True)``). State-aware
    head (``m.success_state``; the state model must be trained first, ``state_model``): the imagined samples carry
    the state model's open-loop states.

    What each of these options bought on reach (balanced accuracy, episode agreement, false positives):
    docs/RESULTS.md#world-model-parts-and-eva."""
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
            raise ValueError("models.success_state=true needs trajectories with a state [N, T+1, D]; this data has "
                             "none (collect it with the env kwarg object_state: true to include the object positions)")
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


def fit_models(cfg: ModelsConfig, train: Trajectories, seed: int = 0, log=print,
               device: str | torch.device = "cpu") -> dict[str, Any]:
    """Train the world model, state model and IDM from scratch on ``train``, on ``device`` (the data stays in CPU
    RAM, batches move); returns them with loss curves. ``cfg``: the models' config (or any config with a
    ``models`` section, e.g. the loop's)."""
    m = cfg if isinstance(cfg, ModelsConfig) else cfg.models
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


def empty_models(cfg: ModelsConfig, train: Trajectories, device: str | torch.device = "cpu") -> dict[str, Any]:
    """The world model, state model and IDM of :func:`fit_models`, untrained (shapes from ``cfg`` and ``train``'s
    state / action sizes): what a saved ``state_dict`` of each loads into (a resumed loop)."""
    dev = resolve_device(device)
    return {"wm": VideoWorldModel(success_state_config(cfg, train)).to(dev),
            "state": StatePredictor(train.state.shape[-1], train.actions.shape[-1]).to(dev),
            "idm": InverseDynamicsModel(copy.deepcopy(cfg.idm)).to(dev)}


def finetune(models: dict, cfg: ModelsConfig, train: Trajectories, steps: int, seed: int) -> list[float]:
    """Fine-tune the state model, world model (half the learning rate) and success head (a third of its steps) of
    ``models`` on ``train``; returns the world model's loss curve."""
    w = WindowSet(train, cfg.wm.context_frames, cfg.wm.chunk, text_dim=cfg.wm.text_dim,
                  state=bool(models["wm"].cfg.state_dim))
    train_state_predictor(models["state"], train, max(steps, 100), seed=seed, fit_normalizers=False)
    losses = train_world_model(models["wm"], w, steps, cfg.wm_batch, cfg.wm_lr * 0.5, seed)
    fit_success_head(models["wm"], cfg, train, w, cfg.success_steps // 3, seed, state_model=models["state"])
    return losses
