"""CLIP plumbing shared by the CLIP-based rewards: local loading, torch preprocessing, embeddings.

Preprocessing is CLIP's eval transform done in torch on the images' device (Radford et al. 2021)::

    x [B, 3, H, W] in [0, 1] -> resize shortest side to S (bicubic, antialiased) -> center crop S x S
      -> (x - mean) / std  -> [B, 3, S, S]

with ``S = vision_config.image_size`` and mean/std from the checkpoint's ``preprocessor_config.json``
(CLIP's defaults otherwise). Embeddings are L2-normalized projections::

    e_img = norm(W_v . ViT(x)[CLS]) [B, D],   e_txt = norm(W_t . TextTransformer(tokens)[EOT]) [B, D]

Weights come only from local paths (``local_files_only=True``); a missing path fails at construction with the
reward's name, the bad path and what the directory should hold.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def require_path(path: str | os.PathLike | None, reward: str, what: str, kwarg: str) -> Path:
    """``path`` as a ``Path`` that exists, or a ``ValueError`` naming the reward, the kwarg and what it should be."""
    if path is None or str(path) == "":
        raise ValueError(f"reward {reward!r} needs {what}: pass {kwarg}=<local path> "
                         f"(weights are never downloaded at run time)")
    p = Path(os.path.expanduser(str(path)))
    if not p.exists():
        raise ValueError(f"reward {reward!r}: {kwarg}={str(path)!r} does not exist; expected {what}")
    return p


def clip_preprocess(images: torch.Tensor, size: int, mean=CLIP_MEAN, std=CLIP_STD) -> torch.Tensor:
    """``[B, 3, H, W]`` in [0, 1] -> CLIP input ``[B, 3, size, size]`` (float32, same device)."""
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(f"clip_preprocess expects [B, 3, H, W] in [0, 1], got shape {tuple(images.shape)}")
    x = images.float()
    h, w = x.shape[-2:]
    scale = size / min(h, w)
    nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
    if (nh, nw) != (h, w):
        x = F.interpolate(x, size=(nh, nw), mode="bicubic", align_corners=False, antialias=True)
    top, left = (nh - size) // 2, (nw - size) // 2
    x = x[:, :, top:top + size, left:left + size].clamp(0, 1)
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - m) / s


def read_mean_std(*dirs: Path | None) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``image_mean``/``image_std`` from the first ``preprocessor_config.json`` found, else CLIP's."""
    for d in dirs:
        if d is not None and d.is_dir() and (d / "preprocessor_config.json").exists():
            cfg = json.loads((d / "preprocessor_config.json").read_text())
            if "image_mean" in cfg and "image_std" in cfg:
                return tuple(cfg["image_mean"]), tuple(cfg["image_std"])
    return CLIP_MEAN, CLIP_STD


def dtype_kwarg(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """``from_pretrained``'s dtype argument: ``dtype=`` since transformers 4.56, ``torch_dtype=`` before."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def load_tokenizer(path: Path, reward: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(f"reward {reward!r}: no CLIP tokenizer in {str(path)!r} (expected vocab.json + merges.txt "
                         f"or tokenizer.json): {e}") from e


class ClipEmbedder(torch.nn.Module):
    """A ``transformers.CLIPModel`` + tokenizer + preprocessing; ``embed_images``/``embed_texts`` -> ``[B, D]``."""

    def __init__(self, model, tokenizer, mean=CLIP_MEAN, std=CLIP_STD):
        super().__init__()
        self.model = model.eval().requires_grad_(False)
        self.tokenizer = tokenizer
        self.mean, self.std = tuple(mean), tuple(std)
        self.image_size = int(model.config.vision_config.image_size)
        self.max_length = int(model.config.text_config.max_position_embeddings)

    @classmethod
    def from_pretrained(cls, model_path: str | os.PathLike | None, reward: str, tokenizer_path=None,
                        dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                        model_hint: str = "a local transformers CLIPModel directory (config.json + weights)"):
        from transformers import CLIPModel

        mp = require_path(model_path, reward, model_hint, "model")
        tp = require_path(tokenizer_path, reward, "a local CLIP tokenizer directory", "processor") \
            if tokenizer_path is not None else mp
        try:
            model = CLIPModel.from_pretrained(str(mp), local_files_only=True, **dtype_kwarg(dtype))
        except (OSError, ValueError) as e:
            raise ValueError(f"reward {reward!r}: cannot load a CLIPModel from {str(mp)!r}: {e}") from e
        mean, std = read_mean_std(tp, mp)
        return cls(model.to(device), load_tokenizer(tp, reward), mean, std)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @torch.no_grad()
    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        """``[B, 3, H, W]`` in [0, 1] -> normalized image embeddings ``[B, D]`` float32."""
        x = clip_preprocess(images.to(self.device), self.image_size, self.mean, self.std).to(self.dtype)
        e = self.model.get_image_features(pixel_values=x).float()
        return e / e.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def embed_texts(self, prompts: list[str]) -> torch.Tensor:
        """``B`` prompts -> normalized text embeddings ``[B, D]`` float32 (truncated to the context length).

        Each distinct prompt is encoded once (a GRPO group repeats its prompt ``G`` times)."""
        uniq = list(dict.fromkeys(prompts))
        index = torch.tensor([uniq.index(p) for p in prompts], device=self.device)
        tok: dict[str, Any] = self.tokenizer(uniq, padding=True, truncation=True, max_length=self.max_length,
                                             return_tensors="pt")
        tok = {k: v.to(self.device) for k, v in tok.items() if k in ("input_ids", "attention_mask")}
        e = self.model.get_text_features(**tok).float()
        return (e / e.norm(dim=-1, keepdim=True).clamp_min(1e-12))[index]

    @torch.no_grad()
    def cosine(self, images: torch.Tensor, prompts: list[str]) -> torch.Tensor:
        """Per-pair cosine similarity ``[B]`` of image ``i`` and prompt ``i``."""
        return (self.embed_images(images) * self.embed_texts(prompts)).sum(-1)

    @property
    def logit_scale(self) -> float:
        return float(self.model.logit_scale.exp())
