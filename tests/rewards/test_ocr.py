"""OCR reward: rapidocr really reads text drawn with PIL's default font (offline: the wheel ships the models)."""

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

from rewards import RewardBatch, build_reward
from rewards.ocr import edit_distance, ocr_text_reward, quoted_target

pytest.importorskip("rapidocr_onnxruntime")


def draw(text: str, size=(256, 64), font_size=32) -> torch.Tensor:
    img = Image.new("RGB", size, (255, 255, 255))
    ImageDraw.Draw(img).text((10, 10), text, fill=(0, 0, 0), font=ImageFont.load_default(size=font_size))
    return torch.from_numpy(np.array(img)).permute(2, 0, 1).float() / 255


def test_text_math():
    assert edit_distance("kitten", "sitting") == 3 and edit_distance("", "abc") == 3 and edit_distance("ab", "ab") == 0
    assert quoted_target('a neon sign that says "Open Late", photo') == "Open Late"
    assert quoted_target("a poster reading \u201cGRPO\u201d") == "GRPO"
    with pytest.raises(ValueError, match="has no quoted target text"):
        quoted_target("a sign with no quotes")
    assert ocr_text_reward("OPEN late now", "open late") == (1.0, 0)  # substring: full reward
    assert ocr_text_reward("opem", "open") == (0.75, 1)
    assert ocr_text_reward("something much longer", "ab") == (0.0, 2)  # distance capped at |target|


def test_ocr_reads_drawn_text():
    r = build_reward("ocr")
    imgs = torch.stack([draw("Hello World"), draw("GRPO"), draw(""), draw("Hallo Warld")])
    prompts = ['a sign that says "hello world"', 'a card with "GRPO" on it', 'a sign "hello world"',
               'a sign "hello world"']
    out = r(RewardBatch(images=imgs, prompts=prompts))
    assert [t.replace(" ", "").lower() for t in r.last_texts[:2]] == ["helloworld", "grpo"]
    torch.testing.assert_close(out.total, torch.tensor([1.0, 1.0, 0.0, 0.8]))
    torch.testing.assert_close(out.details["ocr_edit_distance"], torch.tensor([0.0, 0.0, 10.0, 2.0]))
    with pytest.raises(ValueError, match="has no quoted target text"):
        r(RewardBatch(images=imgs[:1], prompts=["hello world"]))
