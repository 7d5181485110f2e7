"""JPEG compressibility / incompressibility (DDPO, Black et al. 2023, Sec. 5.1).

The reward is minus (compressibility) or plus (incompressibility) the size of the JPEG encoding, in kB,
at quality 95 -- weight-free, deterministic, and a classic sanity task for diffusion RL::

    images [B, 3, H, W] in [0, 1] -> uint8 -> JPEG(q) -> size_kb [B];  total = -size_kb  (or +size_kb)

Component: ``jpeg_compressibility`` (or ``jpeg_incompressibility``) = ``total``; detail ``jpeg_kb``.
Runs on CPU (PIL); videos are scored per frame and averaged (``ImageReward``).
"""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image

from .base import ImageReward, RewardOutput


def jpeg_size_kb(images: torch.Tensor, quality: int = 95) -> torch.Tensor:
    """Size in kB of each image ``[B, 3, H, W]`` in [0, 1] encoded as JPEG."""
    arr = (images.detach().cpu().clamp(0, 1).permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
    sizes = []
    for a in arr:
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, format="JPEG", quality=quality)
        sizes.append(buf.tell() / 1000.0)
    return torch.tensor(sizes, dtype=torch.float32, device="cpu")


class JpegReward(ImageReward):
    def __init__(self, compressible: bool = True, quality: int = 95, nonfinite: str = "warn"):
        if not 1 <= quality <= 100:
            raise ValueError(f"JPEG quality must be in [1, 100], got {quality}")
        self.sign = -1.0 if compressible else 1.0
        self.quality = quality
        self.name = "jpeg_compressibility" if compressible else "jpeg_incompressibility"
        self.nonfinite = nonfinite  # type: ignore[assignment]

    def score(self, images, prompts, metadata) -> RewardOutput:
        kb = jpeg_size_kb(images, self.quality).to(images.device)
        total = self.sign * kb
        return RewardOutput(total=total, components={self.name: total}, details={"jpeg_kb": kb})
