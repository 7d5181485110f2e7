"""Tiny, randomly initialized VLM backbones for LeRobot's SmolVLA, written to a local folder (no hub).

LeRobot's SmolVLA reads its VLM through ``transformers`` from ``vlm_model_name`` (``AutoConfig``, ``AutoProcessor``,
``AutoTokenizer``). With ``load_vlm_weights=False`` only the config, tokenizer and processor files are read, so a
folder holding a SmolVLM config a few hundred parameters wide plus a word-level tokenizer is a complete backbone:
the architecture (SigLIP-style vision tower, pixel-shuffle connector, Llama text model, SmolVLA's action expert)
is LeRobot's own, only its widths and depths are CPU-sized. Tests and the CPU recipe build SmolVLA from it; a real
run points ``policy.path`` at a downloaded checkpoint (or ``vlm_model_name`` at SmolVLM2-500M) instead.

    write_tiny_smolvlm("runs/x/tiny_smolvlm", words=["reach", "the", "red", "ball"])   # -> the folder
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..tokenizer import BASE_WORDS, words as split_words

# the special tokens SmolVLMProcessor looks up on its tokenizer (transformers' processing_smolvlm)
SPECIAL_TOKENS = ["<pad>", "<unk>", "<|im_start|>", "<end_of_utterance>", "<image>", "<fake_token_around_image>",
                  "<global-img>", "<video>"]


def tiny_smolvlm_config(vocab_size: int, hidden: int = 32, layers: int = 2, image_size: int = 32,
                        patch_size: int = 8) -> dict:
    """A SmolVLM ``config.json`` (``model_type: smolvlm``) with a ``hidden``-wide, ``layers``-deep Llama text model
    and a one-layer vision tower over ``image_size / patch_size`` squared patches (pixel shuffle x2: 4 image tokens
    for the defaults)."""
    return {
        "model_type": "smolvlm", "architectures": ["SmolVLMForConditionalGeneration"], "scale_factor": 2,
        "image_token_id": SPECIAL_TOKENS.index("<image>"), "pad_token_id": 0, "tie_word_embeddings": False,
        "vision_config": {"model_type": "smolvlm_vision", "hidden_size": hidden, "intermediate_size": 2 * hidden,
                          "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": image_size,
                          "patch_size": patch_size},
        "text_config": {"model_type": "llama", "vocab_size": vocab_size, "hidden_size": hidden,
                        "intermediate_size": 2 * hidden, "num_hidden_layers": layers, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "head_dim": hidden // 4, "max_position_embeddings": 512,
                        "rms_norm_eps": 1e-5, "pad_token_id": 0, "tie_word_embeddings": False},
    }


def write_tiny_smolvlm(path: str | Path, words: Iterable[str] = (), hidden: int = 32, layers: int = 2,
                       image_size: int = 32, patch_size: int = 8) -> Path:
    """Write a tiny SmolVLM (config, word-level tokenizer over ``BASE_WORDS`` + ``words``, processor) to ``path``.

    A folder that already holds one is kept as it is (a resumed or evaluated run keeps its vocabulary)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    path = Path(path)
    if (path / "config.json").is_file() and (path / "tokenizer.json").is_file():
        return path
    path.mkdir(parents=True, exist_ok=True)
    vocab = list(SPECIAL_TOKENS)
    for w in list(BASE_WORDS) + [x for text in words for x in split_words(text)]:
        if w not in vocab:
            vocab.append(w)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                   additional_special_tokens=SPECIAL_TOKENS[2:],
                                   extra_special_tokens={"image_token": "<image>",
                                                         "fake_image_token": "<fake_token_around_image>",
                                                         "global_image_token": "<global-img>", "video_token": "<video>",
                                                         "end_of_utterance_token": "<end_of_utterance>"})
    fast.save_pretrained(str(path))
    (path / "config.json").write_text(
        json.dumps(tiny_smolvlm_config(len(vocab), hidden, layers, image_size, patch_size), indent=1))
    (path / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "SmolVLMImageProcessor", "processor_class": "SmolVLMProcessor",
        "do_resize": True, "size": {"longest_edge": image_size}, "do_image_splitting": False,
        "max_image_size": {"longest_edge": image_size}, "do_rescale": True, "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}, indent=1))
    (path / "processor_config.json").write_text(json.dumps({"processor_class": "SmolVLMProcessor",
                                                            "image_seq_len": (image_size // patch_size // 2) ** 2}))
    return path
