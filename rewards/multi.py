"""Several rewards at once: a weighted total, or GDPO's decoupled normalization, and every component.

    MultiReward(rewards={"pickscore": 1.0, "jpeg_compressibility": 0.5},
                kwargs={"pickscore": {"model": "...", "processor": "..."}})

For member rewards ``k`` with totals ``r_k [B]`` and weights ``w_k``:

* ``normalization="sum"`` (default): ``total = sum_k w_k r_k``.
* ``normalization="gdpo"`` (GDPO, Liu et al. 2026, Eq. 5-6): each ``r_k`` is normalized within its group,
  then weighted and summed (and batch-normalized) by the shared optimizer core,
  ``grpo.advantages.decoupled_advantages({k: r_k}, group_ids, {k: w_k})``::

      total_i = BN( sum_k w_k (r_ik - mean_g(r_k)) / (std_g(r_k) + eps) )

  Groups come from ``metadata[i]["group_id"]`` when every row has one, else samples with the same prompt form
  a group (the GRPO grouping of diffusion RL). The total is then already an advantage-like signal; leave the
  trainer's advantage at mean/std with ``std_mode="global"`` or ``"none"``, or, equivalently and preferably,
  use the plain sum here with the trainer's ``grpo.advantage=gdpo`` and ``grpo.reward_weights=`` these weights.

``components`` are the member totals by name (what GDPO normalizes); ``details`` holds every member's own
components and details as ``"<name>/<key>"`` and, under GDPO, the plain weighted sum as ``"weighted_sum"``.
"""

from __future__ import annotations

from typing import Any

import torch

from .base import RewardBatch, RewardOutput, check_output


def group_ids_of(batch: RewardBatch) -> torch.Tensor:
    """``[B]`` long group ids: ``metadata[i]["group_id"]`` if all rows have one, else ids of identical prompts."""
    meta = batch.metadata or []
    if meta and all(isinstance(m, dict) and "group_id" in m for m in meta):
        return torch.tensor([int(m["group_id"]) for m in meta], dtype=torch.long, device="cpu")
    if not batch.prompts:
        raise ValueError("GDPO needs groups: give metadata[i]['group_id'] or prompts (same prompt = same group)")
    index: dict[str, int] = {}
    return torch.tensor([index.setdefault(p, len(index)) for p in batch.prompts], dtype=torch.long, device="cpu")


class MultiReward:
    name = "multi"

    def __init__(self, rewards: dict[str, float], kwargs: dict[str, dict[str, Any]] | None = None,
                 normalization: str = "sum", eps: float = 1e-4, batch_norm: bool = True, nonfinite: str = "warn"):
        from . import build_reward

        if not rewards:
            raise ValueError("MultiReward needs at least one reward name -> weight, e.g. {'pickscore': 1.0}")
        if normalization not in ("sum", "gdpo"):
            raise ValueError(f"normalization must be 'sum' or 'gdpo', got {normalization!r}")
        kwargs = kwargs or {}
        unknown = set(kwargs) - set(rewards)
        if unknown:
            raise ValueError(f"kwargs given for rewards {sorted(unknown)} that are not in {sorted(rewards)}")
        bad = {k: w for k, w in rewards.items() if not isinstance(w, (int, float)) or w != w}
        if bad:
            raise ValueError(f"reward weights must be numbers, got {bad}")
        self.weights = {k: float(w) for k, w in rewards.items()}
        self.rewards = {k: build_reward(k, **kwargs.get(k, {})) for k in rewards}
        self.normalization, self.eps, self.batch_norm, self.nonfinite = normalization, eps, batch_norm, nonfinite

    def gdpo(self, components: dict[str, torch.Tensor], group_ids: torch.Tensor) -> torch.Tensor:
        """GDPO's decoupled, weighted, batch-normalized sum ``[B]`` (``grpo.advantages.decoupled_advantages``)."""
        from grpo.advantages import decoupled_advantages

        return decoupled_advantages({k: components[k].float().cpu() for k in self.weights}, group_ids.cpu(),
                                    self.weights, self.eps, batch_norm=self.batch_norm).values

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        n = len(batch)
        comps: dict[str, torch.Tensor] = {}
        details: dict[str, torch.Tensor] = {}
        for name, fn in self.rewards.items():
            out = check_output(fn(batch), n, name, "ignore")
            comps[name] = out.total.float()
            for group in ("components", "details"):
                details.update({f"{name}/{k}": v for k, v in (getattr(out, group, None) or {}).items()})
        device = next(iter(comps.values())).device
        weighted = sum(self.weights[k] * comps[k].to(device) for k in comps)
        assert isinstance(weighted, torch.Tensor)
        if self.normalization == "gdpo":
            finite = torch.stack([torch.isfinite(v).cpu() for v in comps.values()]).all(0)
            total = torch.full((n,), float("nan"), device="cpu")
            if bool(finite.any()):  # NaN rows are kept out of the group statistics and stay NaN
                total[finite] = self.gdpo({k: v.cpu()[finite] for k, v in comps.items()}, group_ids_of(batch)[finite])
            details["weighted_sum"] = weighted
            total = total.to(device)
        else:
            total = weighted
        return check_output(RewardOutput(total=total.float(), components=comps, details=details), n, self.name,
                            self.nonfinite)  # type: ignore[arg-type]

    @property
    def reward_components(self) -> list[str]:
        return list(self.rewards)
