"""The model families the diffusion frontend knows, as plain data: their diffusers pipeline classes and the
attention projections LoRA targets by default (a leaf module: adapters, checkpoints, export and the plan share it)."""

from __future__ import annotations

DEFAULT_LORA_TARGETS = {
    "sd3": ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"],
    "flux": ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"],
    "wan": ["to_q", "to_k", "to_v", "to_out.0"],
    "qwenimage": ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"],
    "wan22": ["to_q", "to_k", "to_v", "to_out.0"],
    "flux_kontext": ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"],
}

PIPELINES = {"sd3": "StableDiffusion3Pipeline", "flux": "FluxPipeline", "wan": "WanPipeline",
             "qwenimage": "QwenImagePipeline", "wan22": "WanPipeline", "flux_kontext": "FluxKontextPipeline"}

# adapters of the later families, each in its own module (they subclass diffusion_rl.adapters' base classes, so
# adapters.adapter_class loads them by import path, as it loads a user's model.adapter)
ADAPTER_PATHS = {"qwenimage": "diffusion_rl.qwen_image:QwenImageAdapter", "wan22": "diffusion_rl.wan22:Wan22Adapter",
                 "flux_kontext": "diffusion_rl.flux_kontext:FluxKontextAdapter"}


def pipeline_class(kind: str):
    """The diffusers pipeline class of a model kind (its ``save_lora_weights`` / ``lora_state_dict``)."""
    import diffusers


    if kind not in PIPELINES:
        raise ValueError(f"unknown model kind {kind!r}; expected one of {sorted(PIPELINES)}")
    return getattr(diffusers, PIPELINES[kind])
