"""The one interface every policy the VLA trainer drives implements (built-in SmallVLA, LeRobot's SmolVLA / pi0).

A :class:`TrainablePolicy` is an ``nn.Module`` (parameters, ``state_dict``, ``.to(device)``, ``train()`` / ``eval()``)
with ``cfg`` (:class:`vla_rl.policy.PolicyConfig`: cameras, chunking, head, flow SDE settings) and three groups of
methods, the same as LeRobot's ``PreTrainedPolicy`` (``lerobot/policies/pretrained.py``) plus the RL pair:

* RL -- ``sample_chunk(batch, stochastic, generator) -> HeadSample`` (actions ``[B, K, A]``, the record of the
  denoising chain, per-step log-probs ``[B, S]`` through :func:`grpo.flow_sde.sde_step`, the stochastic-step mask)
  and ``chunk_log_prob(batch, record) -> HeadLogProb`` (the same log-probs recomputed with gradients under the
  current weights: equal bit for bit to the rollout's before any update, PPO ratio 1);
* supervised -- ``forward(batch) -> (loss, info)`` (flow matching), ``set_state_normalization(mean, std)``;
* deployment -- ``select_action(batch) -> [B, A]`` (an action queue over chunks), ``predict_action_chunk(batch)
  -> [B, K, A]``, ``reset()`` at each episode start;
* persistence -- ``save_pretrained(path)`` and the classmethod ``from_pretrained(path, cfg=None)``;
* ``set_mixed_precision(mode)`` and ``tokens_per_chunk`` (log-prob tokens ``S`` per chunk);
* ``vocabulary() -> list[str] | None`` / ``set_vocabulary(words)``, the word vocabulary a trainer
  checkpoint stores beside the weights (SmallVLA's word tokenizer; a LeRobot policy's tokenizer lives in its
  processors: None); a user's class without them stores none (:func:`policy_vocabulary`).

``policy.kind`` / ``policy.type`` in the YAML pick the class (:mod:`vla_rl.policies.factory`), as LeRobot's
``make_policy`` picks one by ``config.type``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from ..action_head import Generators, HeadLogProb, HeadSample
from ..policy import PolicyConfig


@runtime_checkable
class TrainablePolicy(Protocol):
    cfg: PolicyConfig

    def sample_chunk(self, batch: dict[str, Any], stochastic: bool = True,
                     generator: Generators = None) -> HeadSample: ...

    def chunk_log_prob(self, batch: dict[str, Any], record: dict[str, torch.Tensor]) -> HeadLogProb: ...

    def forward(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict]: ...

    def set_state_normalization(self, mean: torch.Tensor, std: torch.Tensor) -> None: ...

    def select_action(self, batch: dict[str, Any], stochastic: bool = False,
                      generator: Generators = None) -> torch.Tensor: ...

    def predict_action_chunk(self, batch: dict[str, Any], stochastic: bool = False,
                             generator: Generators = None) -> torch.Tensor: ...

    def reset(self) -> None: ...

    def set_mixed_precision(self, mode: str) -> None: ...

    @property
    def tokens_per_chunk(self) -> int: ...

    def vocabulary(self) -> list[str] | None: ...

    def set_vocabulary(self, words: list[str]) -> None: ...

    def save_pretrained(self, path: str | Path) -> Path: ...

    @classmethod
    def from_pretrained(cls, path: str | Path, cfg: PolicyConfig | None = None) -> "TrainablePolicy": ...


def policy_vocabulary(policy: Any) -> list[str] | None:
    """``policy.vocabulary()`` (the words a trainer checkpoint stores beside the weights); None for a class that
    does not define it (the protocol's default: no vocabulary outside the weights)."""
    get = getattr(policy, "vocabulary", None)
    return get() if callable(get) else None


def load_checkpoint_weights(policy, state: dict, path) -> None:
    """``policy.load_state_dict(state)`` of a checkpoint at ``path``; tensors of other shapes or names (a damaged
    checkpoint, or another policy's) raise one ``ValueError`` naming the file and the first mismatch."""
    from grpo.checkpoint import nonfinite_tensors

    bad = nonfinite_tensors(state)
    if bad:  # training or evaluating from them would give NaN actions
        raise ValueError(f"{path}/model.safetensors: tensor {bad[0]!r} holds NaN/inf ({len(bad)} of {len(state)} "
                         "tensors): a damaged checkpoint, left as it is")
    try:
        policy.load_state_dict(state)
    except RuntimeError as e:
        first = next((ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()), " ".join(str(e).split()))
        raise ValueError(f"{path}/model.safetensors does not fit this policy: {first}") from None


def restore_vocabulary(policy: Any, words: list[str] | None) -> None:
    """Give ``policy`` a checkpoint's vocabulary (:func:`policy_vocabulary`); nothing when ``words`` is None or
    the class keeps none."""
    if words is not None and callable(getattr(policy, "set_vocabulary", None)):
        policy.set_vocabulary(words)


def check_policy(policy: Any) -> TrainablePolicy:
    """``policy`` itself when it is an ``nn.Module`` implementing :class:`TrainablePolicy`; else a ``TypeError``
    naming the missing methods."""
    missing = [m for m in ("sample_chunk", "chunk_log_prob", "forward", "set_state_normalization", "select_action",
                           "predict_action_chunk", "reset", "set_mixed_precision", "save_pretrained", "from_pretrained")
               if not callable(getattr(policy, m, None))]
    if not isinstance(policy, nn.Module) or missing or not hasattr(policy, "cfg"):
        raise TypeError(f"{type(policy).__name__} is not a TrainablePolicy (an nn.Module with cfg); missing: {missing}")
    return policy
