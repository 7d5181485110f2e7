"""Diffusers transformer state dicts -> the original release layouts that single-file checkpoints use, so that tests
can write a tiny model the way ``sd3.5_medium.safetensors`` (Stability AI's MMDiT) or ``flux1-dev.safetensors`` (Black
Forest Labs) store it, and load it back through diffusers' ``from_single_file``. The key names are the ones diffusers
0.36's converters (``convert_sd3_transformer_checkpoint_to_diffusers``,
``convert_flux_transformer_checkpoint_to_diffusers``) read; fused projections are concatenated in the order those
converters split them, and the two final-norm modulations whose (shift, scale) halves the converters swap are swapped
back."""

from __future__ import annotations

import torch

PREFIX = "model.diffusion_model."


def _swap_halves(w: torch.Tensor) -> torch.Tensor:
    a, b = w.chunk(2, dim=0)
    return torch.cat([b, a])


def _cat(sd, *names):
    return torch.cat([sd.pop(n) for n in names])


def sd3_to_original(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SD3Transformer2DModel -> SAI MMDiT(-X) names (``joint_blocks.N.x_block.attn.qkv``, ``...attn2`` on dual-attention
    blocks, ``final_layer``); the last block's context stream is pre-only (no output projection, no MLP)."""
    sd = dict(sd)
    out = {"pos_embed": sd.pop("pos_embed.pos_embed"), "x_embedder.proj.weight": sd.pop("pos_embed.proj.weight"),
           "x_embedder.proj.bias": sd.pop("pos_embed.proj.bias"),
           "context_embedder.weight": sd.pop("context_embedder.weight"),
           "context_embedder.bias": sd.pop("context_embedder.bias")}
    for mine, theirs in (("timestep_embedder", "t_embedder"), ("text_embedder", "y_embedder")):
        for a, b in (("linear_1", "0"), ("linear_2", "2")):
            for p in ("weight", "bias"):
                out[f"{theirs}.mlp.{b}.{p}"] = sd.pop(f"time_text_embed.{mine}.{a}.{p}")
    n = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("transformer_blocks."))
    for i in range(n):
        d, o = f"transformer_blocks.{i}.", f"joint_blocks.{i}."
        last = i == n - 1
        for p in ("weight", "bias"):
            out[f"{o}x_block.attn.qkv.{p}"] = _cat(sd, *(f"{d}attn.to_{c}.{p}" for c in "qkv"))
            out[f"{o}context_block.attn.qkv.{p}"] = _cat(sd, *(f"{d}attn.add_{c}_proj.{p}" for c in "qkv"))
            out[f"{o}x_block.attn.proj.{p}"] = sd.pop(f"{d}attn.to_out.0.{p}")
            out[f"{o}x_block.adaLN_modulation.1.{p}"] = sd.pop(f"{d}norm1.linear.{p}")
            ctx = sd.pop(f"{d}norm1_context.linear.{p}")
            out[f"{o}context_block.adaLN_modulation.1.{p}"] = _swap_halves(ctx) if last else ctx
            out[f"{o}x_block.mlp.fc1.{p}"] = sd.pop(f"{d}ff.net.0.proj.{p}")
            out[f"{o}x_block.mlp.fc2.{p}"] = sd.pop(f"{d}ff.net.2.{p}")
            if not last:
                out[f"{o}context_block.attn.proj.{p}"] = sd.pop(f"{d}attn.to_add_out.{p}")
                out[f"{o}context_block.mlp.fc1.{p}"] = sd.pop(f"{d}ff_context.net.0.proj.{p}")
                out[f"{o}context_block.mlp.fc2.{p}"] = sd.pop(f"{d}ff_context.net.2.{p}")
            if f"{d}attn2.to_q.{p}" in sd:  # MMDiT-X: the image stream's second attention
                out[f"{o}x_block.attn2.qkv.{p}"] = _cat(sd, *(f"{d}attn2.to_{c}.{p}" for c in "qkv"))
                out[f"{o}x_block.attn2.proj.{p}"] = sd.pop(f"{d}attn2.to_out.0.{p}")
        for mine, theirs in (("attn.norm_q", "x_block.attn.ln_q"), ("attn.norm_k", "x_block.attn.ln_k"),
                             ("attn.norm_added_q", "context_block.attn.ln_q"),
                             ("attn.norm_added_k", "context_block.attn.ln_k"),
                             ("attn2.norm_q", "x_block.attn2.ln_q"), ("attn2.norm_k", "x_block.attn2.ln_k")):
            if f"{d}{mine}.weight" in sd:
                out[f"{o}{theirs}.weight"] = sd.pop(f"{d}{mine}.weight")
    for p in ("weight", "bias"):
        out[f"final_layer.linear.{p}"] = sd.pop(f"proj_out.{p}")
        out[f"final_layer.adaLN_modulation.1.{p}"] = _swap_halves(sd.pop(f"norm_out.linear.{p}"))
    assert not sd, f"unmapped keys: {sorted(sd)[:5]}"
    return {PREFIX + k: v.contiguous() for k, v in out.items()}


def flux_to_original(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """FluxTransformer2DModel -> BFL names (``double_blocks.N.img_attn.qkv``, ``single_blocks.N.linear1`` = q, k, v and
    the MLP input fused, ``final_layer``)."""
    sd = dict(sd)
    out = {}
    for mine, theirs in (("timestep_embedder", "time_in"), ("text_embedder", "vector_in"),
                         ("guidance_embedder", "guidance_in")):
        for a, b in (("linear_1", "in_layer"), ("linear_2", "out_layer")):
            for p in ("weight", "bias"):
                if f"time_text_embed.{mine}.{a}.{p}" in sd:
                    out[f"{theirs}.{b}.{p}"] = sd.pop(f"time_text_embed.{mine}.{a}.{p}")
    for p in ("weight", "bias"):
        out[f"txt_in.{p}"] = sd.pop(f"context_embedder.{p}")
        out[f"img_in.{p}"] = sd.pop(f"x_embedder.{p}")
    blocks = lambda name: 1 + max([int(k.split(".")[1]) for k in sd if k.startswith(name + ".")], default=-1)  # noqa: E731
    for i in range(blocks("transformer_blocks")):
        d, o = f"transformer_blocks.{i}.", f"double_blocks.{i}."
        for p in ("weight", "bias"):
            out[f"{o}img_mod.lin.{p}"] = sd.pop(f"{d}norm1.linear.{p}")
            out[f"{o}txt_mod.lin.{p}"] = sd.pop(f"{d}norm1_context.linear.{p}")
            out[f"{o}img_attn.qkv.{p}"] = _cat(sd, *(f"{d}attn.to_{c}.{p}" for c in "qkv"))
            out[f"{o}txt_attn.qkv.{p}"] = _cat(sd, *(f"{d}attn.add_{c}_proj.{p}" for c in "qkv"))
            out[f"{o}img_mlp.0.{p}"] = sd.pop(f"{d}ff.net.0.proj.{p}")
            out[f"{o}img_mlp.2.{p}"] = sd.pop(f"{d}ff.net.2.{p}")
            out[f"{o}txt_mlp.0.{p}"] = sd.pop(f"{d}ff_context.net.0.proj.{p}")
            out[f"{o}txt_mlp.2.{p}"] = sd.pop(f"{d}ff_context.net.2.{p}")
            out[f"{o}img_attn.proj.{p}"] = sd.pop(f"{d}attn.to_out.0.{p}")
            out[f"{o}txt_attn.proj.{p}"] = sd.pop(f"{d}attn.to_add_out.{p}")
        for mine, theirs in (("norm_q", "img_attn.norm.query_norm"), ("norm_k", "img_attn.norm.key_norm"),
                             ("norm_added_q", "txt_attn.norm.query_norm"), ("norm_added_k", "txt_attn.norm.key_norm")):
            out[f"{o}{theirs}.scale"] = sd.pop(f"{d}attn.{mine}.weight")
    for i in range(blocks("single_transformer_blocks")):
        d, o = f"single_transformer_blocks.{i}.", f"single_blocks.{i}."
        for p in ("weight", "bias"):
            out[f"{o}modulation.lin.{p}"] = sd.pop(f"{d}norm.linear.{p}")
            out[f"{o}linear1.{p}"] = _cat(sd, *(f"{d}attn.to_{c}.{p}" for c in "qkv"), f"{d}proj_mlp.{p}")
            out[f"{o}linear2.{p}"] = sd.pop(f"{d}proj_out.{p}")
        out[f"{o}norm.query_norm.scale"] = sd.pop(f"{d}attn.norm_q.weight")
        out[f"{o}norm.key_norm.scale"] = sd.pop(f"{d}attn.norm_k.weight")
    for p in ("weight", "bias"):
        out[f"final_layer.linear.{p}"] = sd.pop(f"proj_out.{p}")
        out[f"final_layer.adaLN_modulation.1.{p}"] = _swap_halves(sd.pop(f"norm_out.linear.{p}"))
    assert not sd, f"unmapped keys: {sorted(sd)[:5]}"
    return {PREFIX + k: v.contiguous() for k, v in out.items()}
