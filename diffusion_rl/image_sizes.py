"""Which image sizes a model can take, known from its configs alone (checked when the config loads, before any
weight is read or any run directory written).

A denoiser sees the image as latent patches: the VAE divides each side by its spatial factor ``f`` (2^(blocks - 1)
for ``AutoencoderKL``, ``scale_factor_spatial`` for Wan's VAE, 8 for Qwen-Image's; 1 for a pixel-space model without
VAE) and the transformer groups ``p x p`` latents into one token (SD3's ``patch_size``; FLUX and Qwen-Image pack 2x2
latents; Wan's ``patch_size[1:]``). So every side must be a multiple of ``f * p``; SD3 also embeds at most
``pos_embed_max_size`` patches per side, so a side is at most ``pos_embed_max_size * f * p``. Wan's VAE also
compresses time by ``scale_factor_temporal`` (4): ``num_frames = 4 k + 1``.

The rule comes from, in this order: the tiny built-in models' builder arguments (``model.path: null``, ``model.tiny``);
a local diffusers directory's ``transformer/config.json`` and ``vae/config.json`` (also ``model.components`` of a
single-file checkpoint); the full-size architecture a hub id names (:mod:`diffusion_rl.architectures`). A model none
of these describes (a user's ``model.adapter``, an unknown hub id) is not checked here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"  # the shipped weights (builtin:<name>), as adapters.ASSETS
PACKED = ("flux", "flux_kontext", "qwenimage")  # families whose adapter packs 2x2 latents into one token
VIDEO = ("wan", "wan22")


@dataclass(frozen=True)
class SizeRule:
    """Image sides must be multiples of ``multiple`` and at most ``max_side`` (None: no bound); video frames
    ``temporal k + 1`` (``temporal`` 0: not a video model). ``source`` says where the numbers come from."""

    multiple: int
    max_side: int | None
    temporal: int
    source: str


def _tiny_rule(kind: str, tiny: dict) -> SizeRule:
    """The tiny built-ins of :mod:`diffusion_rl.tiny_models` (their VAEs: ``tiny_vae`` halves each side once; the Wan
    and Qwen-Image VAEs downsample 3 times, 8x)."""
    src = f"the tiny built-in {kind} model"
    if kind == "sd3":
        f = 2 if tiny.get("with_vae", True) else 1
        p = int(tiny.get("patch_size", 2))
        pos = max(16, int(tiny.get("sample_size", 16)))
        return SizeRule(f * p, pos * f * p, 0, f"{src} (VAE factor {f} x patch {p})")
    if kind in ("flux", "flux_kontext"):
        return SizeRule(4, None, 0, f"{src} (VAE factor 2 x 2x2 latent packing)")
    if kind == "qwenimage":
        return SizeRule(16, None, 0, f"{src} (VAE factor 8 x 2x2 latent packing)")
    return SizeRule(16, None, 4, f"{src} (VAE factor 8 x patch 2)")  # wan, wan22


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _vae_factor(vae: dict | None) -> int | None:
    if vae is None:
        return None
    if "block_out_channels" in vae:  # AutoencoderKL
        return 2 ** (len(vae["block_out_channels"]) - 1)
    if "scale_factor_spatial" in vae:  # AutoencoderKLWan
        return int(vae["scale_factor_spatial"])
    if "temperal_downsample" in vae:  # AutoencoderKLQwenImage (and older Wan configs)
        return 2 ** len(vae["temperal_downsample"])
    return None


def _dir_rule(kind: str, d: Path, where: str) -> SizeRule | None:
    """From a diffusers pipeline directory's component configs (None when they cannot be read)."""
    index = _read(d / "model_index.json")
    tr = _read(d / "transformer" / "config.json")
    if index is None or tr is None:
        return None
    if index.get("vae") in (None, [None, None]):
        f = 1  # a pixel-space model
    else:
        f = _vae_factor(_read(d / "vae" / "config.json"))
        if f is None:
            return None
    ps = tr.get("patch_size", 1)
    p = 2 if kind in PACKED else int(ps[-1] if isinstance(ps, (list, tuple)) else ps)
    pos = tr.get("pos_embed_max_size") if kind == "sd3" else None
    temporal = int((_read(d / "vae" / "config.json") or {}).get("scale_factor_temporal", 4)) if kind in VIDEO else 0
    return SizeRule(f * p, int(pos) * f * p if pos else None, temporal,
                    f"{where} (VAE factor {f} x {'2x2 latent packing' if kind in PACKED else f'patch {p}'})")


def size_rule(mc) -> SizeRule | None:
    """The :class:`SizeRule` of a ``ModelConfig``, or None when its configs do not say."""
    if mc.adapter:
        return None  # a user's adapter owns its model
    if mc.path is None:
        return _tiny_rule(mc.kind, dict(mc.tiny))
    from grpo.config import resolve_builtin

    from .checkpoints import is_single_file

    if is_single_file(mc.path):
        return _dir_rule(mc.kind, Path(mc.components).expanduser(),
                         f"model.components={mc.components!r}") if mc.components else None
    try:
        d = resolve_builtin(mc.path, ASSETS, "model.path")
    except FileNotFoundError:
        return None  # loading names the missing built-in
    if (d / "model_index.json").is_file():
        return _dir_rule(mc.kind, d, f"model.path={mc.path!r}")
    from .architectures import arch_for

    try:
        arch = arch_for(mc.path)
    except ValueError:
        return None
    ps = arch.transformer.get("patch_size", 1)
    p = 2 if arch.kind in PACKED else int(ps[-1] if isinstance(ps, (list, tuple)) else ps)
    pos = arch.transformer.get("pos_embed_max_size") if arch.kind == "sd3" else None
    return SizeRule(arch.latent_scale * p, pos * arch.latent_scale * p if pos else None, 4 if arch.kind in VIDEO else 0,
                    f"{arch.name} (VAE factor {arch.latent_scale} x "
                    f"{'2x2 latent packing' if arch.kind in PACKED else f'patch {p}'})")


MAX_FRAMES = 1025  # model.num_frames' largest value (4 k + 1 of a Wan VAE)


def check_image_size(mc) -> None:
    """``model.height`` / ``model.width`` (and ``model.num_frames`` of a video model) fit the model, else one
    ``ValueError`` naming the bad value, the nearest valid sizes and why."""
    for name in ("height", "width"):
        v = getattr(mc, name)
        if v < 1:
            raise ValueError(f"model.{name}={v}: expected >= 1")
    rule = size_rule(mc)
    if rule is None:
        return
    m = rule.multiple
    for name in ("height", "width"):
        v = getattr(mc, name)
        if v % m:
            lo, hi = max(m, v // m * m), (v // m + 1) * m
            near = f"{lo}" if lo == hi else f"{lo} or {hi}"
            raise ValueError(f"model.{name}={v} does not fit the model: image sides must be multiples of {m} "
                             f"(e.g. {near}) for {rule.source}")
        if rule.max_side is not None and v > rule.max_side:
            raise ValueError(f"model.{name}={v} is too large for the model: at most {rule.max_side} pixels per side "
                             f"(pos_embed_max_size patches) for {rule.source}")
    if rule.temporal and (mc.num_frames < 1 or (mc.num_frames - 1) % rule.temporal):
        raise ValueError(f"model.num_frames={mc.num_frames} does not fit the model: expected {rule.temporal} k + 1 "
                         f"frames (e.g. {rule.temporal + 1}, {2 * rule.temporal + 1}, {4 * rule.temporal + 1}) for "
                         f"{rule.source}")
    if rule.temporal and mc.num_frames > MAX_FRAMES:  # (1e9 + 1: a latent video of 2.5e8 frames, the memory at once)
        raise ValueError(f"model.num_frames={mc.num_frames}: expected at most {MAX_FRAMES} frames (Wan's clips have 81 "
                         f"to 121)")
