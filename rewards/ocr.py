"""OCR reward: does the image show the text quoted in the prompt? (Flow-GRPO, Liu et al. 2025, text rendering)::

    target_i = the first "quoted" span of prompt_i, spaces removed, lower case
    text_i   = concatenated OCR lines of image_i (detection + recognition), spaces removed, lower case
    d_i      = 0 if target_i is a substring of text_i else min(Levenshtein(text_i, target_i), |target_i|)
    r_i      = 1 - d_i / |target_i|    in [0, 1]

OCR is PP-OCRv4 detection + recognition through ``rapidocr-onnxruntime`` (its wheel ships the ONNX models,
so this runs offline; ``pip install 'branchloop[ocr]'``). Detection resizes the long side down to
``det_limit_side_len=960`` (``det_limit_type="max"``), PaddleOCR's default as used by Flow-GRPO; rapidocr's own
default (short side *up* to 736) is much slower on small images. Images ``[B, 3, H, W]`` in [0, 1] go to uint8 BGR on
the CPU, one OCR call per image. Component ``ocr``; detail ``ocr_edit_distance``; the recognized strings of
the last call are kept in ``last_texts`` for inspection.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from .base import ImageReward, RewardOutput

_QUOTED = re.compile(r'"([^"]+)"|\u201c([^\u201d]+)\u201d')


def quoted_target(prompt: str) -> str:
    """The first double-quoted (straight or curly) span of ``prompt``; ``ValueError`` when there is none."""
    m = _QUOTED.search(prompt)
    if m is None or not (m.group(1) or m.group(2)).strip():
        raise ValueError(f'OCR reward: prompt {prompt!r} has no quoted target text; expected e.g. '
                         f'\'a sign that says "OPEN"\'')
    return m.group(1) or m.group(2)


def normalize_text(s: str) -> str:
    return "".join(s.split()).lower()


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions of cost 1), O(|a| |b|)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def ocr_text_reward(recognized: str, target: str) -> tuple[float, int]:
    """``(reward, distance)`` of the module docstring for one recognized string and one target."""
    t, r = normalize_text(target), normalize_text(recognized)
    if not t:
        raise ValueError(f"OCR target {target!r} is empty after removing spaces")
    d = 0 if t in r else min(edit_distance(r, t), len(t))
    return 1.0 - d / len(t), d


class OCRReward(ImageReward):
    name = "ocr"

    def __init__(self, min_confidence: float = 0.0, text_score: float = 0.5, det_limit_side_len: int = 960,
                 det_limit_type: str = "max", threads: int = 1, nonfinite: str = "warn"):
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as e:
            raise ValueError("reward 'ocr' needs rapidocr-onnxruntime: pip install 'branchloop[ocr]' "
                             "(or pip install rapidocr-onnxruntime)") from e
        if not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
        kw = {f"{p}_{k}": threads for p in ("det", "cls", "rec")
              for k in ("intra_op_num_threads", "inter_op_num_threads")}
        if det_limit_type not in ("max", "min"):
            raise ValueError(f"det_limit_type must be 'max' or 'min', got {det_limit_type!r}")
        self.engine = RapidOCR(text_score=text_score, print_verbose=False, det_limit_side_len=det_limit_side_len,
                               det_limit_type=det_limit_type, **kw)
        self.min_confidence = float(min_confidence)
        self.last_texts: list[str] = []
        self.nonfinite = nonfinite  # type: ignore[assignment]

    def recognize(self, images: torch.Tensor) -> list[str]:
        """``[B, 3, H, W]`` in [0, 1] -> recognized text per image (lines joined in reading order)."""
        arr = (images.detach().float().clamp(0, 1).mul(255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy())
        texts = []
        for a in arr:
            result, _ = self.engine(np.ascontiguousarray(a[:, :, ::-1]), use_cls=False)  # RGB -> BGR
            texts.append("".join(str(line[1]) for line in (result or []) if float(line[2]) >= self.min_confidence))
        return texts

    def score(self, images, prompts, metadata) -> RewardOutput:
        targets = [quoted_target(p) for p in prompts]  # fail before the OCR work
        self.last_texts = self.recognize(images)
        rows = [ocr_text_reward(r, t) for r, t in zip(self.last_texts, targets)]
        r = torch.tensor([x[0] for x in rows], dtype=torch.float32, device=images.device)
        d = torch.tensor([float(x[1]) for x in rows], dtype=torch.float32, device=images.device)
        return RewardOutput(total=r, components={"ocr": r}, details={"ocr_edit_distance": d})
