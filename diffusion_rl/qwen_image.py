"""Qwen-Image (Qwen team 2025, a 20 B MM-DiT with a Qwen2.5-VL-7B text encoder), as ``QwenImagePipeline`` runs it.

Same rectified-flow convention as the other adapters (:mod:`diffusion_rl.adapters`): latents ``[B, 16, H/8, W/8]``
unpacked; :meth:`QwenImageAdapter.velocity` packs 2x2 patches into ``[B, hw/4, 64]``
(``QwenImagePipeline._pack_latents``), calls ``QwenImageTransformer2DModel`` with ``timestep = sigma`` (the pipeline
passes ``t / 1000``) and the image grid
``img_shapes = [(1, h/2, w/2)]`` (its 3D RoPE), and unpacks the result. Decoding follows the pipeline: the latents get a
frame axis, ``z * std + mean`` per channel, the causal 3D VAE (``AutoencoderKLQwenImage``) decodes frame 0.

Prompts: ``pipe.encode_prompt`` (the system-prompt template, the Qwen2.5-VL last hidden state of the user tokens,
the template's first 34 tokens dropped). Diffusers pads a batch to its longest prompt with zero states and
attends to them (0.36's joint attention takes no text mask); here every prompt is zero-padded to
``model.max_sequence_length`` once and cached, so a prompt's conditioning never depends on the batch it is in (the
PPO ratio of a recomputed row stays exactly 1). The stock pipeline given these embeddings (``prompt_embeds`` and an
all-ones ``prompt_embeds_mask``) computes the same velocity.
"""

from __future__ import annotations

import torch

from .adapters import DiffusionAdapter, packed_latent_shape, unpack_latents


class QwenImageAdapter(DiffusionAdapter):
    kind = "qwenimage"

    def _encode(self, prompts):
        pe, _ = self.pipe.encode_prompt(prompts, device=self.device, max_sequence_length=self.cfg.max_sequence_length)
        L = self.cfg.max_sequence_length
        return {"prompt_embeds": torch.nn.functional.pad(pe, (0, 0, 0, L - pe.shape[1]))}

    @property
    def latent_shape(self):
        f = 2 ** len(self.pipe.vae.temperal_downsample)
        return packed_latent_shape("Qwen-Image", f, self.cfg, self.transformer.config.in_channels,
                                   f" (image sides multiples of {2 * f})")

    def velocity(self, latents, sigma, cond):
        from diffusers import QwenImagePipeline

        b, c, h, w = latents.shape
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=latents.device).expand(b)
        packed = QwenImagePipeline._pack_latents(latents.to(self.dtype), b, c, h, w)
        pe = cond["prompt_embeds"]
        out = self.transformer(hidden_states=packed, timestep=sigma.to(self.dtype), guidance=None,
                               encoder_hidden_states=pe,
                               encoder_hidden_states_mask=torch.ones(pe.shape[:2], dtype=torch.long, device=pe.device),
                               img_shapes=[[(1, h // 2, w // 2)]] * b, txt_seq_lens=[pe.shape[1]] * b,
                               return_dict=False)[0]
        return unpack_latents(out, b, c, h, w)

    @torch.no_grad()
    def decode(self, latents):
        vae = self.pipe.vae
        z = vae.config.z_dim
        mean = torch.tensor(vae.config.latents_mean, device="cpu").view(1, z, 1, 1, 1).to(latents.device)
        std = torch.tensor(vae.config.latents_std, device="cpu").view(1, z, 1, 1, 1).to(latents.device)
        img = vae.decode((latents.float()[:, :, None] * std + mean).to(vae.dtype), return_dict=False)[0][:, :, 0]
        return (img.float() / 2 + 0.5).clamp(0, 1)
