"""Several rewards at once: a weighted total and every component, optionally for GDPO.

    MultiReward(rewards={"shapes_verifier": 1.0, "jpeg_compressibility": 0.1})

``total = sum_k w_k r_k``; components are ``"<name>"`` (each reward's total) plus ``"<name>/<component>"``.
With ``grpo.advantage=gdpo`` the trainer normalizes the ``"<name>"`` components separately per group and
then weights them (``grpo.advantages.decoupled_advantages``; set ``grpo.reward_weights`` to the same weights).
"""

from __future__ import annotations

from typing import Any

import torch

from .base import RewardBatch, RewardOutput, check_output


class MultiReward:
    def __init__(self, rewards: dict[str, float], kwargs: dict[str, dict[str, Any]] | None = None):
        from . import build_reward

        if not rewards:
            raise ValueError("MultiReward needs at least one reward name -> weight")
        kwargs = kwargs or {}
        unknown = set(kwargs) - set(rewards)
        if unknown:
            raise ValueError(f"kwargs given for rewards {sorted(unknown)} that are not in {sorted(rewards)}")
        self.weights = {k: float(w) for k, w in rewards.items()}
        self.rewards = {k: build_reward(k, **kwargs.get(k, {})) for k in rewards}

    def __call__(self, batch: RewardBatch) -> RewardOutput:
        total = None
        comps: dict[str, torch.Tensor] = {}
        for name, fn in self.rewards.items():
            out = check_output(fn(batch), len(batch), name)
            comps[name] = out.total.float()
            comps.update({f"{name}/{k}": v for k, v in out.components.items()})
            part = self.weights[name] * out.total.float()
            total = part if total is None else total + part
        assert total is not None
        return RewardOutput(total=total, components=comps)

    @property
    def reward_components(self) -> list[str]:
        return list(self.rewards)
