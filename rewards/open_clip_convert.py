"""Convert open_clip ViT CLIP state dicts to ``transformers.CLIPModel`` ones (and back), without open_clip.

open_clip (Ilharco et al. 2021) and the OpenAI CLIP code store the same network as ``transformers.CLIPModel``
under other names, with fused attention projections and right-multiplied output projections:

=========================================================  ==========================================================
open_clip                                                   transformers CLIPModel
=========================================================  ==========================================================
``token_embedding.weight`` [V, Dt]                          ``text_model.embeddings.token_embedding.weight``
``positional_embedding`` [L, Dt]                            ``text_model.embeddings.position_embedding.weight``
``transformer.resblocks.i.attn.in_proj_weight`` [3D, D]     ``...layers.i.self_attn.{q,k,v}_proj.weight`` (3 x [D, D])
``transformer.resblocks.i.attn.in_proj_bias`` [3D]          ``...layers.i.self_attn.{q,k,v}_proj.bias``
``transformer.resblocks.i.attn.out_proj.*``                 ``...layers.i.self_attn.out_proj.*``
``transformer.resblocks.i.ln_1.* / ln_2.*``                 ``...layers.i.layer_norm1.* / layer_norm2.*``
``transformer.resblocks.i.mlp.c_fc.* / c_proj.*``           ``...layers.i.mlp.fc1.* / fc2.*``
``ln_final.*``                                              ``text_model.final_layer_norm.*``
``text_projection`` [Dt, E] (x @ P)                         ``text_projection.weight`` [E, Dt] = P^T
``visual.class_embedding`` [Dv]                             ``vision_model.embeddings.class_embedding``
``visual.positional_embedding`` [1 + N, Dv]                 ``vision_model.embeddings.position_embedding.weight``
``visual.conv1.weight`` [Dv, 3, p, p]                       ``vision_model.embeddings.patch_embedding.weight``
``visual.ln_pre.* / visual.ln_post.*``                      ``vision_model.pre_layrnorm.* / post_layernorm.*``
``visual.transformer.resblocks.i.*``                        ``vision_model.encoder.layers.i.*`` (as the text tower)
``visual.proj`` [Dv, E] (x @ P)                             ``visual_projection.weight`` [E, Dv] = P^T
``logit_scale``                                             ``logit_scale``
=========================================================  ==========================================================

Both towers pool the same way (vision: the class token after ``ln_post``; text: the EOT token, the largest id,
after ``ln_final``), use LayerNorm eps 1e-5 and a causal text mask, so the converted model computes the same
function. :func:`clip_config_from_open_clip` reads the sizes from the tensor shapes; head counts cannot be read
from shapes and follow open_clip's model configs (vision: 16 heads for widths >= 1024, 12 for 768, else
width / 64; text: width / 64) unless given. ViT-H-14 (HPSv2.1) uses GELU, not QuickGELU.
"""

from __future__ import annotations

import re
from typing import Any

import torch

_BLOCK = {  # open_clip resblock suffix -> HF encoder-layer suffix (in_proj handled apart)
    "ln_1.weight": "layer_norm1.weight", "ln_1.bias": "layer_norm1.bias",
    "ln_2.weight": "layer_norm2.weight", "ln_2.bias": "layer_norm2.bias",
    "attn.out_proj.weight": "self_attn.out_proj.weight", "attn.out_proj.bias": "self_attn.out_proj.bias",
    "mlp.c_fc.weight": "mlp.fc1.weight", "mlp.c_fc.bias": "mlp.fc1.bias",
    "mlp.c_proj.weight": "mlp.fc2.weight", "mlp.c_proj.bias": "mlp.fc2.bias",
}
_TOP = {  # open_clip -> HF, copied as is
    "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
    "positional_embedding": "text_model.embeddings.position_embedding.weight",
    "ln_final.weight": "text_model.final_layer_norm.weight", "ln_final.bias": "text_model.final_layer_norm.bias",
    "visual.class_embedding": "vision_model.embeddings.class_embedding",
    "visual.positional_embedding": "vision_model.embeddings.position_embedding.weight",
    "visual.conv1.weight": "vision_model.embeddings.patch_embedding.weight",
    "visual.ln_pre.weight": "vision_model.pre_layrnorm.weight", "visual.ln_pre.bias": "vision_model.pre_layrnorm.bias",
    "visual.ln_post.weight": "vision_model.post_layernorm.weight",
    "visual.ln_post.bias": "vision_model.post_layernorm.bias",
    "logit_scale": "logit_scale",
}
_TRANSPOSED = {"text_projection": "text_projection.weight", "visual.proj": "visual_projection.weight"}
_TOWERS = {"transformer.resblocks.": "text_model.encoder.layers.",
           "visual.transformer.resblocks.": "vision_model.encoder.layers."}
_IGNORED = ("attn_mask", "visual.attn_mask", "text_model.embeddings.position_ids",
            "vision_model.embeddings.position_ids")


def unwrap_checkpoint(obj: Any, source: str = "checkpoint") -> dict[str, torch.Tensor]:
    """A state dict from a loaded checkpoint: ``{"state_dict": sd}`` or ``sd``; ``module.`` prefixes stripped."""
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{source}: expected a state dict of tensors (or {{'state_dict': ...}}), got "
                         f"{type(obj).__name__}")
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in obj.items()}


def open_clip_to_hf(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """open_clip ViT CLIP state dict -> ``transformers.CLIPModel`` state dict (see the module table)."""
    sd = unwrap_checkpoint(sd, "open_clip state dict")
    unsupported = sorted(k for k in sd if k.startswith(("text.", "visual.trunk.", "visual.attn_pool", "visual.head"))
                         or ".ls_1." in k or ".ls_2." in k or ".ln_attn." in k or ".ln_inner." in k)
    if unsupported:
        raise ValueError(f"not a plain open_clip ViT CLIP state dict (custom text tower, timm trunk, layer scale or "
                         f"attention pooling are not supported): {unsupported[:5]}")
    out: dict[str, torch.Tensor] = {}
    unknown = []
    for k, v in sd.items():
        if k in _TOP:
            out[_TOP[k]] = v
        elif k in _TRANSPOSED:
            out[_TRANSPOSED[k]] = v.t().contiguous()
        elif k == "text_projection.weight":  # open_clip variants with an nn.Linear projection
            out["text_projection.weight"] = v
        elif k in _IGNORED:
            continue
        elif (layer := _tower_layer(k, _TOWERS)) is None:
            unknown.append(k)
        else:
            dst, i, rest = layer
            if rest in _BLOCK:
                out[f"{dst}{i}.{_BLOCK[rest]}"] = v
            elif rest in ("attn.in_proj_weight", "attn.in_proj_bias"):
                kind = rest.rsplit("_", 1)[1]  # weight / bias
                for name, part in zip("qkv", v.chunk(3, dim=0)):
                    out[f"{dst}{i}.self_attn.{name}_proj.{kind}"] = part.contiguous()
            else:
                unknown.append(k)
    if unknown:
        raise ValueError(f"open_clip state dict has keys this converter does not know: {sorted(unknown)[:8]}")
    return out


def hf_to_open_clip(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of :func:`open_clip_to_hf` (``transformers.CLIPModel`` -> open_clip names)."""
    top = {v: k for k, v in _TOP.items()}
    trans = {v: k for k, v in _TRANSPOSED.items()}
    block = {v: k for k, v in _BLOCK.items()}
    towers = {v: k for k, v in _TOWERS.items()}
    out: dict[str, torch.Tensor] = {}
    qkv: dict[tuple[str, str, str], dict[str, torch.Tensor]] = {}
    unknown = []
    for k, v in sd.items():
        if k in top:
            out[top[k]] = v
        elif k in trans:
            out[trans[k]] = v.t().contiguous()
        elif k in _IGNORED:
            continue
        elif (layer := _tower_layer(k, towers)) is None:
            unknown.append(k)
        else:
            src, i, rest = layer
            mq = re.fullmatch(r"self_attn\.([qkv])_proj\.(weight|bias)", rest)
            if rest in block:
                out[f"{src}{i}.{block[rest]}"] = v
            elif mq:
                qkv.setdefault((src, i, mq.group(2)), {})[mq.group(1)] = v
            else:
                unknown.append(k)
    for (src, i, kind), parts in qkv.items():
        if set(parts) != {"q", "k", "v"}:
            raise ValueError(f"layer {src}{i}: missing attention projections, have {sorted(parts)}")
        out[f"{src}{i}.attn.in_proj_{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]], dim=0)
    if unknown:
        raise ValueError(f"CLIPModel state dict has keys this converter does not know: {sorted(unknown)[:8]}")
    return out


def _tower_layer(key: str, towers: dict[str, str]) -> tuple[str, str, str] | None:
    """``(the other side's layer prefix, layer index, suffix)`` of ``key`` when it names a layer of one of ``towers``
    (this side's layer prefix -> the other side's), else None."""
    for prefix, other in towers.items():
        m = re.fullmatch(re.escape(prefix) + r"(\d+)\.(.+)", key)
        if m:
            return other, m.group(1), m.group(2)
    return None


def _num_layers(sd: dict[str, torch.Tensor], prefix: str) -> int:
    idx = {int(m.group(1)) for k in sd for m in [re.match(re.escape(prefix) + r"(\d+)\.", k)] if m}
    if not idx:
        raise ValueError(f"open_clip state dict has no '{prefix}<i>.' layers")
    return max(idx) + 1


def _vision_heads(width: int) -> int:
    if width >= 1024:
        return 16  # ViT-L (1024/64), ViT-H (1280/80), ViT-g (1408/88), ViT-bigG (1664/104)
    return 12 if width == 768 else max(1, width // 64)


def clip_config_from_open_clip(sd: dict[str, torch.Tensor], vision_heads: int | None = None,
                               text_heads: int | None = None, quick_gelu: bool = False,
                               eos_token_id: int | None = None, **text_overrides: Any):
    """A ``transformers.CLIPConfig`` whose model has exactly the shapes of the open_clip state dict ``sd``."""
    from transformers import CLIPConfig

    sd = unwrap_checkpoint(sd, "open_clip state dict")
    need = ["token_embedding.weight", "positional_embedding", "visual.conv1.weight", "visual.positional_embedding",
            "visual.proj", "transformer.resblocks.0.mlp.c_fc.weight", "visual.transformer.resblocks.0.mlp.c_fc.weight"]
    missing = [k for k in need if k not in sd]
    if missing:
        raise ValueError(f"not an open_clip ViT CLIP state dict: missing {missing}")
    vocab, dt = sd["token_embedding.weight"].shape
    ctx = sd["positional_embedding"].shape[0]
    dv, _, patch, _ = sd["visual.conv1.weight"].shape
    grid = round((sd["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    if grid * grid + 1 != sd["visual.positional_embedding"].shape[0]:
        raise ValueError(f"visual.positional_embedding has {sd['visual.positional_embedding'].shape[0]} rows, "
                         f"expected 1 + a square number of patches")
    proj_dim = sd["visual.proj"].shape[1]
    tp = sd.get("text_projection", sd.get("text_projection.weight"))
    if tp is not None and proj_dim not in tp.shape:
        raise ValueError(f"text_projection {tuple(tp.shape)} does not match visual.proj "
                         f"{tuple(sd['visual.proj'].shape)}")
    act = "quick_gelu" if quick_gelu else "gelu"
    text = dict(vocab_size=int(vocab), hidden_size=int(dt), max_position_embeddings=int(ctx),
                intermediate_size=int(sd["transformer.resblocks.0.mlp.c_fc.weight"].shape[0]),
                num_hidden_layers=_num_layers(sd, "transformer.resblocks."),
                num_attention_heads=text_heads or max(1, int(dt) // 64), hidden_act=act, projection_dim=int(proj_dim))
    if eos_token_id is not None:
        text["eos_token_id"] = int(eos_token_id)
    text.update(text_overrides)
    vision = dict(hidden_size=int(dv), image_size=int(grid * patch), patch_size=int(patch),
                  intermediate_size=int(sd["visual.transformer.resblocks.0.mlp.c_fc.weight"].shape[0]),
                  num_hidden_layers=_num_layers(sd, "visual.transformer.resblocks."),
                  num_attention_heads=vision_heads or _vision_heads(int(dv)), hidden_act=act,
                  projection_dim=int(proj_dim))
    for name, cfg in (("text", text), ("vision", vision)):
        if cfg["hidden_size"] % cfg["num_attention_heads"]:
            raise ValueError(f"{name} width {cfg['hidden_size']} is not divisible by {cfg['num_attention_heads']} "
                             f"heads; pass {name}_heads=")
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=int(proj_dim))


def clip_model_from_open_clip(sd: dict[str, torch.Tensor], **config_kwargs: Any):
    """A float32 ``transformers.CLIPModel`` holding the open_clip weights ``sd`` (every weight accounted for)."""
    from transformers import CLIPModel

    sd = unwrap_checkpoint(sd, "open_clip state dict")
    config = clip_config_from_open_clip(sd, **config_kwargs)
    hf = open_clip_to_hf(sd)
    model = CLIPModel(config)
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in hf.items()}, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(f"open_clip -> CLIPModel conversion left missing={missing[:8]} unexpected={unexpected[:8]}")
    return model  # float32; the caller casts
