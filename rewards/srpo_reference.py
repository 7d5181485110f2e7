"""A layout-aware SRPO reference for groups without a success (``srpo.reference: predicted``; ours, not SRPO's rule).

SRPO grades a failure by its latent distance to the batch's successes *of the same task*. Where every initial state
redraws the scene (the tabletop tasks: a new ball position per state), another state's success ended somewhere else,
so for a group (same task and initial state) with no success of its own that distance ranks the group's failures
by how near they ended to *another* layout's goal (``bench/diag_progress_ceiling.py``: Spearman +0.13 with the grip
point, where the group's own success gives +0.90). This module predicts, from the group's initial frame, where a
success of *that* layout would have ended in the latent:

    s_g = phi(o_g)                 scene features of the group's initial frame o_g (a frozen image encoder), [F]
    z*_g = mean of the latents of the group's successes                                          [D]

A memory of ``(s_g, z*_g)`` pairs per task, from every group that had a success (the policy's own successes,
across iterations; at most ``memory`` per task, oldest dropped), fits kernel ridge regression (Saunders et al.
1998) on the standardized features with an RBF kernel ``k(a, b) = exp(-gamma * ||a - b||^2 / F)``::

    alpha = (K + lam I)^-1 (Z - mean Z),     z^(s) = k(s, S) alpha + mean Z

and a failure of an all-failure group is graded against ``z^(s_g)`` as against a success centre. The prediction
is used only when it generalizes: the leave-one-out residuals of kernel ridge are closed-form,
``e_i = (z_i - z^_i) / (1 - H_ii)`` with the hat matrix ``H = K (K + lam I)^-1``, and the gate is
``R2_loo = 1 - sum ||e_i||^2 / sum ||z_i - mean Z||^2 >= min_r2`` (with at least ``min_layouts`` pairs). Below the
gate the group has no reference, and its failures keep the binary reward 0, as a task with no success in SRPO's
rule.

No simulator progress enters: the pairs are the policy's own successful episodes (the success flag SRPO already
uses) and the camera frame the policy saw at reset. The scene encoder is frozen when the memory starts (the
frontend passes the policy's image encoder, snapshotted after SFT; ``vla_rl.srpo_encoders``), so that features
stored at different iterations stay comparable; its weights travel with the memory in :meth:`state_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

KRR_FEATURE_EPS = 1e-6  # added to the features' std before standardizing (a constant feature stays 0)


def rbf_kernel(a: np.ndarray, b: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(-gamma * ||a_i - b_j||^2 / F)`` for ``a`` ``[N, F]``, ``b`` ``[M, F]`` -> ``[N, M]``."""
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None] - 2.0 * a @ b.T
    return np.exp(-gamma * np.maximum(d2, 0.0) / a.shape[1])


@dataclass
class KernelRidge:
    """Kernel ridge regression ``features [N, F] -> latents [N, D]`` (module docstring) with its leave-one-out R2."""

    mu: np.ndarray  # [F] feature mean
    sd: np.ndarray  # [F] feature std (+ eps)
    x: np.ndarray  # [N, F] standardized training features
    alpha: np.ndarray  # [N, D]
    z_mean: np.ndarray  # [D]
    gamma: float
    r2_loo: float

    def predict(self, features: np.ndarray) -> np.ndarray:
        """``[M, F] -> [M, D]``."""
        return rbf_kernel((features - self.mu) / self.sd, self.x, self.gamma) @ self.alpha + self.z_mean


def fit_kernel_ridge(features: np.ndarray, latents: np.ndarray, lam: float, gamma: float) -> KernelRidge:
    """Fit :class:`KernelRidge` on ``features`` ``[N, F]`` -> ``latents`` ``[N, D]`` (float64), with the closed-form
    leave-one-out R2 (``-inf`` when the latents do not vary)."""
    mu, sd = features.mean(0), features.std(0) + KRR_FEATURE_EPS
    x = (features - mu) / sd
    z_mean = latents.mean(0)
    zc = latents - z_mean
    k = rbf_kernel(x, x, gamma)
    inv = np.linalg.inv(k + lam * np.eye(len(x)))
    alpha = inv @ zc
    hat = k @ inv
    resid = (zc - hat @ zc) / np.maximum(1.0 - np.diag(hat), 1e-9)[:, None]
    sst = float((zc ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / sst if sst > 0 else float("-inf")
    return KernelRidge(mu, sd, x, alpha, z_mean, gamma, r2)


@dataclass
class SuccessMemory:
    """Per task, the ``(scene features [F], success latent [D])`` pairs of the groups that had a success, oldest
    first, at most ``size`` per task; :meth:`predictor` fits the task's regression and says whether it passes the
    gate."""

    size: int
    lam: float
    gamma: float
    min_layouts: int
    min_r2: float
    features: dict[str, list[np.ndarray]] = field(default_factory=dict)
    latents: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def add(self, task: str, features: np.ndarray, latent: np.ndarray) -> None:
        fs, zs = self.features.setdefault(task, []), self.latents.setdefault(task, [])
        fs.append(np.asarray(features, np.float64))
        zs.append(np.asarray(latent, np.float64))
        del fs[:-self.size], zs[:-self.size]

    def predictor(self, task: str) -> tuple[KernelRidge | None, float, int]:
        """``(model or None when below the gate, R2_loo, pairs)`` for ``task``."""
        n = len(self.features.get(task, []))
        if n < max(self.min_layouts, 2):
            return None, float("nan"), n
        if len({z.shape for z in self.latents[task]}) != 1:  # (an encoder change on resume is refused earlier)
            raise ValueError(f"task {task!r}: the success memory holds latents of different widths")
        model = fit_kernel_ridge(np.stack(self.features[task]), np.stack(self.latents[task]), self.lam, self.gamma)
        return (model if model.r2_loo >= self.min_r2 else None), model.r2_loo, n

    def state_dict(self) -> dict:
        return {"features": {t: torch.as_tensor(np.stack(v)) for t, v in self.features.items() if v},
                "latents": {t: torch.as_tensor(np.stack(v)) for t, v in self.latents.items() if v}}

    def load_state_dict(self, st: dict) -> None:
        self.features = {t: list(v.double().numpy()) for t, v in st["features"].items()}
        self.latents = {t: list(v.double().numpy()) for t, v in st["latents"].items()}
        for t in self.features:
            del self.features[t][:-self.size], self.latents[t][:-self.size]
