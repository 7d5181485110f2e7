"""Supervised warm-up (behaviour cloning) of a chunking policy on a few recorded demos.

Each demo step ``t`` becomes one training example: the observation at ``t`` and the target chunk
``a[t : t + K]`` (padded past the end with the last action, flagged in ``action_is_pad`` as LeRobot does).
The loss is the policy's own ``forward`` (flow matching for the flow head, MSE for the Gaussian head).
Images get a random-shift augmentation (pad by ``shift`` pixels and crop back, as DrQ / robomimic do),
which matters with 1-5 demos per task.

Demos are ``Demo`` records; :func:`demos_from_hdf5` reads the robomimic-style files written by ``sims``.
The dataset stays on the CPU; each minibatch is moved to the policy's device (the random shift runs there, its
offsets drawn from the CPU generator), so a seed trains the same on any device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from grpo.config import (
    MAX_BATCH,
    MAX_EPISODES,
    MAX_LR,
    require_at_least,
    require_at_most,
    require_positive,
    require_weight_decay,
)
from grpo.device import module_device, randint

from .policy import IMAGE_PREFIX, STATE_KEY, batch_to


@dataclass
class Demo:
    instruction: str
    state: np.ndarray  # [T, D] float32
    actions: np.ndarray  # [T, A] float32
    images: dict[str, np.ndarray] = field(default_factory=dict)  # camera -> uint8 [T, H, W, 3]
    env_name: str = ""

    def __post_init__(self) -> None:
        t = len(self.actions)
        if len(self.state) != t or any(len(v) != t for v in self.images.values()):
            raise ValueError(f"demo arrays disagree in length: actions {t}, state {len(self.state)}, "
                             f"images {[len(v) for v in self.images.values()]}")


@dataclass
class SFTConfig:
    demos_per_task: int = 3  # scripted-expert demos recorded per task
    steps: int = 1500  # SFT optimizer steps
    batch_size: int = 64  # decision points per SFT step
    lr: float = 1e-3  # AdamW learning rate in SFT
    weight_decay: float = 1e-4  # AdamW weight decay in SFT
    image_shift: int = 4  # random-shift augmentation in pixels (0: off)
    demo_path: str | None = None  # an existing HDF5 file; None: record with the scripted experts
    demo_seed_offset: int = 500_000  # demo initial states come from here on (disjoint from RL and eval seeds)
    log_every: int = 100  # SFT steps between log lines
    init_policy: str | None = None  # a saved policy directory (save_pretrained) to start from; SFT is then skipped
    # a pretrained policy (directory or "builtin:<name>") that SFT *fine-tunes* on the demos, keeping its
    # vocabulary and state normalization (policy.* must describe the same architecture)
    base_policy: str | None = None  # a pretrained policy (directory or builtin:<name>) that
                                    # SFT fine-tunes on the demos

    def __post_init__(self) -> None:
        require_at_least("sft", self, demos_per_task=1, steps=0, batch_size=1, weight_decay=0.0, image_shift=0,
                         demo_seed_offset=0, log_every=1)
        require_positive("sft", self, "lr")
        require_at_most("sft", self, lr=MAX_LR)  # (1e300: AdamW's float32 overflow, a traceback)
        require_weight_decay("sft", self.weight_decay, self.lr)
        require_at_most("sft", self, demos_per_task=MAX_EPISODES,  # (as record-demos' n: 1e8 would record for days)
                        batch_size=MAX_BATCH)
        if self.init_policy and self.base_policy:
            raise ValueError(f"sft.init_policy={self.init_policy!r} (skip SFT) and "
                             f"sft.base_policy={self.base_policy!r} "
                             "(fine-tune it) exclude each other; set one")


class DemoDataset:
    """All ``(observation_t, chunk a[t:t+K])`` pairs of the demos, held as tensors."""

    def __init__(self, demos: Sequence[Demo], chunk_size: int, cameras: Sequence[str], use_images: bool = True):
        if not demos:
            raise ValueError("no demos to train on")
        self.cameras = list(cameras) if use_images else []
        states, chunks, pads, tasks = [], [], [], []
        imgs: dict[str, list] = {c: [] for c in self.cameras}
        for d in demos:
            t = len(d.actions)
            idx = np.arange(t)[:, None] + np.arange(chunk_size)[None]  # [T, K]
            pads.append(torch.as_tensor(idx >= t, device="cpu"))
            chunks.append(torch.as_tensor(d.actions[np.minimum(idx, t - 1)], dtype=torch.float32, device="cpu"))
            states.append(torch.as_tensor(d.state, dtype=torch.float32, device="cpu"))
            tasks += [d.instruction] * t
            for c in self.cameras:
                if c not in d.images:
                    raise KeyError(f"demo has no camera {c!r}; it has {sorted(d.images)}")
                imgs[c].append(torch.as_tensor(d.images[c], device="cpu"))
        self.state = torch.cat(states)
        self.action = torch.cat(chunks)
        self.is_pad = torch.cat(pads)
        self.tasks = tasks
        self.images = {c: torch.cat(v) for c, v in imgs.items()}

    def __len__(self) -> int:
        return len(self.tasks)

    def batch(self, idx: torch.Tensor, shift: int = 0, generator: torch.Generator | None = None,
              device: torch.device | str = "cpu") -> dict[str, Any]:
        """Examples ``idx`` (a CPU index) as a policy batch on ``device``, images randomly shifted by ``shift``."""
        out: dict[str, Any] = {STATE_KEY: self.state[idx], "action": self.action[idx],
                               "action_is_pad": self.is_pad[idx],
                               "task": [self.tasks[i] for i in idx.tolist()]}
        out = batch_to(out, device)
        for c, im in self.images.items():
            x = im[idx].to(device).permute(0, 3, 1, 2).float() / 255.0
            out[IMAGE_PREFIX + c] = random_shift(x, shift, generator) if shift > 0 else x
        return out


def random_shift(x: torch.Tensor, shift: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Pad ``[B, C, H, W]`` by ``shift`` (replicate) and crop a random ``H x W`` window per image (on ``x``'s device;
    the offsets are drawn on the generator's device)."""
    b, _, h, w = x.shape
    dev = x.device
    padded = F.pad(x, (shift,) * 4, mode="replicate")
    ox = randint(0, 2 * shift + 1, (b,), generator, dev)
    oy = randint(0, 2 * shift + 1, (b,), generator, dev)
    rows = (oy[:, None] + torch.arange(h, device=dev)[None])  # [B, H]
    cols = (ox[:, None] + torch.arange(w, device=dev)[None])  # [B, W]
    bi = torch.arange(b, device=dev)[:, None, None]
    return padded.permute(0, 2, 3, 1)[bi, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def state_stats(demos: Sequence[Demo]) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.as_tensor(np.concatenate([d.state for d in demos]), dtype=torch.float32, device="cpu")
    return s.mean(0), s.std(0, unbiased=False).clamp(min=1e-2)


def train_sft(policy, demos: Sequence[Demo], cfg: SFTConfig, seed: int = 0,
              progress: Callable[[int, float], None] | None = None, fit_normalization: bool = True) -> list[float]:
    """Behaviour cloning for ``cfg.steps`` steps (AdamW, cosine decay); returns the loss curve.

    ``fit_normalization=False`` keeps the policy's state normalization (fine-tuning a pretrained base: its
    statistics come from far more data than a few demos)."""
    ds = DemoDataset(demos, policy.cfg.chunk_size, policy.cfg.cameras, policy.cfg.use_images)
    if fit_normalization:
        policy.set_state_normalization(*state_stats(demos))
    dev = module_device(policy)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt,
                                              lambda s: 0.5 * (1 + math.cos(math.pi * min(s, cfg.steps) / cfg.steps)))
    policy.train()
    losses = []
    for step in range(cfg.steps):
        idx = torch.randint(len(ds), (min(cfg.batch_size, len(ds)),), generator=gen, device="cpu")
        loss, _ = policy.forward(ds.batch(idx, cfg.image_shift, gen, dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step, losses[-1])
    policy.eval()
    return losses
