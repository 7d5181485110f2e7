"""MetricsLogger: JSONL scalars, and rollout videos that reach TensorBoard without moviepy."""

import imageio.v3 as iio
import numpy as np
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from grpo.metrics import MetricsLogger, read_jsonl


def test_scalars_images_and_videos_reach_jsonl_files_and_tensorboard(tmp_path):
    log = MetricsLogger(tmp_path)
    log.log(3, {"reward/mean": torch.tensor(0.5)})
    frames = torch.zeros(5, 3, 8, 12)
    for t in range(5):
        frames[t, t % 3, :, : 2 * (t + 1)] = 1.0  # a bar that grows, in a changing colour
    mp4 = log.log_video(7, "rollouts/final", frames, fps=5)
    log.close()
    assert read_jsonl(tmp_path / "metrics.jsonl")[0]["reward/mean"] == 0.5
    assert mp4.is_file() and iio.imread(mp4).shape[0] == 5
    ev = EventAccumulator(str(tmp_path / "tb"), size_guidance={"images": 0}).Reload()
    (img,) = ev.Images("rollouts/final")
    assert img.step == 7 and (img.height, img.width) == (8, 12)
    gif = iio.imread(img.encoded_image_string, extension=".gif")  # [T, H, W, C], animated
    assert gif.shape[:3] == (5, 8, 12)
    assert np.array_equal(gif[..., :3], (frames.permute(0, 2, 3, 1) * 255).to(torch.uint8).numpy())


def test_a_deferred_logger_writes_nothing_until_opened_or_first_logged(tmp_path):
    """defer=True (the trainers: a resume is checked first): no directory, file or tracker until open() or the first
    log call; open() twice opens once; a deferred logger closed unopened writes nothing."""
    out = tmp_path / "run"
    MetricsLogger(out, config={"seed": 0}, defer=True).close()
    assert not out.exists()
    log = MetricsLogger(out, config={"seed": 0}, defer=True)
    assert not out.exists()
    log.open()
    log.open()
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "run_info.json", "tb"]
    assert len(list((out / "tb").iterdir())) == 1
    log.close()
    lazy = MetricsLogger(tmp_path / "lazy", defer=True)
    lazy.log(1, {"x": 2.0})  # the first write opens it
    lazy.close()
    assert read_jsonl(tmp_path / "lazy" / "metrics.jsonl")[0]["x"] == 2.0
