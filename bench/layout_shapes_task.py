"""The shapes task's second reward with headroom (issue 35): a composition reward (a centred layout), not a size
credit.

Fixed before any tuning of the tree credit (issue 35 item 1 asks for a second task "of a different kind, chosen
and fixed before any tuning"): this module was committed before any tree setting was measured on it, and its
constants have not changed since. (A first draft gave each object of a relation its own prompt-dependent anchor,
the centre -+ W/4 along the relation's axis; flat GRPO alone, the only arm run on it, climbed 0.29 -> 0.36 in 48
iterations, a slope too close to the evaluation noise to time, so it was replaced by the rule below before any tree
arm ran.)

The shipped shapes model (``builtin:shapes_sd3``) was pretrained on renders that place each object uniformly at
random inside the canvas (``rewards.shapes._positions``), so the demo's verifier is indifferent to *where* the
objects are as long as the relation holds. This task asks for a centred composition, the way a composition
preference (an aesthetic "centred subject" rule) would, scored by the exact verifier's blobs::

    c_o     = coverage-weighted centroid (px, sub-pixel) of object o's blob (rewards.shapes.find_blobs/coverage)
    d       = | mean_o c_o - canvas centre |        (0 objects found: d = inf)
    place   = max(0, 1 - d / (RADIUS_FRAC * W))     (RADIUS_FRAC = 1/4: 8 px at 32 px)
    total   = verifier_total * place                (verifier_total: rewards.shapes.verify, exact shapes)
    all-correct (detail ``accuracy``) = verifier all-correct and d <= HIT_FRAC * W (3.2 px)

A single object should sit at the centre; a pair should straddle it (its midpoint there), the relation still
holding. Centroids are taken over the objects that are found; a missing object already costs through the
verifier's colour term. It differs from ``big_shapes_task`` in kind: that reward grows every blob, this one moves
the blobs and leaves their size alone (a big blob off centre earns little, a small centred one full credit); the
place is decided in the first denoising steps (the low frequencies), where the trees branch. The base model's
placements are random, and the layouts it must learn are inside the pretraining layouts' range.

Components (``RewardOutput.components``, higher is better): ``color``, ``shape``, ``relation`` (the verifier's) and
``place``; ``total`` is the product above, not their mean (documented, as ``rewards.base`` asks). Details:
``accuracy`` (all-correct as above), ``verifier`` (the demo's total), ``dist`` (``d`` in px; the canvas diagonal
when no object is found).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rewards.base import RewardBatch, RewardOutput
from rewards.shapes import coverage, find_blobs, parse_prompt, verify

RADIUS_FRAC = 0.25  # place falls to 0 at this fraction of the width from the centre (8 px at 32 px)
HIT_FRAC = 0.1  # all-correct needs the objects' mean centroid within this fraction of the width of the centre


def composition_distance(image: torch.Tensor, prompt: str, tol: float = 0.25) -> float:
    """``d`` (px) for ``image [3, H, W]``: the mean of the found requested objects' coverage-weighted centroids, to
    the canvas centre ``((W - 1) / 2, (H - 1) / 2)`` in pixel-index coordinates (pixel ``i``'s centre is ``i``, as
    in ``rewards.shapes.find_blobs``); ``inf`` when no requested object is found."""
    img = image.permute(1, 2, 0).cpu().numpy().astype(np.float32)
    h, w = img.shape[:2]
    blobs = find_blobs(img, tol)
    objects = np.zeros((h, w), dtype=bool)
    for m, _ in blobs.values():
        objects |= m
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    cents = []
    for color, _ in parse_prompt(prompt).objects:
        if color not in blobs:
            continue
        mask = blobs[color][0]
        a = coverage(img, color, mask, objects & ~mask).astype(np.float64)
        if not a.sum() > 0:
            a = mask.astype(np.float64)
        cents.append(((a * xs).sum() / a.sum(), (a * ys).sum() / a.sum()))
    if not cents:
        return math.inf
    cx, cy = np.mean(cents, axis=0)
    return float(math.hypot(cx - (w - 1) / 2, cy - (h - 1) / 2))


class LayoutShapesReward:
    """``batch -> RewardOutput``: the demo verifier times the centred-composition credit (module docstring)."""

    __name__ = "layout_shapes"

    def __init__(self, radius_frac: float = RADIUS_FRAC, hit_frac: float = HIT_FRAC, tol: float = 0.25):
        if not 0 < radius_frac <= 1:
            raise ValueError(f"radius_frac is a fraction of the width in (0, 1], got {radius_frac}")
        if not 0 < hit_frac <= radius_frac:
            raise ValueError(f"hit_frac is a fraction of the width in (0, radius_frac={radius_frac}], got {hit_frac}")
        self.radius_frac, self.hit_frac, self.tol = float(radius_frac), float(hit_frac), tol

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        rows = []
        for img, prompt in zip(batch.images.cpu(), batch.prompts):
            w = img.shape[-1]
            v = verify(img, parse_prompt(prompt), self.tol)
            d = composition_distance(img, prompt, self.tol)
            place = max(0.0, 1.0 - d / (self.radius_frac * w))
            rows.append({"color": v["color"], "shape": v["shape"], "relation": v["relation"], "place": place,
                         "total": v["total"] * place,
                         "accuracy": float(v["accuracy"] == 1.0 and d <= self.hit_frac * w), "verifier": v["total"],
                         "dist": d if math.isfinite(d) else math.hypot(w, img.shape[-2])})

        def col(k: str) -> torch.Tensor:
            return torch.tensor([r[k] for r in rows], dtype=torch.float32)

        return RewardOutput(total=col("total"), components={k: col(k) for k in ("color", "shape", "relation", "place")},
                            details={k: col(k) for k in ("accuracy", "verifier", "dist")})
