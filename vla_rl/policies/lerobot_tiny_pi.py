"""Toy-size pi0 / pi0.5 for CPU tests: LeRobot's own PI0 / PI05 model code at a few hundred units wide (no hub).

lerobot 0.4.4 builds pi0 / pi0.5 only at full size and only with the openpi-patched transformers (the
``transformers-openpi==4.53.3`` registry package; ``make lerobot-pi``). Three things in its code fix the size:

1. ``PI0Config`` / ``PI05Config.__post_init__`` accept only ``paligemma_variant`` / ``action_expert_variant`` in
   ``{gemma_300m, gemma_2b}``, and ``modeling_pi0(5).get_gemma_config`` knows only those two;
2. ``PaliGemmaWithExpertModel.__init__`` builds PaliGemma's default SigLIP vision tower (So400m-sized: 1152 wide, 27
   layers) with a projector to ``projection_dim = 2048`` (the gemma_2b width the image tokens are concatenated with);
3. the preprocessor loads the tokenizer ``google/paligemma-3b-pt-224`` from the hub.

:func:`install` registers two more variant names, ``tiny_vlm`` and ``tiny_expert`` (:data:`TINY_VARIANTS`: 8 heads
of 8 dims, since lerobot's joint attention reshapes to ``8 * head_dim``, one layer, 64 / 32 wide), and only for them:
the config check sees ``gemma_300m`` while the name is kept, ``get_gemma_config`` returns the tiny sizes, and the
PaliGemma that LeRobot's ``__init__`` builds for the tiny width gets a one-layer SigLIP (:data:`TINY_VISION`) and a
projector to that width (its config is adjusted just before ``PaliGemmaForConditionalGeneration`` is built). The
full-size names and every other code path are untouched (the patches fall through to LeRobot's functions). The
PaliGemma tokenizer's hub id is replaced by a local word-level tokenizer
(:func:`vla_rl.policies.tiny_backbones.write_tiny_smolvlm`'s) while :func:`local_tokenizer` is active; the saved
processors then name that folder, so LeRobot's ``make_pre_post_processors(pretrained_path=...)`` reloads them as
they are. A tiny checkpoint loads with LeRobot's ``PI0Policy.from_pretrained`` in a process where :func:`install`
ran (the variant names are ours); the vocabulary (257152 rows) is LeRobot's, so of the 24.8 M parameters 16.5 M are
PaliGemma's embedding and 8.2 M the expert's (unused) output head.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

TINY_VARIANTS = {
    "tiny_vlm": {"width": 64, "depth": 1, "mlp_dim": 128, "num_heads": 8, "num_kv_heads": 1, "head_dim": 8},
    "tiny_expert": {"width": 32, "depth": 1, "mlp_dim": 64, "num_heads": 8, "num_kv_heads": 1, "head_dim": 8},
}
TINY_VISION = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
PALIGEMMA_TOKENIZER = "google/paligemma-3b-pt-224"
# pi0.5 puts the state in its prompt (lerobot's Pi05PrepareStateTokenizerProcessorStep): "Task: <instruction>, State:
# <256-bin indices of the normalized state>;\nAction: ". The local tokenizer knows these words and the 256 bin numbers,
# so a tiny pi0.5 sees its state (punctuation maps to <unk>).
PI05_PROMPT_WORDS = ["task", "state", "action"] + [str(i) for i in range(256)]
_installed = False
_tokenizer_path: str | None = None


def _is_tiny(width: int, depth: int) -> bool:
    v = TINY_VARIANTS["tiny_vlm"]
    return width == v["width"] and depth == v["depth"]


def _patch(modeling, config_cls) -> None:
    orig_get, orig_post, orig_paligemma = (modeling.get_gemma_config, config_cls.__post_init__,
                                           modeling.PaliGemmaForConditionalGeneration)

    def get_gemma_config(variant: str):
        return modeling.GemmaConfig(**TINY_VARIANTS[variant]) if variant in TINY_VARIANTS else orig_get(variant)

    def post_init(self) -> None:
        names = (self.paligemma_variant, self.action_expert_variant)
        self.paligemma_variant, self.action_expert_variant = ["gemma_300m" if n in TINY_VARIANTS else n for n in names]
        try:
            orig_post(self)
        finally:
            self.paligemma_variant, self.action_expert_variant = names

    def paligemma(config):  # the name lerobot's PaliGemmaWithExpertModel.__init__ builds its VLM with
        text = config.text_config
        if _is_tiny(text.hidden_size, text.num_hidden_layers):  # a one-layer SigLIP projecting to the tiny width
            for k, v in TINY_VISION.items():
                setattr(config.vision_config, k, v)
            config.vision_config.projection_dim = text.hidden_size
        return orig_paligemma(config=config)

    modeling.get_gemma_config = get_gemma_config
    config_cls.__post_init__ = post_init
    modeling.PaliGemmaForConditionalGeneration = paligemma


def install() -> None:
    """Register the tiny variants with lerobot's pi0 and pi0.5 (module docstring); idempotent."""
    global _installed
    if _installed:
        return
    import lerobot.policies.pi0.modeling_pi0 as m0
    import lerobot.policies.pi05.modeling_pi05 as m05
    from lerobot.policies.pi0.configuration_pi0 import PI0Config
    from lerobot.policies.pi05.configuration_pi05 import PI05Config
    from lerobot.processor.tokenizer_processor import TokenizerProcessorStep

    _patch(m0, PI0Config)
    _patch(m05, PI05Config)
    orig = TokenizerProcessorStep.__post_init__

    def tok_post_init(self) -> None:
        if self.tokenizer is None and self.tokenizer_name == PALIGEMMA_TOKENIZER and _tokenizer_path is not None:
            self.tokenizer_name = _tokenizer_path
        orig(self)

    TokenizerProcessorStep.__post_init__ = tok_post_init
    _installed = True


@contextlib.contextmanager
def local_tokenizer(workdir: str | Path, words=()) -> Iterator[str]:
    """Within it, pi processors built by LeRobot's factory load a local word-level tokenizer (written to
    ``workdir/tiny_tokenizer``: the words of ``words``, vla-rl's base words and :data:`PI05_PROMPT_WORDS`; a folder
    that holds one already is kept) instead of ``google/paligemma-3b-pt-224``; yields its path."""
    global _tokenizer_path
    from .tiny_backbones import write_tiny_smolvlm

    install()
    path = str(write_tiny_smolvlm(Path(workdir).resolve() / "tiny_tokenizer", [*words, *PI05_PROMPT_WORDS]).resolve())
    before, _tokenizer_path = _tokenizer_path, path
    try:
        yield path
    finally:
        _tokenizer_path = before
