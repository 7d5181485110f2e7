"""Distribution statistics of generated images, used as gold monitors (never trained on): they move when a policy
hacks a reward with degenerate images (flat colour, grid / checkerboard artifacts).

* ``colour_variance``: per image, the variance over pixels of each channel, averaged over channels,
  ``(1/3) sum_c Var_{h,w}(x_c)``; collapses towards 0 for flat or washed-out images.
* ``low_freq_ratio``: per image, ``1 - E_high / E_total`` of the 2-D power spectrum ``|FFT(x - mean)|^2`` summed over
  channels, ``E_high`` the energy at normalized frequencies ``max(|f_y|, |f_x|) > 1/4`` (the outer half of the
  band, where a 2-4 pixel grid puts its energy). Natural images keep most energy at low frequencies; it falls when
  grid artifacts appear (higher is better, like every monitor).

Both take ``batch.images`` ``[B, 3, H, W]`` (video ``[B, F, 3, H, W]``: frames averaged) in ``[0, 1]`` and return a
:class:`~rewards.base.RewardOutput` with ``total [B]``.
"""

from __future__ import annotations

import torch

from .base import RewardOutput


def _frames(images: torch.Tensor) -> torch.Tensor:
    x = images.float()
    return x.flatten(0, 1) if x.dim() == 5 else x


def _per_sample(images: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return v.view(images.shape[0], -1).mean(1) if images.dim() == 5 else v


def colour_variance(batch) -> RewardOutput:
    x = _frames(batch.images)
    v = x.flatten(2).var(2, unbiased=False).mean(1)
    return RewardOutput(total=_per_sample(batch.images, v), components={})


def low_freq_ratio(batch) -> RewardOutput:
    x = _frames(batch.images)
    x = x - x.mean((2, 3), keepdim=True)
    p = torch.fft.fft2(x).abs().pow(2).sum(1)  # [N, H, W]
    fy = torch.fft.fftfreq(x.shape[-2]).abs().view(-1, 1)
    fx = torch.fft.fftfreq(x.shape[-1]).abs().view(1, -1)
    high = (torch.maximum(fy, fx) > 0.25).to(p.dtype)
    tot = p.flatten(1).sum(1).clamp_min(1e-12)
    v = 1.0 - (p * high).flatten(1).sum(1) / tot
    return RewardOutput(total=_per_sample(batch.images, v), components={})


STATS = {"colour_variance": colour_variance, "low_freq_ratio": low_freq_ratio}


def build_monitor(name: str):
    """A monitor by name: one of :data:`STATS`, else :func:`rewards.build_reward` (a registered reward name or
    ``"package.module:attr"``)."""
    if name in STATS:
        return STATS[name]
    from . import build_reward

    try:
        return build_reward(name)
    except ValueError as e:  # an unknown name: say which setting named it, and the monitors' own names
        raise ValueError(f"eval.monitors: {e}; or one of the image statistics {', '.join(STATS)}") from None
