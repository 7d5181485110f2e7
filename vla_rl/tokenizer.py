"""An offline word-level tokenizer for language instructions (no hub, no files).

The vocabulary is built in code: a fixed list of robot-manipulation words plus any words seen in the
instructions handed to :meth:`WordTokenizer.fit`. It is saved with the policy (a list of strings in the
checkpoint's JSON), so a loaded policy maps words to the same ids.

    tok = WordTokenizer.build(["push the red cube to the green target"])
    ids, mask = tok(["reach the red ball"], max_len=12)     # LongTensor [B, L], BoolTensor [B, L]

Id 0 is padding, id 1 is ``<unk>``.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

import torch

PAD, UNK = "<pad>", "<unk>"
BASE_WORDS = (
    "a an the to on in into onto of and then with from at by up down left right top bottom front back "
    "reach move push pull pick place put lift stack grasp open close drop touch slide go "
    "red green blue yellow black white orange purple gray grey pink brown "
    "cube block ball box object target goal marker bowl plate cup drawer table tabletop gripper arm "
    "small large big near far other first second"
).split()
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words of ``text``."""
    return _WORD.findall(text.lower())


class WordTokenizer:
    """Word -> id map; ``__call__`` pads/truncates a batch of strings to ``max_len`` ids."""

    def __init__(self, vocab: Sequence[str]):
        vocab = list(vocab)
        if vocab[:2] != [PAD, UNK]:
            raise ValueError(f"vocabulary must start with {[PAD, UNK]}, got {vocab[:2]}")
        if len(set(vocab)) != len(vocab):
            raise ValueError("vocabulary has duplicate words")
        self.vocab = vocab
        self.index = {w: i for i, w in enumerate(vocab)}

    @classmethod
    def build(cls, instructions: Iterable[str] = ()) -> "WordTokenizer":
        vocab = [PAD, UNK] + list(dict.fromkeys(BASE_WORDS))
        for text in instructions:
            for w in words(text):
                if w not in vocab:
                    vocab.append(w)
        return cls(vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.index.get(w, 1) for w in words(text)]

    def __call__(self, texts: Sequence[str], max_len: int = 16,
                 device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids[B, max_len] long, mask[B, max_len] bool)``, built on the CPU and returned on ``device``."""
        if isinstance(texts, str):
            raise TypeError("pass a list of instructions, not a single string")
        ids = torch.zeros(len(texts), max_len, dtype=torch.long, device="cpu")
        for i, t in enumerate(texts):
            enc = self.encode(t)[:max_len] or [1]
            ids[i, : len(enc)] = torch.tensor(enc, dtype=torch.long, device="cpu")
        ids = ids.to(device)
        return ids, ids > 0
