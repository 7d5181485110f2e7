"""Prompt sources for training and evaluation: the built-in colors-and-shapes grammar, a file, or a list.

A prompt file is either plain text (one prompt per line; blank lines and ``#`` comments ignored) or JSON
(``.json``: a list of strings or of ``{"prompt": ..., ...}`` objects; ``.jsonl``: one such item per line).
An empty or malformed file fails at start with a message naming the file and line.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


@dataclass
class PromptConfig:
    """The YAML ``prompts:`` section."""

    source: Literal["shapes", "file", "list"] = "shapes"  # shapes (built-in sampler), file or list
    file: str | None = None  # a .txt (one per line), .json (a list) or .jsonl ({prompt: ...}) prompt file
    prompts: list[str] = field(default_factory=list)  # the prompts themselves (source: list)
    num_eval: int = 32  # evaluation prompts (fixed for the run)
    shapes: dict = field(default_factory=dict)  # keyword arguments of the shapes prompt sampler

    def __post_init__(self) -> None:
        if self.num_eval < 1:
            raise ValueError(f"prompts.num_eval must be >= 1 (the evaluation prompts), got {self.num_eval}")
        if self.num_eval > 100_000:  # (drawn when the config loads: a typo's 1e9 filled the memory in a dry run)
            raise ValueError(f"prompts.num_eval={self.num_eval}: expected at most 100000 evaluation prompts")
        if self.shapes:
            from grpo.preflight import check_kwargs
            from rewards import shapes

            check_kwargs("prompts.shapes", shapes.sample_prompts, self.shapes, passed=("n", "rng"))
            shapes.check_prompt_options(self.shapes)


def read_prompt_file(path: str | Path) -> list[str]:
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"prompts.file={str(path)!r} is a directory (expected a .txt/.json/.jsonl prompt file)")
    if p.exists() and not p.is_file():  # a FIFO / device (was: "does not exist")
        raise ValueError(f"prompts.file={str(path)!r} is not a regular file (expected a .txt/.json/.jsonl prompt file)")
    if not p.is_file():
        raise FileNotFoundError(f"prompts.file={str(path)!r} does not exist (expected a .txt/.json/.jsonl prompt file)")
    try:
        text = p.read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise ValueError(f"prompts.file={str(path)!r} is not UTF-8 text (byte {e.start}); expected a .txt/.json/.jsonl "
                         "prompt file") from None
    except OSError as e:
        raise ValueError(f"prompts.file={str(path)!r} cannot be read ({e.strerror})") from None
    out: list[str] = []
    if p.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: malformed JSON at line {e.lineno}: {e.msg}") from e
        if not isinstance(data, list):
            raise ValueError(f"{p}: expected a JSON list of prompts, got {type(data).__name__}")
        items = list(enumerate(data, 1))
    elif p.suffix == ".jsonl":
        items = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append((i, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{p}: malformed JSON on line {i}: {e.msg}") from e
    else:
        items = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1)
                 if line.strip() and not line.strip().startswith("#")]
    for i, item in items:
        if isinstance(item, dict):
            item = item.get("prompt")
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"{p}: item {i} is not a non-empty prompt string (got {item!r})")
        out.append(item.strip())
    if not out:
        raise ValueError(f"prompt file {p} holds no prompts")
    return out


class PromptSource:
    """``sample(n, rng) -> list[str]`` training prompts, and a fixed ``eval_prompts`` list."""

    def __init__(self, cfg: PromptConfig, seed: int = 0):
        self.cfg = cfg
        self._sampler = None
        self.pool: list[str] = []
        if cfg.source == "file":
            if not cfg.file:
                raise ValueError("prompts.source='file' needs prompts.file")
            self.pool = read_prompt_file(cfg.file)
        elif cfg.source == "list":
            self.pool = [p for p in cfg.prompts if p.strip()]
            if not self.pool:
                raise ValueError("prompts.source='list' needs a non-empty prompts.prompts")
        else:  # "shapes" (prompts.source is a Literal: the config loader rejects anything else)
            from rewards import shapes

            self._sampler = shapes
        self.eval_prompts = self.sample(cfg.num_eval, random.Random(seed + 12345))

    def sample(self, n: int, rng: random.Random) -> list[str]:
        if self._sampler is not None:
            return self._sampler.sample_prompts(n, rng=rng, **self.cfg.shapes)
        return [rng.choice(self.pool) for _ in range(n)]
