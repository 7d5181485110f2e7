"""Extension points without forking: a config value ``"package.module:Name"`` names a user's object, imported and
checked against its protocol when the config loads (one error naming what is missing), then used like a built-in.

    cls = load_object("my_pkg.models:MyAdapter", "model.adapter")            # ValueError: one line, what and why
    check_protocol(cls, DIFFUSION_ADAPTER, "model.adapter", "my_pkg.models:MyAdapter")
    import_modules(["my_pkg.tasks"], "env.plugins")                          # registers sims tasks as a side effect

The protocols (what each extension point calls; the docs' worked example is docs/EXTENDING.md):

* :data:`DIFFUSION_ADAPTER` (``model.adapter``): a class built as ``Cls(pipe, model_cfg)`` (``pipe`` from
  ``Cls.load_pipeline(model_cfg)`` when it defines one, else the built-in loader for ``model.kind``); subclassing
  :class:`diffusion_rl.adapters.DiffusionAdapter` (or SD3Adapter / FluxAdapter / WanAdapter) gives everything but
  ``velocity``, ``decode`` and ``latent_shape``.
* :data:`REWARD` (``reward.name``): a callable ``f(batch) -> out`` with ``out.total [B]`` (``rewards.base.Reward``),
  or a class whose instances are (built with ``reward.kwargs``).
* sims tasks (``env.plugins``): modules whose import calls ``sims.registry.register("<suite>/<task>", factory)``,
  ``factory(**env.kwargs)`` returning a gymnasium env with the observation dict, ``info["success"]`` and
  ``max_steps`` of ``sims`` (see sims/README.md).
* :data:`VLA_POLICY` (``policy.kind``): a policy class with the methods the VLA rollouts and update call.
* :data:`SRPO_ENCODER` (``srpo.encoder``): SRPO's trajectory encoder, built as ``Name(srpo.encoder_path)`` (a class or
  a factory) and returning an object with ``encode_frames`` (``rewards.srpo``, ``vla_rl.srpo_encoders``).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Iterable

# name -> what it is for (the error message says it)
DIFFUSION_ADAPTER = {
    "encode_prompts": "prompts -> conditioning dict", "velocity": "(latents, sigma, cond) -> velocity [B, ...]",
    "decode": "latents -> images [B, 3, H, W] in [0, 1]", "latent_shape": "property: one sample's latent shape",
    "add_lora": "add trainable LoRA weights", "trainable_parameters": "the trained parameters",
    "trainable_state_dict": "checkpointed weights", "load_trainable_state_dict": "resume",
    "reference": "context manager: the frozen reference policy", "train": "train/eval mode",
}
REWARD = {"__call__": "batch -> RewardOutput with .total [B]"}
SRPO_ENCODER = {"encode_frames": "video [B, T, 3, H, W] in [0, 1] -> frame embeddings [B, T', F]"}
VLA_POLICY = {
    "sample_chunk": "rollout: observations -> an action chunk and its log-prob record",
    "chunk_log_prob": "update: observations + record -> log-probs of the stored chunk",
    "forward": "SFT: batch -> (loss, info)", "tokens_per_chunk": "log-prob tokens per decision point",
    "save_pretrained": "write the policy", "parameters": "the trained parameters (an nn.Module)",
}


def load_object(path: str, key: str) -> Any:
    """Import ``"package.module:attr"`` (``attr`` may be dotted); ``ValueError`` naming ``key`` when it cannot."""
    mod, sep, attr = path.partition(":")
    if not sep or not mod or not attr:
        raise ValueError(f"{key}: expected 'package.module:Name', got {path!r}")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as e:
        raise ValueError(f"{key}={path!r}: cannot import module {mod!r} ({e}); is its package on PYTHONPATH or "
                         f"installed?") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{key}={path!r}: module {mod!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def missing_members(obj: Any, protocol: dict[str, str]) -> list[str]:
    """The protocol's members ``obj`` (a class or an instance) lacks; ``__call__`` needs a callable."""
    out = []
    for name in protocol:
        if name == "__call__":
            # a class is always callable: for a class, ask whether its instances are
            if not callable(obj) or (inspect.isclass(obj)
                                     and not callable(getattr(obj, "__call__", None))):  # noqa: B004
                out.append(name)
            elif inspect.isclass(obj) and "__call__" not in {n for c in obj.__mro__[:-1] for n in vars(c)}:
                out.append(name)
        elif getattr(obj, name, None) is None:
            out.append(name)
    return out


def check_protocol(obj: Any, protocol: dict[str, str], key: str, path: str) -> Any:
    """``obj`` unchanged when it has every member of ``protocol``; else one ``ValueError`` listing what it lacks."""
    lacks = missing_members(obj, protocol)
    if lacks:
        what = "; ".join(f"{n} ({protocol[n]})" for n in lacks)
        raise ValueError(f"{key}={path!r}: {getattr(obj, '__name__', type(obj).__name__)} lacks {what}")
    return obj


def load_checked(path: str, protocol: dict[str, str], key: str, want_class: bool = False) -> Any:
    """:func:`load_object` + :func:`check_protocol` (+ that it is a class when ``want_class``)."""
    obj = load_object(path, key)
    if want_class and not inspect.isclass(obj):
        raise ValueError(f"{key}={path!r}: expected a class, got {type(obj).__name__}")
    return check_protocol(obj, protocol, key, path)


def resolve_srpo_encoder(path: str) -> Any:
    """``srpo.encoder: package.module:Name`` -> ``Name`` (a class or factory called as ``Name(srpo.encoder_path)``):
    imported, checked to be callable, and a class checked against :data:`SRPO_ENCODER` (a factory's product is checked
    when built, :func:`vla_rl.srpo_encoders.build_trajectory_encoder`); one ``ValueError`` naming the key otherwise."""
    obj = load_object(path, "srpo.encoder")
    if not callable(obj):
        raise ValueError(f"srpo.encoder={path!r}: expected a class or factory called as Name(encoder_path), got a "
                         f"{type(obj).__name__}")
    if inspect.isclass(obj):
        check_protocol(obj, SRPO_ENCODER, "srpo.encoder", path)
    return obj


def import_modules(modules: Iterable[str], key: str) -> None:
    """Import each module (a plugin registers itself on import); ``ValueError`` naming ``key`` for one that fails."""
    for m in modules:
        if not isinstance(m, str) or not m or ":" in m:
            raise ValueError(f"{key}: expected module names like 'my_pkg.tasks', got {m!r}")
        try:
            importlib.import_module(m)
        except ImportError as e:
            raise ValueError(f"{key}: cannot import {m!r} ({e}); is its package on PYTHONPATH or installed?") from e


def resolve_policy_class(kind: str) -> type | None:
    """``policy.kind`` -> a user's policy class when ``kind`` is an import path (``"my_pkg.policies:MyPolicy"``),
    checked against :data:`VLA_POLICY`; None for a built-in kind (``builtin``, ``lerobot``), which the policy factory
    handles. The hook the factory calls first; built as ``Cls(policy_cfg, tokenizer)`` like ``SmallVLA``."""
    if ":" not in kind:
        return None
    return load_checked(kind, VLA_POLICY, "policy.kind", want_class=True)
