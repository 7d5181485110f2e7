"""Metrics to a JSON-lines file (one object per ``log`` call) and to the trackers of ``log.backends``, rank 0 only.

``metrics.jsonl`` is the machine-readable record (tests and benchmarks read it); the trackers (:mod:`grpo.trackers`:
TensorBoard by default, W&B, MLflow, trackio) get the same scalars plus image grids and videos.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Mapping

import torch

from .trackers import LogConfig, open_trackers


def image_grid(images: torch.Tensor, nrow: int | None = None, pad: int = 1) -> torch.Tensor:
    """Tile ``[B, C, H, W]`` images in ``[0, 1]`` into one ``[C, H', W']`` grid."""
    if images.dim() != 4:
        raise ValueError(f"images must be [B, C, H, W], got {tuple(images.shape)}")
    b, c, h, w = images.shape
    nrow = nrow or math.ceil(math.sqrt(b))
    ncol = math.ceil(b / nrow)
    grid = torch.ones(c, ncol * (h + pad) + pad, nrow * (w + pad) + pad, dtype=images.dtype)
    for i in range(b):
        r, col = divmod(i, nrow)
        grid[:, pad + r * (h + pad): pad + r * (h + pad) + h,
             pad + col * (w + pad): pad + col * (w + pad) + w] = images[i].cpu()
    return grid


def _drop_cut_row(path: Path) -> None:
    """A run killed mid-write leaves ``metrics.jsonl`` ending in a cut row; a resumed run would append its rows to
    it, corrupting one line: cut the file back to its last complete row."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":  # the usual case: one byte read, not the whole file
            return
        f.seek(0)
        f.truncate(f.read().rfind(b"\n") + 1)


class MetricsLogger:
    """Write scalars/images/videos under ``logdir``; a no-op on non-main ranks (``enabled=False``)."""

    def __init__(self, logdir: str | Path, enabled: bool = True, tensorboard: bool = True,
                 config: Mapping | None = None,
                 log: LogConfig | None = None, resume: bool = True, defer: bool = False):
        """``log``: the job's ``log:`` section (default: TensorBoard only); ``tensorboard=False`` drops TensorBoard
        from it. ``resume``: continue the tracker runs saved in ``logdir/trackers.json`` (the job's ``resume``).
        ``defer``: write nothing yet; :meth:`open` (or the first ``log*`` call) opens the files and the trackers, so
        that a trainer checks the checkpoint it resumes from before anything is written."""
        self.logdir = Path(logdir)
        self.enabled = enabled
        self.trackers: list = []
        self._jsonl = None
        self._t0 = time.time()
        self._pending: tuple | None = None  # (log, config, resume) until opened
        if not enabled:
            return
        log = log or LogConfig()
        if not tensorboard and "tensorboard" in log.backends:
            log = dataclasses.replace(log, backends=[b for b in log.backends if b != "tensorboard"])
        self._pending = (log, config, resume)
        if not defer:
            self.open()

    def open(self) -> None:
        """Create ``logdir``, start the trackers, open ``metrics.jsonl`` and write the run info (once; nothing on a
        disabled or opened logger)."""
        if self._pending is None:
            return
        (log, config, resume), self._pending = self._pending, None
        self._t0 = time.time()
        created = self.logdir  # the top-most directory made here (None: logdir was there)
        while not created.exists() and created.parent != created and not created.parent.exists():
            created = created.parent
        created = None if created.exists() else created
        self.logdir.mkdir(parents=True, exist_ok=True)
        try:  # first: a tracker that cannot start (no login, a bad tracking URI) leaves no run directory behind
            self.trackers = open_trackers(self.logdir, log, config, resume)
        except BaseException:
            if created is not None:
                shutil.rmtree(created, ignore_errors=True)
            raise
        _drop_cut_row(self.logdir / "metrics.jsonl")
        self._jsonl = open(self.logdir / "metrics.jsonl", "a")
        if config is not None:  # the resolved config, seed, versions and machine beside the metrics (grpo.runinfo)
            from .runinfo import write_run_info

            write_run_info(self.logdir, config)

    def log(self, step: int, scalars: Mapping[str, float | torch.Tensor]) -> None:
        if not self.enabled:
            return
        self.open()
        values = {k: float(v.detach().float().mean()) if isinstance(v, torch.Tensor) else float(v)
                  for k, v in scalars.items()}
        row = {"step": step, "time": round(time.time() - self._t0, 3), **values}
        assert self._jsonl is not None
        self._jsonl.write(json.dumps(row) + "\n")
        self._jsonl.flush()
        for tr in self.trackers:
            tr.log_scalars(step, values)

    def log_images(self, step: int, tag: str, images: torch.Tensor, nrow: int | None = None,
                   captions: list[str] | None = None, min_tile: int = 256) -> Path | None:
        """Log ``[B, 3, H, W]`` images in ``[0, 1]`` as one grid; also saved as ``images/<tag>_<step>.png``. With
        ``captions`` (one per image) the tiles are upscaled to >= ``min_tile`` px and captioned (grpo.captions)."""
        if not self.enabled:
            return None
        self.open()
        import imageio.v3 as iio

        if captions is not None:
            from .captions import captioned_grid

            grid = captioned_grid(images, list(captions), nrow, min_tile)
        else:
            grid = image_grid(images.detach().float().clamp(0, 1), nrow)
        out = self.logdir / "images" / f"{tag.replace('/', '_')}_{step:06d}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        arr = (grid.permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
        iio.imwrite(out, arr)
        for tr in self.trackers:
            tr.log_image(step, tag, arr, out)
        return out

    def log_video(self, step: int, tag: str, frames: torch.Tensor, fps: int = 10) -> Path | None:
        """Log a ``[T, 3, H, W]`` video in ``[0, 1]``; saved as ``videos/<tag>_<step>.mp4``, which W&B, MLflow and
        trackio get; TensorBoard gets an animated GIF (what ``SummaryWriter.add_video`` writes, without moviepy)."""
        if not self.enabled:
            return None
        self.open()
        import imageio.v3 as iio

        out = self.logdir / "videos" / f"{tag.replace('/', '_')}_{step:06d}.mp4"
        out.parent.mkdir(parents=True, exist_ok=True)
        arr = (frames.detach().float().clamp(0, 1).permute(0, 2, 3, 1) * 255).round().to(torch.uint8).cpu().numpy()
        iio.imwrite(out, arr, fps=fps, codec="libx264", macro_block_size=1)
        for tr in self.trackers:
            tr.log_video(step, tag, arr, out, fps)
        return out

    def close(self) -> None:
        """Finish every tracker run (each is closed once; a second ``close`` does nothing)."""
        trackers, self.trackers, self._pending = self.trackers, [], None  # (a deferred logger never opened: nothing)
        for tr in trackers:
            tr.close()
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def read_jsonl(path: str | Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
