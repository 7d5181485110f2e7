"""HPSv2.1 (Wu et al. 2023, "Human Preference Score v2"): an open_clip ViT-H-14 fine-tuned on HPD v2::

    HPS_i = <e_img(x_i), e_txt(c_i)>       e: L2-normalized open_clip embeddings [B, 1024]

(the diagonal of ``image_features @ text_features.T`` in HPSv2's ``score``; no logit scale), typically 0.2-0.35.

``checkpoint`` is the user's local ``HPS_v2.1_compressed.pt`` (an open_clip state dict, optionally under
``"state_dict"``), loaded with ``torch.load(weights_only=True)``, converted to a ``transformers.CLIPModel``
by :mod:`rewards.open_clip_convert` (no open_clip, no torchvision) -- or a directory already converted with
:func:`convert_hps_checkpoint`. ``tokenizer`` is a local CLIP tokenizer directory (``vocab.json`` +
``merges.txt``, e.g. a snapshot of ``laion/CLIP-ViT-H-14-laion2B-s32B-b79K`` or ``openai/clip-vit-large-patch14``):
open_clip's BPE vocabulary is CLIP's. Preprocessing: open_clip's eval transform for ViT-H-14 (resize shortest
side 224 bicubic, center crop, OpenAI mean/std), in torch. Component ``hps``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .base import ImageReward, RewardOutput, resolve_dtype
from .clip_backbone import CLIP_MEAN, CLIP_STD, ClipEmbedder, load_tokenizer, require_path
from .open_clip_convert import clip_model_from_open_clip, unwrap_checkpoint


def load_open_clip_checkpoint(path: str | os.PathLike, reward: str = "hpsv2") -> dict[str, torch.Tensor]:
    """``torch.load(weights_only=True)`` of an open_clip checkpoint -> its state dict (clear errors)."""
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - unpickling errors have many types
        raise ValueError(f"reward {reward!r}: cannot load {str(path)!r} with torch.load(weights_only=True): {e}") from e
    return unwrap_checkpoint(obj, f"reward {reward!r}: {path}")


def build_hps_embedder(checkpoint, tokenizer, dtype=torch.float32, device="cpu", reward: str = "hpsv2",
                       **config_kwargs) -> ClipEmbedder:
    ck = require_path(checkpoint, reward, "the HPSv2.1 checkpoint HPS_v2.1_compressed.pt (or a directory converted "
                      "by rewards.hps.convert_hps_checkpoint)", "checkpoint")
    if ck.is_dir():
        return ClipEmbedder.from_pretrained(ck, reward, tokenizer, dtype, device)
    tp = require_path(tokenizer, reward, "a local CLIP tokenizer directory (vocab.json + merges.txt, e.g. a snapshot "
                      "of laion/CLIP-ViT-H-14-laion2B-s32B-b79K)", "tokenizer")
    tok = load_tokenizer(tp, reward)
    sd = load_open_clip_checkpoint(ck, reward)
    vocab = sd["token_embedding.weight"].shape[0] if "token_embedding.weight" in sd else None
    if vocab is not None and len(tok) > vocab:
        raise ValueError(f"reward {reward!r}: tokenizer in {str(tp)!r} has {len(tok)} tokens, the checkpoint's "
                         f"embedding only {vocab}; pass the tokenizer of the checkpoint's CLIP")
    config_kwargs.setdefault("eos_token_id", tok.eos_token_id)
    config_kwargs.setdefault("bos_token_id", tok.bos_token_id)
    if tok.pad_token_id is not None:
        config_kwargs.setdefault("pad_token_id", tok.pad_token_id)
    model = clip_model_from_open_clip(sd, **config_kwargs).to(device=device, dtype=dtype)
    return ClipEmbedder(model, tok, CLIP_MEAN, CLIP_STD)


def convert_hps_checkpoint(checkpoint: str, tokenizer: str, out_dir: str, **config_kwargs) -> Path:
    """Save the converted model + tokenizer as a ``transformers`` directory (loads faster next time)."""
    emb = build_hps_embedder(checkpoint, tokenizer, **config_kwargs)
    out = Path(out_dir)
    emb.model.save_pretrained(out)
    emb.tokenizer.save_pretrained(out)
    return out


class HPSv2Reward(ImageReward):
    name = "hpsv2"

    def __init__(self, checkpoint: str | None = None, tokenizer: str | None = None, dtype: str = "float32",
                 device: str = "cpu", nonfinite: str = "warn", **config_kwargs):
        self.clip = build_hps_embedder(checkpoint, tokenizer, resolve_dtype(dtype), device, self.name, **config_kwargs)
        self.nonfinite = nonfinite  # type: ignore[assignment]

    def score(self, images, prompts, metadata) -> RewardOutput:
        s = self.clip.cosine(images, prompts).to(images.device)
        return RewardOutput(total=s, components={"hps": s})
