"""PickScore (Kirstain et al. 2023, "Pick-a-Pic", Sec. 4): a CLIP-H fine-tuned on human preferences::

    s_i = exp(t) * <e_img(x_i), e_txt(c_i)>      t: the model's learned logit scale; e: normalized [B, D]

Raw scores sit around 20-23; as Flow-GRPO (Liu et al. 2025) the reward is ``s / 26`` (``normalize=26``).
``model`` is a local snapshot of ``yuvalkirstain/PickScore_v1`` (a ``transformers`` CLIPModel); that repository
has no tokenizer, so ``processor`` is a local snapshot of ``laion/CLIP-ViT-H-14-laion2B-s32B-b79K`` (its
tokenizer and ``preprocessor_config.json``), unless ``model`` holds them. Component ``pickscore``;
detail ``pickscore_raw``.
"""

from __future__ import annotations

from .base import ImageReward, RewardOutput, resolve_dtype
from .clip_backbone import ClipEmbedder


class PickScoreReward(ImageReward):
    name = "pickscore"

    def __init__(self, model: str | None = None, processor: str | None = None, normalize: float = 26.0,
                 dtype: str = "float32", device: str = "cpu", nonfinite: str = "warn"):
        if normalize <= 0:
            raise ValueError(f"normalize must be > 0, got {normalize}")
        self.clip = ClipEmbedder.from_pretrained(
            model, self.name, processor, resolve_dtype(dtype), device,
            model_hint="a local snapshot of yuvalkirstain/PickScore_v1 (transformers CLIPModel)")
        self.normalize = float(normalize)
        self.nonfinite = nonfinite  # type: ignore[assignment]

    def score(self, images, prompts, metadata) -> RewardOutput:
        raw = (self.clip.logit_scale * self.clip.cosine(images, prompts)).to(images.device)
        s = raw / self.normalize
        return RewardOutput(total=s, components={"pickscore": s}, details={"pickscore_raw": raw})
