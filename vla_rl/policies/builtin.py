"""The built-in small VLA (:class:`vla_rl.policy.SmallVLA`) as one :class:`~vla_rl.policies.base.TrainablePolicy`.

``policy.kind: builtin`` (the default). A fresh policy gets a word tokenizer built from the tasks' instructions (or a
trainer checkpoint's ``vocabulary``, whose weights it is then given); a pretrained one (a ``save_pretrained`` directory
or ``builtin:<name>``) brings its weights, vocabulary and state normalization.
"""

from __future__ import annotations

from typing import Iterable

from ..policy import PolicyConfig, SmallVLA
from ..tokenizer import WordTokenizer


def build_builtin(cfg: PolicyConfig | None, instructions: Iterable[str], pretrained: str | None = None,
                  vocabulary: list[str] | None = None) -> SmallVLA:
    if pretrained:
        return SmallVLA.from_pretrained(pretrained, cfg)
    return SmallVLA(cfg, WordTokenizer(vocabulary) if vocabulary is not None else WordTokenizer.build(instructions))
