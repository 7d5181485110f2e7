"""``policy.kind`` + ``policy.type`` -> the policy class (LeRobot's ``make_policy`` pattern,
``lerobot/policies/factory.py``).

    kind: builtin   type: small_vla (or empty)        vla_rl.policy.SmallVLA
    kind: lerobot   type: smolvla | pi0 | pi05        vla_rl.policies.lerobot.LeRobotVLA around LeRobot's policy class

Where the weights come from, first match wins: ``pretrained`` (``sft.base_policy`` / ``sft.init_policy``), then
``policy.path`` (a LeRobot checkpoint directory: a downloaded ``lerobot/smolvla_base`` or a vla-rl run's
``policy/``), else a fresh policy (LeRobot: built from ``policy.lerobot`` overrides of its config; the value
``vlm_model_name: tiny`` writes a tiny random SmolVLM into ``workdir/tiny_smolvlm``, :mod:`.tiny_backbones`, sized by
``policy.lerobot.tiny: {hidden, layers, image_size, patch_size}``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Iterable

from ..policy import POLICY_KINDS, PolicyConfig, check_kind_type  # noqa: F401  (POLICY_KINDS re-exported)
from .base import TrainablePolicy, check_policy


def make_policy(cfg: PolicyConfig, instructions: Iterable[str] = (), pretrained: str | None = None,
                workdir: str | Path = ".", vocabulary: list[str] | None = None) -> TrainablePolicy:
    """The policy ``cfg`` describes (module docstring); ``cfg.state_dim`` / ``action_dim`` must be resolved.
    ``vocabulary``: a trainer checkpoint's (:func:`~vla_rl.policies.base.policy_vocabulary`), for a policy that is
    then given the checkpoint's weights (a word-tokenizer policy's embedding is sized by it)."""
    instructions = list(instructions)
    check_kind_type(cfg.kind, cfg.type)
    if cfg.kind == "builtin":
        from .builtin import build_builtin

        return check_policy(build_builtin(cfg, instructions, pretrained, vocabulary))
    if ":" in cfg.kind:  # a user's class (docs/EXTENDING.md): built like the built-in one, (cfg, tokenizer)
        from grpo.plugins import resolve_policy_class

        from ..tokenizer import WordTokenizer

        cls = resolve_policy_class(cfg.kind)
        if pretrained:
            return check_policy(cls.from_pretrained(pretrained, cfg))
        tok = WordTokenizer(vocabulary) if vocabulary is not None else WordTokenizer.build(instructions)
        return check_policy(cls(cfg, tok))
    from .lerobot import LeRobotVLA, lerobot_classes

    lerobot_classes(cfg.type)  # this environment can build the type (one line if not), before anything is written
    path = pretrained or cfg.path
    if path:
        return check_policy(LeRobotVLA.from_pretrained(path, cfg))
    overrides = copy.deepcopy(dict(cfg.lerobot))
    tiny = overrides.pop("tiny", {})  # the tiny backbone's sizes: hidden, layers, image_size, patch_size
    if cfg.type == "smolvla" and overrides.get("vlm_model_name") == "tiny":
        from .tiny_backbones import write_tiny_smolvlm

        tiny = {"image_size": cfg.image_size, **tiny}
        overrides["vlm_model_name"] = str(write_tiny_smolvlm(Path(workdir).resolve() / "tiny_smolvlm", instructions,
                                                             **tiny).resolve())
        overrides.setdefault("num_vlm_layers", int(tiny.get("layers", 2)))
        overrides.setdefault("load_vlm_weights", False)
        # a tiny backbone has no pretrained padding convention: pad state / action to the env's own dims
        overrides.setdefault("max_state_dim", cfg.state_dim)
        overrides.setdefault("max_action_dim", cfg.action_dim)
    if cfg.type in ("pi0", "pi05") and overrides.get("paligemma_variant") == "tiny_vlm":
        # a toy pi0 / pi0.5 (lerobot_tiny_pi): a local tokenizer
        from .lerobot_tiny_pi import local_tokenizer

        with local_tokenizer(workdir, instructions):
            policy = LeRobotVLA.build(cfg, overrides)
        policy.tokenizer_dir = str(workdir)
        return check_policy(policy)
    return check_policy(LeRobotVLA.build(cfg, overrides))


def policy_class(cfg: PolicyConfig) -> type:
    """The class ``policy.kind`` names without building it: the built-in ``SmallVLA``, a user's ``module:Class``, or
    LeRobot's wrapper ``LeRobotVLA`` (needs LeRobot installed)."""
    check_kind_type(cfg.kind, cfg.type)
    if cfg.kind == "builtin":
        from ..policy import SmallVLA

        return SmallVLA
    if ":" in cfg.kind:
        from grpo.plugins import resolve_policy_class

        return resolve_policy_class(cfg.kind)
    from .lerobot import LeRobotVLA

    return LeRobotVLA


def load_policy(path: str | Path, cfg: PolicyConfig | None = None) -> TrainablePolicy:
    """A saved policy of either kind: a LeRobot layout (``config.json`` with a LeRobot ``type``) or the built-in one."""
    p = Path(path)
    conf = p / "config.json"
    if conf.is_file() and json.loads(conf.read_text()).get("type") in POLICY_KINDS["lerobot"]:
        from .lerobot import LeRobotVLA

        return check_policy(LeRobotVLA.from_pretrained(p, cfg))
    from ..policy import SmallVLA

    return check_policy(SmallVLA.from_pretrained(path, cfg))


# the public base checkpoints' sizes (pi0 / pi0.5: counted from lerobot 0.4.4's PI0Policy / PI05Policy at their
# default gemma_2b + gemma_300m variants on the meta device, tied embeddings once)
BASE_SIZES = {
    "smolvla": "smolvla_base: ~450 M parameters, ~1.8 GB fp32 weights",
    "pi0": "pi0_base: 3.50 B parameters (PaliGemma 2.92 B + action expert 0.58 B), ~14 GB fp32 weights",
    "pi05": "pi05_base: 3.62 B parameters (PaliGemma 2.92 B + action expert 0.69 B), ~14.5 GB fp32 weights",
}


def checkpoint_memory(cfg: PolicyConfig, kl_reference: bool = False) -> str:
    """A ``--dry-run`` line: parameters of the checkpoint at ``policy.path`` read from its ``model.safetensors``
    header (no weights loaded) and the training memory they imply -- fp32 weights ``4 P`` bytes, gradients and
    AdamW moments ``12 T`` for the ``T`` trainable ones (LeRobot's ``train_expert_only`` freezes the VLM: SmolVLA's
    ``.vlm.``, pi0 / pi0.5's ``.paligemma.`` modules; its default is LeRobot's, on for SmolVLA, off for pi), a frozen
    KL reference copy ``4 P`` -- activations excluded."""
    import struct

    if cfg.kind != "lerobot":
        return ""
    if not cfg.path:
        return "memory: a fresh policy built from policy.lerobot (random weights; sized when built)"
    st = Path(cfg.path) / "model.safetensors"
    if not st.is_file():
        return (f"memory: policy.path={cfg.path!r} has no model.safetensors here; download the checkpoint to size it "
                f"({BASE_SIZES.get(cfg.type, 'its size is read from model.safetensors')})")
    with open(st, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    sizes = {k: int(__import__("math").prod(v["shape"])) for k, v in header.items() if k != "__metadata__"}
    total = sum(sizes.values())
    expert_only = bool(dict(cfg.lerobot).get("train_expert_only", cfg.type == "smolvla"))  # LeRobot's defaults
    vlm = ".vlm." if cfg.type == "smolvla" else ".paligemma."  # the VLM's modules in the state dict's keys
    trainable = sum(v for k, v in sizes.items() if not (expert_only and vlm in k))
    gb = (4 * total + 12 * trainable + (4 * total if kl_reference else 0)) / 1e9
    return (f"memory: {total / 1e6:.1f} M parameters ({trainable / 1e6:.1f} M trained), ~{gb:.2f} GB for weights, "
            "gradients and AdamW state (fp32; activations extra)")
