"""The shapes task with headroom (issue 25): the demo's prompts and verifier, and objects asked to be large.

The shipped shapes model (``builtin:shapes_sd3``) was pretrained on renders whose objects have radii of 0.14-0.2 of
the canvas (``rewards.shapes._positions``: 4.5-6.4 px at 32 px, coverage-weighted areas of about 64-129 px^2), and it
already gets colours and relations right (0.97, 0.98), so the demo's verifier leaves RL only about +0.04 all-correct
to learn. This task keeps every piece of the demo -- the prompt grammar, the model, the programmatic verifier -- and
asks for one thing the base is far from, as a preference reward (an aesthetic score, a "large subject" preference)
would: every requested object should cover at least ``target_area`` pixels. The verifier's score stays a factor, so
a large blob of the wrong colour, shape or place earns nothing::

    size_o  = min(1, a_o / target_area)          a_o: coverage-weighted area of object o's blob (0 if absent)
    total   = verifier_total * mean_o size_o     (verifier_total: rewards.shapes.verify, exact shape credit)
    all-correct (detail ``accuracy``) = verifier all-correct and a_o >= target_area for every object

``a_o`` is the sum of the per-pixel coverage ``rewards.shapes.coverage`` gives the blob (sub-pixel, so ``size`` is a
dense signal: a blob one pixel wider scores higher). With ``target_area = 160`` (a circle of radius 7.1 px, 1.25x the
largest pretraining area, so two objects of a relation still fit side by side at 32 px) the shipped base starts at
about half the size credit, total ~0.4: a reward the base is far from, learnable without new words or new data.

Components (``RewardOutput.components``, higher is better): ``color``, ``shape``, ``relation`` (the verifier's) and
``size``; ``total`` is the product above, not their mean (documented, as ``rewards.base`` asks). Details: ``accuracy``
(all-correct as above), ``verifier`` (the demo's total), ``area`` (mean ``a_o`` in px^2).
"""

from __future__ import annotations

import numpy as np
import torch

from rewards.base import RewardBatch, RewardOutput
from rewards.shapes import coverage, find_blobs, parse_prompt, verify

TARGET_AREA = 160.0  # px^2 at 32x32: a circle of radius 7.1 px


def object_areas(image: torch.Tensor, prompt: str, tol: float = 0.25) -> list[float]:
    """Coverage-weighted area (px^2) of each requested object's largest blob in ``image [3, H, W]`` (0: absent)."""
    img = image.permute(1, 2, 0).cpu().numpy().astype(np.float32)
    blobs = find_blobs(img, tol)
    objects = np.zeros(img.shape[:2], dtype=bool)
    for m, _ in blobs.values():
        objects |= m
    out = []
    for color, _ in parse_prompt(prompt).objects:
        if color not in blobs:
            out.append(0.0)
            continue
        mask = blobs[color][0]
        out.append(float(coverage(img, color, mask, objects & ~mask).sum()))
    return out


class BigShapesReward:
    """``batch -> RewardOutput``: the demo verifier times the size credit (see the module docstring)."""

    __name__ = "big_shapes"

    def __init__(self, target_area: float = TARGET_AREA, tol: float = 0.25):
        if not target_area > 0:
            raise ValueError(f"target_area is an area in px^2 > 0, got {target_area}")
        self.target_area = float(target_area)
        self.tol = tol

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        rows = []
        for img, prompt in zip(batch.images.cpu(), batch.prompts):
            v = verify(img, parse_prompt(prompt), self.tol)
            areas = object_areas(img, prompt, self.tol)
            size = float(np.mean([min(1.0, a / self.target_area) for a in areas]))
            big = all(a >= self.target_area for a in areas)
            rows.append({"color": v["color"], "shape": v["shape"], "relation": v["relation"], "size": size,
                         "total": v["total"] * size, "accuracy": float(v["accuracy"] == 1.0 and big),
                         "verifier": v["total"], "area": float(np.mean(areas))})

        def col(k: str) -> torch.Tensor:
            return torch.tensor([r[k] for r in rows], dtype=torch.float32)

        return RewardOutput(total=col("total"), components={k: col(k) for k in ("color", "shape", "relation", "size")},
                            details={k: col(k) for k in ("accuracy", "verifier", "area")})
