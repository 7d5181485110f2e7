"""Full-size architectures of the supported model families, as configs written in code (no hub access).

Each :class:`Arch` holds the diffusers denoiser config, the text encoders' transformers configs and the VAE config of
one released checkpoint, restated from the checkpoints' published ``config.json`` files (diffusers layout), plus the
parameter count its authors publish. :func:`build_meta` instantiates any component on the ``meta`` device (shapes
only, no memory), which is what :mod:`diffusion_rl.plan` counts and traces.

Depth is parameterised (``depth(counts)``) so the planner can trace a few blocks at full width and extrapolate
linearly in the number of blocks of each type (every block of a type is the same computation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

# --- text encoders (transformers classes) --------------------------------------------------------------------------
CLIP_L = ("CLIPTextModelWithProjection", "CLIPTextConfig",
          dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
               max_position_embeddings=77, projection_dim=768, hidden_act="quick_gelu"))
CLIP_L_PLAIN = ("CLIPTextModel", *CLIP_L[1:])
CLIP_G = ("CLIPTextModelWithProjection", "CLIPTextConfig",
          dict(vocab_size=49408, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20,
               max_position_embeddings=77, projection_dim=1280, hidden_act="gelu"))
_T5_XXL = dict(d_model=4096, d_kv=64, d_ff=10240, num_layers=24, num_heads=64, feed_forward_proj="gated-gelu",
               relative_attention_num_buckets=32)
T5_XXL = ("T5EncoderModel", "T5Config", dict(vocab_size=32128, **_T5_XXL))
UMT5_XXL = ("UMT5EncoderModel", "UMT5Config", dict(vocab_size=256384, **_T5_XXL))

# --- VAEs (diffusers classes) --------------------------------------------------------------------------------------
VAE_16CH = ("AutoencoderKL", dict(in_channels=3, out_channels=3, latent_channels=16,
                                  down_block_types=("DownEncoderBlock2D",) * 4,
                                  up_block_types=("UpDecoderBlock2D",) * 4,
                                  block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32,
                                  use_quant_conv=False, use_post_quant_conv=False, scaling_factor=1.5305,
                                  shift_factor=0.0609))
VAE_WAN21 = ("AutoencoderKLWan", dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                                      temperal_downsample=[False, True, True]))
# Wan 2.2's 16x-spatial VAE (TI2V-5B): residual blocks, 2x2 pixel patchify (12 channels in/out), 48 latent channels.
# The 48 per-channel latent mean/std are not restated here (they scale latents; nothing counted or traced uses them)
VAE_WAN22 = ("AutoencoderKLWan", dict(base_dim=160, decoder_base_dim=256, z_dim=48, dim_mult=[1, 2, 4, 4],
                                      num_res_blocks=2,
                                      temperal_downsample=[False, True, True], is_residual=True, in_channels=12,
                                      out_channels=12, patch_size=2, scale_factor_spatial=16, scale_factor_temporal=4,
                                      latents_mean=[0.0] * 48, latents_std=[1.0] * 48))
VAE_QWEN_IMAGE = ("AutoencoderKLQwenImage", dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                                                 temperal_downsample=[False, True, True]))
# Qwen-Image's text encoder: Qwen2.5-VL-7B-Instruct (the language model's last hidden state; the vision tower is part
# of the checkpoint the pipeline loads)
QWEN25_VL_7B = ("Qwen2_5_VLForConditionalGeneration", "Qwen2_5_VLConfig",
                dict(text_config=dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944,
                                      num_hidden_layers=28,
                                      num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000,
                                      rope_theta=1e6, rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
                                      tie_word_embeddings=False),
                     vision_config=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16,
                                        out_hidden_size=3584, patch_size=14, spatial_merge_size=2,
                                        temporal_patch_size=2,
                                        window_size=112, fullatt_block_indexes=[7, 15, 23, 31]),
                     vocab_size=152064, hidden_size=3584, tie_word_embeddings=False))


@dataclass(frozen=True)
class Arch:
    """One released model: its denoiser (diffusers class + config), text encoders, VAE and published size."""

    name: str
    kind: str  # sd3 | flux | wan: the adapter family
    transformer: dict  # full config of the diffusers denoiser class (diffusion_rl.checkpoints.TRANSFORMER_CLASSES)
    full_depth: tuple[int, ...]  # block counts per block type, at full size
    depth: Callable[[tuple[int, ...]], dict]  # block counts -> config overrides
    text_encoders: dict[str, tuple]  # pipeline component -> (transformers model class, config class, kwargs)
    vae: tuple  # (diffusers class, kwargs)
    published_params: float  # the denoiser's parameter count as published (billions)
    published_source: str
    hub_ids: tuple[str, ...] = ()
    block_names: tuple[str, ...] = ()  # what each entry of full_depth counts
    notes: str = ""
    text_tokens: dict[str, int] = field(default_factory=dict)  # fixed token counts of the text side (CLIP: 77)
    experts: int = 1  # denoisers of this size held at once (Wan 2.2 A14B: 2, one per noise range; one runs per call)
    latent_scale: int = 8  # VAE spatial compression (Wan 2.2 TI2V-5B: 16)
    pipeline_config: dict = field(default_factory=dict)  # pipeline-level config (Wan 2.2:
                                                         # boundary_ratio, expand_timesteps)

    def config(self, counts: tuple[int, ...] | None = None) -> dict:
        return {**self.transformer, **self.depth(counts or self.full_depth)}


def _sd3_depth(dual_layers_at_full: int):
    def depth(c):
        if len(c) == 1:
            return {"num_layers": c[0], "dual_attention_layers": ()}
        dual, plain = c
        return {"num_layers": dual + plain, "dual_attention_layers": tuple(range(dual))}
    return depth


# the transformer config keys every FLUX.1 [dev]-shaped model shares (FLUX.1-dev, FLUX.1-Kontext-dev: the same
# FluxTransformer2DModel), and the keys every Wan2.x DiT shares (heads, width, depth and latent channels per model)
_FLUX_DEV = dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=True,
                 axes_dims_rope=(16, 56, 56))
_WAN_COMMON = dict(patch_size=(1, 2, 2), attention_head_dim=128, text_dim=4096, freq_dim=256, cross_attn_norm=True,
                   qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024)
_SD3_COMMON = dict(sample_size=128, patch_size=2, in_channels=16, out_channels=16, attention_head_dim=64,
                   joint_attention_dim=4096, pooled_projection_dim=2048, qk_norm="rms_norm")

ARCHS: dict[str, Arch] = {
    "sd3.5-medium": Arch(
        "sd3.5-medium", "sd3",
        dict(_SD3_COMMON, num_layers=24, num_attention_heads=24, caption_projection_dim=1536, pos_embed_max_size=384,
             dual_attention_layers=tuple(range(13))),
        (13, 11), _sd3_depth(13), {"text_encoder": CLIP_L, "text_encoder_2": CLIP_G, "text_encoder_3": T5_XXL},
        VAE_16CH, 2.5, "Stability AI, SD3.5 Medium model card: '2.5 billion parameters' (MMDiT-X)",
        ("stabilityai/stable-diffusion-3.5-medium",), ("MMDiT-X blocks (dual attention)", "MMDiT blocks"),
        text_tokens={"clip": 77}),
    "sd3.5-large": Arch(
        "sd3.5-large", "sd3",
        dict(_SD3_COMMON, num_layers=38, num_attention_heads=38, caption_projection_dim=2432, pos_embed_max_size=192),
        (38,), _sd3_depth(0), {"text_encoder": CLIP_L, "text_encoder_2": CLIP_G, "text_encoder_3": T5_XXL},
        VAE_16CH, 8.1, "Stability AI, SD3.5 Large model card: '8.1 billion parameters'",
        ("stabilityai/stable-diffusion-3.5-large",), ("MMDiT blocks",), text_tokens={"clip": 77}),
    "flux.1-dev": Arch(
        "flux.1-dev", "flux",
        dict(_FLUX_DEV),
        (19, 38), lambda c: {"num_layers": c[0], "num_single_layers": c[1]},
        {"text_encoder": CLIP_L_PLAIN, "text_encoder_2": T5_XXL}, VAE_16CH, 12.0,
        "Black Forest Labs, FLUX.1 [dev] model card: '12 billion parameter rectified flow transformer'",
        ("black-forest-labs/FLUX.1-dev",), ("double-stream blocks", "single-stream blocks")),
    "wan2.1-t2v-1.3b": Arch(
        "wan2.1-t2v-1.3b", "wan",
        dict(_WAN_COMMON, num_attention_heads=12, in_channels=16, out_channels=16, ffn_dim=8960, num_layers=30),
        (30,), lambda c: {"num_layers": c[0]}, {"text_encoder": UMT5_XXL}, VAE_WAN21, 1.3,
        "Wan-AI, Wan2.1 report / model card: T2V-1.3B", ("Wan-AI/Wan2.1-T2V-1.3B-Diffusers",), ("DiT blocks",)),
    "wan2.1-t2v-14b": Arch(
        "wan2.1-t2v-14b", "wan",
        dict(_WAN_COMMON, num_attention_heads=40, in_channels=16, out_channels=16, ffn_dim=13824, num_layers=40),
        (40,), lambda c: {"num_layers": c[0]}, {"text_encoder": UMT5_XXL}, VAE_WAN21, 14.0,
        "Wan-AI, Wan2.1 report / model card: T2V-14B", ("Wan-AI/Wan2.1-T2V-14B-Diffusers",), ("DiT blocks",)),
    "qwen-image": Arch(
        "qwen-image", "qwenimage",
        dict(patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128,
             num_attention_heads=24,
             joint_attention_dim=3584, guidance_embeds=False, axes_dims_rope=(16, 56, 56)),
        (60,), lambda c: {"num_layers": c[0]}, {"text_encoder": QWEN25_VL_7B}, VAE_QWEN_IMAGE, 20.0,
        "Qwen team, Qwen-Image technical report / model card: '20B MMDiT image foundation model'", ("Qwen/Qwen-Image",),
        ("MM-DiT blocks",)),
    "wan2.2-t2v-a14b": Arch(
        "wan2.2-t2v-a14b", "wan22",
        dict(_WAN_COMMON, num_attention_heads=40, in_channels=16, out_channels=16, ffn_dim=13824, num_layers=40),
        (40,), lambda c: {"num_layers": c[0]}, {"text_encoder": UMT5_XXL}, VAE_WAN21, 14.0,
        "Wan-AI, Wan2.2 model card: T2V-A14B, a MoE of two 14B experts (27B total, 14B active per step)",
        ("Wan-AI/Wan2.2-T2V-A14B-Diffusers",), ("DiT blocks (per expert)",), experts=2,
        pipeline_config={"boundary_ratio": 0.875}),
    "wan2.2-ti2v-5b": Arch(
        "wan2.2-ti2v-5b", "wan22",
        dict(_WAN_COMMON, num_attention_heads=24, in_channels=48, out_channels=48, ffn_dim=14336, num_layers=30),
        (30,), lambda c: {"num_layers": c[0]}, {"text_encoder": UMT5_XXL}, VAE_WAN22, 5.0,
        "Wan-AI, Wan2.2 model card: TI2V-5B (dense 5B, Wan2.2-VAE 16x16x4 compression)",
        ("Wan-AI/Wan2.2-TI2V-5B-Diffusers",), ("DiT blocks",), latent_scale=16,
        pipeline_config={"expand_timesteps": True}),
    "flux.1-kontext-dev": Arch(
        "flux.1-kontext-dev", "flux_kontext",
        dict(_FLUX_DEV),
        (19, 38), lambda c: {"num_layers": c[0], "num_single_layers": c[1]},
        {"text_encoder": CLIP_L_PLAIN, "text_encoder_2": T5_XXL}, VAE_16CH, 12.0,
        "Black Forest Labs, FLUX.1 Kontext [dev] model card: '12 billion parameter rectified flow transformer'",
        ("black-forest-labs/FLUX.1-Kontext-dev",), ("double-stream blocks", "single-stream blocks")),
}


def arch_for(path: str | None, name: str | None = None) -> Arch:
    """The architecture named ``name``, else the one whose hub id or name appears in ``model.path``."""
    if name:
        if name not in ARCHS:
            raise ValueError(f"--arch {name!r}: unknown architecture; expected one of {sorted(ARCHS)}")
        return ARCHS[name]
    p = (path or "").lower()
    for a in ARCHS.values():
        if any(h.lower() in p for h in a.hub_ids):
            return a
    compact = p.replace("_", "").replace("-", "").replace(".", "")
    for key, a in (("sd35medium", "sd3.5-medium"), ("sd35large", "sd3.5-large"), ("flux1dev", "flux.1-dev"),
                   ("wan21t2v13b", "wan2.1-t2v-1.3b"), ("wan21t2v14b", "wan2.1-t2v-14b"),
                   ("qwenimage", "qwen-image"), ("wan22t2va14b", "wan2.2-t2v-a14b"), ("wan22ti2v5b", "wan2.2-ti2v-5b"),
                   ("flux1kontextdev", "flux.1-kontext-dev")):
        if key in compact:
            return ARCHS[a]
    raise ValueError(f"model.path={path!r} names no known full-size architecture; pass --arch with one of "
                     f"{sorted(ARCHS)}")


def build_meta(spec: tuple, dtype: torch.dtype = torch.bfloat16) -> torch.nn.Module:
    """A text encoder ``(model class, config class, kwargs)`` or VAE ``(class, kwargs)`` on the meta device."""
    if len(spec) == 3:
        import transformers

        model_cls, cfg_cls, kw = spec
        cfg = getattr(transformers, cfg_cls)(**kw)
        with torch.device("meta"):
            return getattr(transformers, model_cls)(cfg).to(dtype)
    import diffusers

    cls, kw = spec
    with torch.device("meta"):
        return getattr(diffusers, cls)(**kw).to(dtype)


def build_meta_transformer(arch: Arch, counts: tuple[int, ...] | None = None, dtype: torch.dtype = torch.bfloat16):
    import diffusers

    from .checkpoints import TRANSFORMER_CLASSES

    with torch.device("meta"):
        return getattr(diffusers, TRANSFORMER_CLASSES[arch.kind])(**arch.config(counts)).to(dtype)


def count_params(m: torch.nn.Module, trainable: bool | None = None) -> int:
    return sum(p.numel() for p in m.parameters() if trainable is None or p.requires_grad == trainable)
