"""Tiny, randomly initialised diffusers pipelines built from configs in code (no hub, no network).

They run the *same* code path as the full models (the adapters in :mod:`diffusion_rl.adapters` cannot
tell them apart): ``StableDiffusion3Pipeline`` (2 CLIP-with-projection + T5 + ``SD3Transformer2DModel``
+ ``AutoencoderKL``), ``FluxPipeline`` (CLIP + T5 + ``FluxTransformer2DModel`` + ``AutoencoderKL``) and
``WanPipeline`` (UMT5 + ``WanTransformer3DModel`` + ``AutoencoderKLWan``). ``pipe.save_pretrained(dir)``
writes a directory that ``Pipeline.from_pretrained(dir)`` (and :func:`diffusion_rl.adapters.build_adapter` with
``model.path``) loads back, which exercises the real loading path.

Tokenizers are ``PreTrainedTokenizerFast`` over a word-level vocabulary made in code (whitespace split,
lower-cased, ``</s>`` appended), so they save/load like any hub tokenizer.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch

SPECIAL = ["<pad>", "</s>", "<unk>"]
BASE_WORDS = (
    "a an the of and with on in left right above below next to red green blue yellow purple orange white black "
    "cyan magenta gray circle square triangle star cross ring small large big photo cat dog robot arm picks up "
    "cup"
).split()


def make_tokenizer(words: Iterable[str] = (), max_length: int = 16):
    """A word-level ``PreTrainedTokenizerFast``: ids 0/1/2 = pad/eos/unk, ``</s>`` appended to each text."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL)}
    for w in [*BASE_WORDS, *words]:
        w = w.lower()
        if w not in vocab:
            vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=max_length, padding_side="right")


def tiny_clip(vocab_size: int, hidden: int = 32, projection: int = 32, layers: int = 2, max_len: int = 16,
              with_projection: bool = True):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    cfg = CLIPTextConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers,
                         num_attention_heads=2, max_position_embeddings=max_len, projection_dim=projection,
                         pad_token_id=0, bos_token_id=1, eos_token_id=1, hidden_act="gelu")
    return (CLIPTextModelWithProjection if with_projection else CLIPTextModel)(cfg)


def tiny_t5(vocab_size: int, d_model: int = 32, layers: int = 1, umt5: bool = False):
    from transformers import T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel

    kw = dict(vocab_size=vocab_size, d_model=d_model, d_kv=8, d_ff=2 * d_model, num_layers=layers, num_heads=2,
              relative_attention_num_buckets=8, relative_attention_max_distance=16, pad_token_id=0, eos_token_id=1,
              decoder_start_token_id=0)
    return UMT5EncoderModel(UMT5Config(**kw)) if umt5 else T5EncoderModel(T5Config(**kw))


def tiny_vae(latent_channels: int = 4, channels: Sequence[int] = (16, 16), shift: float = 0.0, scale: float = 1.0):
    """A 2^(len(channels)-1)x downsampling ``AutoencoderKL``."""
    from diffusers import AutoencoderKL

    n = len(channels)
    return AutoencoderKL(in_channels=3, out_channels=3, latent_channels=latent_channels,
                         down_block_types=("DownEncoderBlock2D",) * n, up_block_types=("UpDecoderBlock2D",) * n,
                         block_out_channels=tuple(channels), layers_per_block=1, norm_num_groups=8, sample_size=32,
                         scaling_factor=scale, shift_factor=shift)


def tiny_sd3_heads(hidden: int) -> int:
    """Attention heads of :func:`tiny_sd3_pipeline`'s transformer of width ``hidden`` (16-wide heads, at least one)."""
    return max(1, hidden // 16)


def check_tiny_sd3_width(hidden: int, key: str = "hidden") -> None:
    """``hidden`` splits into :func:`tiny_sd3_heads` equal heads and is a multiple of 4 (the 2-D sin-cos position
    embedding), else one ``ValueError`` naming ``key``."""
    heads = tiny_sd3_heads(hidden)
    if hidden % 4 or hidden % heads:
        raise ValueError(f"{key}={hidden}: expected a multiple of 4 that splits into its {heads} attention heads "
                         "(hidden // 16 of them), e.g. 64 or 128")


def check_tiny_kwargs(kind: str, kwargs: dict, key: str = "model.tiny") -> None:
    """The values of a tiny builder's keyword arguments (``model.tiny``, their types already checked against the
    builder's defaults by :func:`grpo.preflight.check_kwargs`): a seed in [0, 2**32 - 1], every other integer a size
    >= 1 (layer counts at most 256, widths at most 8192), a float in (0, 1); else one ``ValueError`` naming
    ``key.name`` (was: a ZeroDivisionError from the builder, or a dry run that hung building 1e9 layers)."""
    import inspect

    defaults = {n: p.default for n, p in inspect.signature(TINY_BUILDERS[kind]).parameters.items()}
    for name, v in kwargs.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if name == "seed":
            if not 0 <= v <= 2**32 - 1:
                raise ValueError(f"{key}.seed={v}: expected an integer in [0, 4294967295]")
        elif isinstance(defaults.get(name), float):
            if not 0 < v < 1:
                raise ValueError(f"{key}.{name}={v}: expected a fraction in (0, 1)")
        else:
            hi = 256 if "layers" in name else 8192
            if not 1 <= v <= hi:
                raise ValueError(f"{key}.{name}={v}: expected an integer in [1, {hi}]")
    if kind == "sd3" and "hidden" in kwargs:
        check_tiny_sd3_width(kwargs["hidden"], f"{key}.hidden")


def tiny_sd3_pipeline(words: Iterable[str] = (), seed: int = 0, hidden: int = 32, layers: int = 2,
                      sample_size: int = 16,
                      latent_channels: int = 4, with_vae: bool = True, with_t5: bool = True, patch_size: int = 2,
                      max_length: int = 16, text_hidden: int = 32):
    """``StableDiffusion3Pipeline`` with tiny components. ``with_vae=False`` gives a pixel-space model
    (``in_channels=3``, ``pipe.vae is None``): the latents *are* the image in ``[-1, 1]``."""
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline

    torch.manual_seed(seed)
    tok = make_tokenizer(words, max_length)
    v = len(tok)
    check_tiny_sd3_width(hidden)
    heads = tiny_sd3_heads(hidden)
    in_ch = latent_channels if with_vae else 3
    transformer = SD3Transformer2DModel(
        sample_size=sample_size, patch_size=patch_size, in_channels=in_ch, out_channels=in_ch, num_layers=layers,
        attention_head_dim=hidden // heads, num_attention_heads=heads, joint_attention_dim=2 * text_hidden,
        caption_projection_dim=hidden, pooled_projection_dim=2 * text_hidden, pos_embed_max_size=max(16, sample_size))
    return StableDiffusion3Pipeline(
        transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0),
        vae=tiny_vae(latent_channels) if with_vae else None,
        text_encoder=tiny_clip(v, text_hidden, text_hidden, max_len=max_length), tokenizer=tok,
        text_encoder_2=tiny_clip(v, text_hidden, text_hidden, max_len=max_length),
        tokenizer_2=make_tokenizer(words, max_length),
        text_encoder_3=tiny_t5(v, 2 * text_hidden) if with_t5 else None,
        tokenizer_3=make_tokenizer(words, max_length) if with_t5 else None)


def tiny_flux_pipeline(words: Iterable[str] = (), seed: int = 0, hidden: int = 32, layers: int = 1,
                       single_layers: int = 1,
                       latent_channels: int = 4, max_length: int = 16):
    """``FluxPipeline`` with tiny components (latents packed 2x2 as in FLUX: ``in_channels = 4 * latent_channels``)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel

    torch.manual_seed(seed)
    tok = make_tokenizer(words, max_length)
    v = len(tok)
    heads = 2
    head_dim = hidden // heads  # rope axes must sum to head_dim
    axes = (head_dim - 2 * (head_dim // 4 // 2 * 2), head_dim // 4 // 2 * 2, head_dim // 4 // 2 * 2)
    transformer = FluxTransformer2DModel(patch_size=1, in_channels=4 * latent_channels, num_layers=layers,
                                         num_single_layers=single_layers, attention_head_dim=head_dim,
                                         num_attention_heads=heads, joint_attention_dim=32, pooled_projection_dim=32,
                                         axes_dims_rope=axes)
    return FluxPipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0),
                        vae=tiny_vae(latent_channels),
                        text_encoder=tiny_clip(v, 32, 32, max_len=max_length, with_projection=False),
                        tokenizer=tok, text_encoder_2=tiny_t5(v, 32), tokenizer_2=make_tokenizer(words, max_length))


def _tiny_wan_transformer(hidden: int, layers: int, z_dim: int):
    """A tiny ``WanTransformer3DModel`` (2 heads, patch 1x2x2), random weights from the current torch seed."""
    from diffusers import WanTransformer3DModel

    heads = 2
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=heads, attention_head_dim=hidden // heads,
                                 in_channels=z_dim, out_channels=z_dim, text_dim=32, freq_dim=32, ffn_dim=2 * hidden,
                                 num_layers=layers, rope_max_seq_len=64)


def _tiny_wan_vae(z_dim: int):
    """A tiny ``AutoencoderKLWan`` (4x temporal, 8x spatial compression as the real one), random weights."""
    from diffusers import AutoencoderKLWan

    return AutoencoderKLWan(base_dim=8, z_dim=z_dim, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                            temperal_downsample=[False, True, True], latents_mean=[0.0] * z_dim,
                            latents_std=[1.0] * z_dim)


def tiny_wan_pipeline(words: Iterable[str] = (), seed: int = 0, hidden: int = 32, layers: int = 1, z_dim: int = 4,
                      max_length: int = 16):
    """``WanPipeline`` with tiny components: UMT5 text encoder, ``WanTransformer3DModel``, ``AutoencoderKLWan``
    (4x temporal, 8x spatial compression as the real one)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline

    torch.manual_seed(seed)
    tok = make_tokenizer(words, max_length)
    transformer = _tiny_wan_transformer(hidden, layers, z_dim)
    vae = _tiny_wan_vae(z_dim)
    return WanPipeline(tokenizer=tok, text_encoder=tiny_t5(len(tok), 32, umt5=True), transformer=transformer, vae=vae,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0))


TINY_BUILDERS = {"sd3": tiny_sd3_pipeline, "flux": tiny_flux_pipeline, "wan": tiny_wan_pipeline}


def tiny_qwen25vl(vocab_size: int, hidden: int = 32, layers: int = 1):
    """A tiny ``Qwen2_5_VLForConditionalGeneration`` (Qwen-Image's text encoder; its vision tower is built, never used
    for text-to-image prompts). M-RoPE sections sum to half the head dim, as in the 7B model (16 + 24 + 24 = 64)."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    heads = 2
    half = hidden // heads // 2
    text = dict(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=1, max_position_embeddings=512,
                rope_scaling={"type": "mrope", "mrope_section": [half - 2 * (half // 3), half // 3, half // 3]},
                pad_token_id=0, eos_token_id=1, bos_token_id=1)
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=hidden, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[0])
    cfg = Qwen2_5_VLConfig(text_config=text, vision_config=vision, **text)
    return Qwen2_5_VLForConditionalGeneration(cfg)


def tiny_qwenimage_pipeline(words: Iterable[str] = (), seed: int = 0, hidden: int = 32, layers: int = 1, z_dim: int = 4,
                            max_length: int = 16):
    """``QwenImagePipeline`` with tiny components: Qwen2.5-VL text encoder, ``QwenImageTransformer2DModel`` (MM-DiT,
    2x2-packed latents: ``in_channels = 4 z``), ``AutoencoderKLQwenImage`` (Wan-style causal 3D VAE, 8x spatial)."""
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImagePipeline,
        QwenImageTransformer2DModel,
    )

    torch.manual_seed(seed)
    tok = make_tokenizer(words, max_length)
    heads = 2
    head_dim = hidden // heads
    q = head_dim // 4 // 2 * 2
    transformer = QwenImageTransformer2DModel(patch_size=2, in_channels=4 * z_dim, out_channels=z_dim,
                                              num_layers=layers,
                                              attention_head_dim=head_dim, num_attention_heads=heads,
                                              joint_attention_dim=32, axes_dims_rope=(head_dim - 2 * q, q, q))
    vae = AutoencoderKLQwenImage(base_dim=8, z_dim=z_dim, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                 temperal_downsample=[False, True, True], latents_mean=[0.0] * z_dim,
                                 latents_std=[1.0] * z_dim)
    return QwenImagePipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0), vae=vae,
                             text_encoder=tiny_qwen25vl(len(tok), 32), tokenizer=tok)


def tiny_wan22_pipeline(words: Iterable[str] = (), seed: int = 0, hidden: int = 32, layers: int = 1, z_dim: int = 4,
                        max_length: int = 16, two_experts: bool = True, boundary_ratio: float = 0.875):
    """Wan 2.2 as ``WanPipeline`` ships it. ``two_experts`` (the A14B layout): ``transformer`` denoises the high-noise
    steps ``t >= boundary_ratio * 1000``, ``transformer_2`` the rest (two independently initialised experts).
    Otherwise the TI2V-5B layout: one transformer with per-token timesteps (``expand_timesteps``)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline

    torch.manual_seed(seed)
    tok = make_tokenizer(words, max_length)

    def expert():
        return _tiny_wan_transformer(hidden, layers, z_dim)

    vae = _tiny_wan_vae(z_dim)
    return WanPipeline(tokenizer=tok, text_encoder=tiny_t5(len(tok), 32, umt5=True), transformer=expert(),
                       transformer_2=expert() if two_experts else None, vae=vae,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=1.0),
                       boundary_ratio=boundary_ratio if two_experts else None, expand_timesteps=not two_experts)


def tiny_flux_kontext_pipeline(words: Iterable[str] = (), seed: int = 0, **kw):
    """``FluxKontextPipeline`` around the tiny FLUX components (Kontext is FLUX.1's transformer, trained on
    sequences that append the reference image's packed latents)."""
    from diffusers import FluxKontextPipeline

    return FluxKontextPipeline(**tiny_flux_pipeline(words, seed, **kw).components)


TINY_BUILDERS.update({"qwenimage": tiny_qwenimage_pipeline, "wan22": tiny_wan22_pipeline,
                      "flux_kontext": tiny_flux_kontext_pipeline})
