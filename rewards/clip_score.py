"""CLIP score: image-text alignment of a CLIP model (CLIPScore, Hessel et al. 2021, Eq. 1)::

    cos_i = <e_img(x_i), e_txt(c_i)>          e: L2-normalized CLIP embeddings [B, D]
    CLIPScore_i = w * max(cos_i, 0)           w = 2.5 (the paper's rescaling)

``model`` is a local ``transformers`` CLIP directory (e.g. a snapshot of ``openai/clip-vit-large-patch14``);
``processor`` a tokenizer directory when the model directory has none. Component ``clip_score``; detail
``clip_cosine``. Runs in ``torch.no_grad()``, eval mode, ``dtype`` of your choice, on ``device``.
"""

from __future__ import annotations

from .base import ImageReward, RewardOutput, resolve_dtype
from .clip_backbone import ClipEmbedder


class ClipScoreReward(ImageReward):
    name = "clip_score"

    def __init__(self, model: str | None = None, processor: str | None = None, weight: float = 2.5,
                 dtype: str = "float32", device: str = "cpu", nonfinite: str = "warn"):
        self.clip = ClipEmbedder.from_pretrained(
            model, self.name, processor, resolve_dtype(dtype), device,
            model_hint="a local transformers CLIPModel directory (e.g. a snapshot of openai/clip-vit-large-patch14)")
        self.weight = float(weight)
        self.nonfinite = nonfinite  # type: ignore[assignment]

    def score(self, images, prompts, metadata) -> RewardOutput:
        cos = self.clip.cosine(images, prompts).to(images.device)
        s = self.weight * cos.clamp_min(0)
        return RewardOutput(total=s, components={"clip_score": s}, details={"clip_cosine": cos})
