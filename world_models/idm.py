"""Inverse-dynamics model (IDM): a short window of frames -> the action taken between them.

``IDM(frames[B, W, C, H, W']) -> action[B, A]`` predicts the action applied between frame ``W//2 - 1`` and
``W//2`` of the window (for ``W = 2``: from frame 0 to frame 1), from the stacked frames and their
differences. Applied with a sliding window, :meth:`InverseDynamicsModel.decode_video` turns a video
``[B, T, C, H, W]`` into an action sequence ``[B, T-1, A]`` -- the first stage of the EVA executability
reward (``rewards/eva.py``), as in VPT (Baker et al. 2022) and EVA.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from grpo.config import MAX_WIDTH, require_at_least, require_at_most
from grpo.device import module_device

from .encoders import check_video


@dataclass
class IDMConfig:
    action_dim: int = 4  # action size
    window: int = 2  # frames the IDM sees per predicted action
    channels: tuple[int, ...] = (32, 64, 64)  # conv channels per block
    hidden: int = 128  # MLP width
    image_size: int = 64  # frame side in pixels

    def __post_init__(self) -> None:
        require_at_least("idm", self, action_dim=1, window=2, hidden=1, image_size=1)
        require_at_most("idm", self, hidden=MAX_WIDTH, channels=MAX_WIDTH, window=1024)
        if not self.channels or min(self.channels) < 1:
            raise ValueError(f"idm.channels must be a non-empty list of channel counts >= 1, got {list(self.channels)}")


class InverseDynamicsModel(nn.Module):
    def __init__(self, cfg: IDMConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or IDMConfig()
        if cfg.window < 2:
            raise ValueError(f"IDM window must be >= 2 frames, got {cfg.window}")
        c_in = 3 * cfg.window + 3 * (cfg.window - 1)  # frames + consecutive differences
        layers = []
        for c in cfg.channels:
            layers += [nn.Conv2d(c_in, c, 4, stride=2, padding=1), nn.GroupNorm(4, c), nn.SiLU()]
            c_in = c
        self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(2), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(c_in * 4, cfg.hidden), nn.SiLU(), nn.Linear(cfg.hidden, cfg.action_dim))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """``frames[B, W, C, H, W']`` in [0, 1] (any device: moved to the model's) -> ``[B, A]`` on the model's
        device."""
        frames = check_video(frames).to(module_device(self))
        if frames.shape[1] != self.cfg.window:
            raise ValueError(f"IDM expects windows of {self.cfg.window} frames, got {frames.shape[1]}")
        b, w = frames.shape[:2]
        x = frames.flatten(0, 1)
        if x.shape[-1] != self.cfg.image_size:
            x = F.interpolate(x, size=(self.cfg.image_size,) * 2, mode="bilinear", align_corners=False, antialias=True)
        x = x.reshape(b, w, *x.shape[1:]) * 2 - 1
        diffs = x[:, 1:] - x[:, :-1]
        return self.head(self.conv(torch.cat([x, diffs], dim=1).flatten(1, 2)))

    def windows(self, video: torch.Tensor) -> torch.Tensor:
        """All sliding windows of a video ``[B, T, ...]`` -> ``[B, T - W + 1, W, ...]``."""
        w = self.cfg.window
        t = video.shape[1]
        if t < w:
            raise ValueError(f"video has {t} frames, fewer than the IDM window {w}")
        return torch.stack([video[:, i:i + w] for i in range(t - w + 1)], dim=1)

    def decode_video(self, video: torch.Tensor) -> torch.Tensor:
        """Actions ``[B, T - W + 1, A]`` for every window of the video (``T - 1`` for ``W = 2``)."""
        win = self.windows(check_video(video))
        b, n = win.shape[:2]
        return self(win.flatten(0, 1)).reshape(b, n, -1)


def train_idm(model: InverseDynamicsModel, videos: torch.Tensor, actions: torch.Tensor, steps: int = 300,
              batch: int = 64, lr: float = 1e-3, seed: int = 0) -> list[float]:
    """Supervised regression on trajectories: ``videos[N, T, C, H, W]``, ``actions[N, T-1, A]`` (action ``t`` moves
    frame ``t`` to ``t+1``). Returns the loss curve (MSE)."""
    videos = check_video(videos)
    n, t = videos.shape[:2]
    w = model.cfg.window
    if actions.shape[:2] != (n, t - 1):
        raise ValueError(f"actions must be [N={n}, T-1={t - 1}, A], got {tuple(actions.shape)}")
    # the window starting at frame i predicts the action at index i + w//2 - 1
    off = w // 2 - 1
    gen = torch.Generator().manual_seed(seed)  # batches drawn on the CPU; the model moves them to its device
    dev = module_device(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for _ in range(steps):
        vi = torch.randint(n, (batch,), generator=gen, device="cpu")
        si = torch.randint(t - w + 1, (batch,), generator=gen, device="cpu")
        x = torch.stack([videos[v, s:s + w] for v, s in zip(vi.tolist(), si.tolist())])
        y = actions[vi, si + off].float().to(dev)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def idm_action_error(model: InverseDynamicsModel, videos: torch.Tensor, actions: torch.Tensor) -> dict[str, float]:
    """Held-out error: MSE and mean absolute error per action dimension, and R^2 against predicting the mean."""
    pred = model.decode_video(videos).cpu()
    off = model.cfg.window // 2 - 1
    target = actions[:, off:off + pred.shape[1]].float()
    mse = float(((pred - target) ** 2).mean())
    var = float(((target - target.mean(dim=(0, 1))) ** 2).mean())
    return {"mse": mse, "mae": float((pred - target).abs().mean()), "r2": 1.0 - mse / max(var, 1e-12)}
