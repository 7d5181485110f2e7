"""Wan 2.2 (Wan-AI 2025) text-to-video, as ``WanPipeline`` runs it, in both released layouts:

* T2V-A14B, a mixture of two experts: ``pipe.transformer`` denoises the high-noise steps ``t >= boundary_ratio * 1000``
  (``boundary_ratio`` 0.875 for T2V) and ``pipe.transformer_2`` the low-noise rest; each is a 14 B Wan DiT. The adapter
  routes every row to its expert by its own ``sigma`` (``t = 1000 sigma``), so a batch that mixes noise levels is
  split into at most two calls. LoRA goes into both experts (each learns from the steps it denoises); the trainable
  names are ``transformer.<module>`` / ``transformer_2.<module>`` (:class:`Experts`, one module over both), and the
  export writes one diffusers LoRA file per expert (:mod:`diffusion_rl.export`);
* TI2V-5B, one 5 B DiT over the 16x-compressing Wan 2.2 VAE (48 latent channels), called with per-token timesteps
  (``expand_timesteps``: ``[B, f h w / 4]``, every token of a text-to-video latent at the row's ``t``).

Everything else (UMT5 prompts zero-padded to ``model.max_sequence_length``, decoding) is :class:`WanAdapter`'s.
"""

from __future__ import annotations

import torch

from .adapters import WanAdapter

EXPERTS = ("transformer", "transformer_2")


class Experts(torch.nn.Module):
    """Wan 2.2's two denoisers as one module, named as the pipeline's components, with the ModelMixin calls the
    adapter base class makes (LoRA injection, adapter on/off, checkpointing, attention backend) sent to both."""

    def __init__(self, high: torch.nn.Module, low: torch.nn.Module):
        super().__init__()
        self.transformer = high
        self.transformer_2 = low

    def experts(self) -> list[torch.nn.Module]:
        return [self.transformer, self.transformer_2]

    def add_adapter(self, config) -> None:
        for m in self.experts():
            m.add_adapter(config)

    def disable_adapters(self) -> None:
        for m in self.experts():
            m.disable_adapters()

    def enable_adapters(self) -> None:
        for m in self.experts():
            m.enable_adapters()

    def enable_gradient_checkpointing(self) -> None:
        for m in self.experts():
            m.enable_gradient_checkpointing()

    def set_attention_backend(self, name: str) -> None:
        for m in self.experts():
            m.set_attention_backend(name)


class Wan22Adapter(WanAdapter):
    kind = "wan22"

    def __init__(self, pipe, cfg):
        ratio = pipe.config.get("boundary_ratio")
        low = getattr(pipe, "transformer_2", None)
        if (ratio is None) != (low is None):
            raise ValueError(f"Wan 2.2 pipeline with boundary_ratio={ratio} and "
                             f"transformer_2={'absent' if low is None else 'present'}: the two-expert model (T2V-A14B) "
                             "needs both, the single-transformer one (TI2V-5B) neither")
        self.boundary = None if ratio is None else float(ratio) * pipe.scheduler.config.num_train_timesteps
        self.expand = bool(pipe.config.get("expand_timesteps", False))
        if low is not None:  # the base class then moves, casts and configures both experts as one module
            pipe = _PipeView(pipe)
        super().__init__(pipe, cfg)
        self.experts = EXPERTS if low is not None else None

    def _call(self, model, x, t, emb):
        if self.expand:  # WanPipeline: (mask[:, ::2, ::2] * t).flatten(), all ones for text-to-video
            p = model.config.patch_size
            n = (x.shape[2] // p[0]) * (x.shape[3] // p[1]) * (x.shape[4] // p[2])
            t = t[:, None].expand(x.shape[0], n)
        return model(hidden_states=x.to(self.dtype), timestep=t.to(self.dtype), encoder_hidden_states=emb,
                     return_dict=False)[0]

    def velocity(self, latents, sigma, cond):
        b = latents.shape[0]
        t = torch.as_tensor(sigma, dtype=torch.float32, device=latents.device).expand(b) * 1000
        emb = cond["prompt_embeds"]
        if self.boundary is None:
            return self._call(self.transformer, latents, t, emb).float()
        high = t >= self.boundary
        if bool(high.all()) or not bool(high.any()):  # the usual case: one noise level per call
            model = self.transformer.transformer if bool(high.all()) else self.transformer.transformer_2
            return self._call(model, latents, t, emb).float()
        out = torch.empty(latents.shape, dtype=torch.float32, device=latents.device)
        for rows, model in ((high, self.transformer.transformer), (~high, self.transformer.transformer_2)):
            out[rows] = self._call(model, latents[rows], t[rows], emb[rows]).float()
        return out


class _PipeView:
    """The pipeline as the adapter base class sees it: ``transformer`` is the :class:`Experts` module (the pipeline's
    own components are untouched: ``pipe.transformer`` / ``pipe.transformer_2`` are the experts themselves)."""

    def __init__(self, pipe):
        self._pipe = pipe
        self.transformer = Experts(pipe.transformer, pipe.transformer_2)

    def __getattr__(self, name):
        return getattr(self._pipe, name)

