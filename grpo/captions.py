"""Image grids a person can read: each tile upscaled (nearest neighbour, an integer factor) to at least
``min_tile`` pixels and captioned underneath (e.g. its prompt and reward), drawn with PIL's built-in font.

    grid = captioned_grid(images[B, 3, H, W] in [0, 1], ["a red circle | 0.812", ...], nrow=8)   # [3, H', W']

Tiles keep :func:`grpo.metrics.image_grid`'s row-major order, so a caption file written beside the grid (the run
report's ``<grid>.json``) names the same cells.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import torch


def upscale_factor(h: int, w: int, min_tile: int) -> int:
    """The smallest integer factor that makes the shorter side of an ``h x w`` tile at least ``min_tile`` pixels."""
    return max(1, math.ceil(min_tile / max(1, min(h, w))))


def captioned_grid(images: torch.Tensor, captions: list[str], nrow: int | None = None, min_tile: int = 256,
                   pad: int = 4, lines: int = 3) -> torch.Tensor:
    """``[B, 3, H, W]`` images in ``[0, 1]`` and one caption each -> one ``[3, H', W']`` float grid in ``[0, 1]``:
    each tile upscaled by :func:`upscale_factor` (nearest neighbour) with up to ``lines`` wrapped caption lines
    below it on white."""
    from PIL import Image, ImageDraw, ImageFont

    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be [B, 3, H, W], got {tuple(images.shape)}")
    if len(captions) != images.shape[0]:
        raise ValueError(f"{len(captions)} captions for {images.shape[0]} images")
    b, _, h, w = images.shape
    k = upscale_factor(h, w, min_tile)
    th, tw = h * k, w * k
    big = torch.nn.functional.interpolate(images.detach().float().clamp(0, 1).cpu(), scale_factor=k, mode="nearest")
    font = ImageFont.load_default()
    line_h = 12
    chars = max(8, tw // 6)  # the default bitmap font is about 6 px per character
    cap_h = lines * line_h + 4
    nrow = nrow or math.ceil(math.sqrt(b))
    ncol = math.ceil(b / nrow)
    canvas = Image.new("RGB", (nrow * (tw + pad) + pad, ncol * (th + cap_h + pad) + pad), "white")
    draw = ImageDraw.Draw(canvas)
    tiles = (big.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
    for i in range(b):
        r, c = divmod(i, nrow)
        x, y = pad + c * (tw + pad), pad + r * (th + cap_h + pad)
        canvas.paste(Image.fromarray(tiles[i]), (x, y))
        wrapped = textwrap.wrap(captions[i], chars)[:lines] or [""]
        for j, text in enumerate(wrapped):
            draw.text((x + 2, y + th + 2 + j * line_h), text, fill="black", font=font)
    return torch.from_numpy(np.array(canvas)).permute(2, 0, 1).float() / 255.0
