"""FLUX.1 Kontext (Black Forest Labs 2025): image-conditioned editing with FLUX.1's transformer, as
``FluxKontextPipeline`` runs it.

A prompt names its reference image and the instruction: ``"<image path> | <instruction>"`` (a path relative to the
working directory, or absolute). The reference is resized to the output size (``model.height`` x ``model.width``;
the stock pipeline's ``_auto_resize=False`` with an image of that size does the same), scaled to ``[-1, 1]``, encoded
with the VAE's posterior mode and normalised ``(z - shift) * scale`` -- the conditioning, cached with the prompt's text
states. :meth:`FluxKontextAdapter.velocity` packs the noisy latents and the reference latents into 2x2 patches and
concatenates them along the sequence, ``[B, N + N_ref, 64]``, with the reference tokens' position ids carrying
index 1 in their first (time) axis; the transformer's output for the first ``N`` tokens is the velocity. The
reward sees only the edited image (an editing reward that also needs the reference reads the prompt's path).
"""

from __future__ import annotations

from pathlib import Path

import torch

from .adapters import FluxAdapter, unpack_latents

SEPARATOR = " | "


def split_prompt(prompt: str) -> tuple[str, str]:
    """``"<image path> | <instruction>"`` -> (path, instruction); one error naming the expected form otherwise."""
    path, sep, text = prompt.partition(SEPARATOR)
    if not sep or not path.strip():
        raise ValueError(f"FLUX Kontext prompt {prompt!r} names no reference image: expected '<image path>{SEPARATOR}"
                         "<instruction>'")
    if not Path(path.strip()).expanduser().is_file():
        raise FileNotFoundError(f"FLUX Kontext prompt {prompt!r}: reference image {path.strip()!r} does not exist")
    return str(Path(path.strip()).expanduser()), text.strip()


class FluxKontextAdapter(FluxAdapter):
    kind = "flux_kontext"

    def _encode(self, prompts):
        from PIL import Image

        pairs = [split_prompt(p) for p in prompts]
        cond = super()._encode([t for _, t in pairs])
        proc, vae = self.pipe.image_processor, self.pipe.vae
        refs = []
        for path, _ in pairs:
            img = proc.resize(Image.open(path).convert("RGB"), self.cfg.height, self.cfg.width)
            x = proc.preprocess(img, self.cfg.height, self.cfg.width).to(self.device, vae.dtype)
            z = vae.encode(x).latent_dist.mode()
            refs.append((z - vae.config.shift_factor) * vae.config.scaling_factor)
        cond["image_latents"] = torch.cat(refs)
        return cond

    def velocity(self, latents, sigma, cond):
        from diffusers import FluxKontextPipeline as P

        b, c, h, w = latents.shape
        ref = cond["image_latents"]
        rh, rw = ref.shape[-2:]
        packed = P._pack_latents(latents.to(self.dtype), b, c, h, w)
        hidden = torch.cat([packed, P._pack_latents(ref.to(self.dtype), b, c, rh, rw)], dim=1)
        ref_ids = P._prepare_latent_image_ids(b, rh // 2, rw // 2, latents.device, self.dtype)
        ref_ids[..., 0] = 1
        img_ids = torch.cat([P._prepare_latent_image_ids(b, h // 2, w // 2, latents.device, self.dtype), ref_ids])
        return unpack_latents(self._denoise(hidden, img_ids, sigma, cond, b), b, c, h, w)  # the target's tokens
