"""``run_info.json`` beside a run's ``metrics.jsonl``: the resolved config, seed, package versions and machine, written
when the run's logger starts (rank 0), so a report (:mod:`grpo.report`) or a reproduction months later knows what ran
where."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

PACKAGES = ("torch", "diffusers", "transformers", "numpy", "mujoco", "gymnasium", "branchloop")


def versions() -> dict[str, str]:
    """Installed versions of the packages a run depends on (absent ones omitted) and Python's."""
    out = {"python": sys.version.split()[0]}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


def machine() -> dict[str, Any]:
    """Host, OS, CPU count and the accelerator torch sees (if torch is imported)."""
    out: dict[str, Any] = {"host": platform.node(), "os": platform.platform(), "cpus": os.cpu_count(),
                           "processor": platform.processor() or platform.machine()}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["cuda"] = torch.cuda.is_available()
        if out["cuda"]:
            out["gpu"] = torch.cuda.get_device_name(0)
        out["torch_threads"] = torch.get_num_threads()
    return out


def write_run_info(logdir: str | Path, config: Mapping[str, Any]) -> Path:
    """Write ``logdir/run_info.json`` (``{"config", "seed", "versions", "machine", "started"}``); a resumed run
    overwrites it with the same config."""
    path = Path(logdir) / "run_info.json"
    info = {"config": dict(config), "seed": config.get("seed"), "versions": versions(), "machine": machine(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    path.write_text(json.dumps(info, indent=1, default=str))
    return path


def write_grid_captions(grid_png: str | Path, prompts: list[str], rewards: list[float], nrow: int) -> Path:
    """``<grid>.json`` beside an image grid: ``{"nrow", "cells": [{"prompt", "reward"}, ...]}`` in the grid's
    row-major cell order (what :func:`grpo.metrics.image_grid` tiles), read by the run report's captions."""
    path = Path(grid_png).with_suffix(".json")
    cells = [{"prompt": p, "reward": float(r)} for p, r in zip(prompts, rewards)]
    path.write_text(json.dumps({"nrow": nrow, "cells": cells}))
    return path
