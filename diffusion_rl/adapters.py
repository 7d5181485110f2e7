"""One adapter interface over diffusers pipelines, so that samplers and trainers are model-agnostic.

Every adapter wraps a diffusers pipeline (``StableDiffusion3Pipeline``, ``FluxPipeline``, ``WanPipeline``)
and exposes::

    cond   = adapter.encode_prompts(prompts)          # dict of tensors [B, ...], cached per prompt string
    v      = adapter.velocity(latents, sigma, cond)   # [B, *latent_shape] float32, v ~ eps - x0
    images = adapter.decode(latents)                  # [B, 3, H, W] in [0, 1] (video: [B, F, 3, H, W])
    adapter.latent_shape                              # (C, h, w) or (C, f, h, w)

in the rectified-flow convention of :mod:`grpo.flow_sde` (``x_sigma = (1 - sigma) x0 + sigma eps``, sigma 1 -> 0),
which is the convention of diffusers' ``FlowMatchEulerDiscreteScheduler`` used by all three models
(the denoiser is called with ``timestep = 1000 sigma`` for SD3/Wan and ``sigma`` for FLUX, as the pipelines do).

LoRA (Hu et al. 2022) is injected with peft into the denoiser's attention projections
(``W x + (alpha / r) B A x``, ``B = 0`` at init, so the policy starts exactly at the pretrained model); the
reference policy for the KL is the same network with the adapter disabled (:meth:`DiffusionAdapter.reference`),
so no second copy of the weights is held.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

import torch

from grpo.checkpoint import nonfinite_tensors
from grpo.device import check_device_name, resolve_device

from .families import DEFAULT_LORA_TARGETS, PIPELINES  # noqa: F401  (re-exported: the families' defaults)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# attention projections of the joint (MM-DiT) blocks and of Wan's self/cross attention


MAX_LORA_SCALE = 1000  # the largest LoRA scale alpha / rank a config may ask for (recipes use 0.5 .. 4)


@dataclass
class LoraSettings:
    enabled: bool = True  # train LoRA adapters (false: the full denoiser)
    rank: int = 8  # LoRA rank
    alpha: float = 16.0  # LoRA alpha (scale alpha / rank)
    dropout: float = 0.0  # LoRA dropout (keep 0 for an exact PPO ratio)
    targets: list[str] = field(default_factory=list)  # empty: DEFAULT_LORA_TARGETS[kind]

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"lora.rank must be >= 1, got {self.rank}")
        if self.rank > 8192:  # (beyond every supported model's width; 1e8 took 13 GB building the tiny model's LoRA)
            raise ValueError(f"lora.rank={self.rank}: expected at most 8192")
        if self.alpha <= 0:
            raise ValueError(f"lora.alpha must be > 0 (the LoRA scale is alpha / rank), got {self.alpha}")
        if self.alpha > MAX_LORA_SCALE * self.rank:  # (was: alpha 1e300, a scale of inf in float32: the denoiser gave
            # NaN before the first update and the run saved NaN checkpoints with exit 0)
            raise ValueError(f"lora.alpha={self.alpha}: expected at most {MAX_LORA_SCALE} x lora.rank = "
                             f"{MAX_LORA_SCALE * self.rank} (the LoRA scale alpha / rank multiplies every update)")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"lora.dropout must be in [0, 1) (0: off), got {self.dropout}")
        if any(not str(t).strip() for t in self.targets):
            raise ValueError(f"lora.targets={list(self.targets)} holds an empty name (expected module names such as "
                             "to_q, to_k; or [] for the model's defaults)")


@dataclass
class ModelConfig:
    """Which denoiser to load and how (the YAML ``model:`` section)."""

    kind: Literal["sd3", "flux", "wan", "qwenimage", "wan22", "flux_kontext"] = "sd3"  # model family: sd3 (SD3/SD3.5),
        # flux, wan (2.1), qwenimage, wan22 (Wan 2.2), flux_kontext (editing)
    path: str | None = None  # a diffusers directory, a single .safetensors checkpoint, or a hub
                             # id; None: tiny model in code
    components: str | None = None  # single-file path: a diffusers directory with the rest (text
                                   # encoders, VAE, scheduler)
    drop_t5: bool = False  # SD3: load without T5-XXL (text_encoder_3=None; ~9.5 GB less, CLIP-only prompts)
    dtype: Literal["fp32", "bf16", "fp16"] = "fp32"  # base weights' dtype (LoRA weights and log-probs stay fp32)
    height: int = 32  # image height in pixels
    width: int = 32  # image width in pixels
    num_frames: int = 9  # Wan only
    max_sequence_length: int = 16  # text tokens per prompt
    guidance: float = 3.5  # FLUX-dev distilled guidance (only used when the transformer has guidance embeddings)
    gradient_checkpointing: bool = False  # recompute activations in the backward (less memory)
    attention: Literal["sdpa", "xformers", "flash"] = "sdpa"  # attention kernel
                                                              # (diffusion_rl.attention); sdpa: torch SDPA
    decode_batch: int = 0  # > 0: decode final samples in chunks of this many (bounds the VAE's transient memory)
    device: str = "auto"  # auto (cuda when available, each rank's own GPU under torchrun), cpu, cuda, cuda:<i>
    lora: LoraSettings = field(default_factory=LoraSettings)  # the trained LoRA adapters
    lora_init: str | None = None  # a diffusers-saved LoRA (directory or .safetensors) to start the adapter from
    tiny_words: list[str] = field(default_factory=list)  # extra vocabulary for the tiny tokenizer
    tiny: dict[str, Any] = field(default_factory=dict)  # keyword arguments of the tiny builder (path=None)
    # "shapes": `path` is the colors-and-shapes demo model; when it is missing the run stops naming the command that
    # builds it (`diffusion-rl pretrain-shapes --out <path>`): loading a model never trains one
    pretrain: Literal["none", "shapes"] = "none"  # shapes: path is the demo model (a missing one names
                                                  # the command that builds it)
    adapter: str = ""  # a user's adapter class "package.module:Name" (grpo.plugins.DIFFUSION_ADAPTER;
                       # docs/EXTENDING.md); empty: the built-in for kind

    def __post_init__(self) -> None:
        check_device_name(self.device)  # the name only: resolved (and CUDA required) when the adapter is built
        if self.adapter:  # imported and checked against the protocol now: one error naming what the class lacks
            from grpo.plugins import DIFFUSION_ADAPTER, load_checked

            load_checked(self.adapter, DIFFUSION_ADAPTER, "model.adapter", want_class=True)
        if self.tiny and self.path is None:  # the tiny builder's own arguments (words / max_length come from here)
            from grpo.preflight import check_kwargs

            from .tiny_models import TINY_BUILDERS, check_tiny_kwargs

            check_kwargs("model.tiny", TINY_BUILDERS[self.kind], self.tiny, passed=("words", "max_length"))
            check_tiny_kwargs(self.kind, self.tiny)
        if self.decode_batch < 0:
            raise ValueError(f"model.decode_batch must be >= 0 (0: all at once), got {self.decode_batch}")
        if self.max_sequence_length < 1:
            raise ValueError(f"model.max_sequence_length must be >= 1 (text tokens per prompt), got "
                             f"{self.max_sequence_length}")
        if self.max_sequence_length > 8192:  # (the tiny model's embeddings are built in a dry run: 1e8 took 13 GB)
            raise ValueError(f"model.max_sequence_length={self.max_sequence_length}: expected at most 8192 text tokens "
                             "per prompt")
        from .image_sizes import check_image_size

        check_image_size(self)  # sides the VAE and the patching divide evenly (from the configs; no weights read)


Cond = dict[str, torch.Tensor]


def cond_select(cond: Cond, idx: torch.Tensor | list[int]) -> Cond:
    """Rows ``idx`` of every conditioning tensor."""
    idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
    return {k: v[idx.to(v.device)] for k, v in cond.items()}


def cond_cat(*conds: Cond) -> Cond:
    return {k: torch.cat([c[k] for c in conds]) for k in conds[0]}


class DiffusionAdapter:
    """Base class: prompt cache, LoRA, reference (adapter disabled), dtype, gradient checkpointing."""

    kind = "base"

    def __init__(self, pipe, cfg: ModelConfig):
        self.pipe = pipe
        self.cfg = cfg
        self.device = resolve_device(cfg.device)  # auto / cuda: this process's current CUDA device (its LOCAL_RANK)
        self.dtype = DTYPES[cfg.dtype]
        self.transformer = pipe.transformer
        for name in ("transformer", "vae", "text_encoder", "text_encoder_2", "text_encoder_3"):
            m = getattr(pipe, name, None)
            if m is not None:
                m.requires_grad_(False)
                m.eval()
                m.to(self.device)
        self.transformer.to(dtype=self.dtype)
        from .attention import set_attention

        self.attention = set_attention(self.transformer, cfg.attention, self.kind, self.device)
        if cfg.gradient_checkpointing:
            self.transformer.enable_gradient_checkpointing()
        self._cache: dict[str, Cond] = {}
        self.has_lora = False
        if cfg.decode_batch > 0:  # the VAE's transient memory grows with the batch: decode chunk by chunk
            whole = self.decode
            self.decode = lambda latents: torch.cat([whole(c) for c in latents.split(cfg.decode_batch)])

    # ---- prompts ------------------------------------------------------------------------------
    def _encode(self, prompts: list[str]) -> Cond:
        raise NotImplementedError

    @torch.no_grad()
    def encode_prompts(self, prompts: list[str]) -> Cond:
        """Conditioning ``{name: [B, ...]}`` for ``prompts``; each distinct prompt is encoded once and cached."""
        todo = [p for p in dict.fromkeys(prompts) if p not in self._cache]
        if todo:
            enc = self._encode(todo)
            for i, p in enumerate(todo):
                self._cache[p] = {k: v[i:i + 1].to(self.device, self.dtype) for k, v in enc.items()}
        return cond_cat(*[self._cache[p] for p in prompts])

    # ---- the denoiser ---------------------------------------------------------------------------
    @property
    def latent_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def velocity(self, latents: torch.Tensor, sigma: torch.Tensor, cond: Cond) -> torch.Tensor:
        """Predicted velocity ``v ~ eps - x0`` ``[B, *latent_shape]`` (float32) at noise level ``sigma[B]``."""
        raise NotImplementedError

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # ---- LoRA ---------------------------------------------------------------------------------
    def add_lora(self, lora: LoraSettings | None = None) -> list[torch.nn.Parameter]:
        """Inject a peft LoRA into the denoiser; returns the trainable parameters (float32)."""
        from peft import LoraConfig

        lora = lora or self.cfg.lora
        targets = list(lora.targets) or DEFAULT_LORA_TARGETS[self.kind]
        names = [n for n, _ in self.transformer.named_modules()]
        missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
        if missing:
            linear = sorted({n.rsplit(".", 1)[-1] for n, m in self.transformer.named_modules()
                             if isinstance(m, torch.nn.Linear)})
            raise ValueError(f"LoRA target(s) {missing} match no module of the {type(self.transformer).__name__}; "
                             f"expected names such as {linear}")
        self.transformer.add_adapter(LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                                init_lora_weights=True, target_modules=targets))
        params = self.trainable_parameters()
        for p in params:
            p.data = p.data.float()  # LoRA weights train in fp32 even for a bf16 base
        self.has_lora = True
        return params

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.transformer.parameters() if p.requires_grad]

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in self.transformer.named_parameters() if p.requires_grad}

    def load_trainable_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        params = dict(self.transformer.named_parameters())
        unknown = [k for k in state if k not in params]
        if unknown:
            raise KeyError(f"checkpoint holds parameters {unknown[:5]} that this model does not have")
        wrong = [(k, tuple(v.shape), tuple(params[k].shape)) for k, v in state.items() if v.shape != params[k].shape]
        if wrong:  # copy_ would broadcast a [1, ...] tensor into every row: a damaged or foreign checkpoint, refused
            k, got, want = wrong[0]
            raise ValueError(f"checkpoint tensor {k!r} has shape {list(got)}, this model's is {list(want)} "
                             f"({len(wrong)} of {len(state)} tensors differ: a damaged checkpoint, or one of another "
                             "model.lora / model size)")
        bad = nonfinite_tensors(state)
        if bad:  # training on from them would give NaN samples and rewards
            raise ValueError(f"checkpoint tensor {bad[0]!r} holds NaN/inf ({len(bad)} of {len(state)} tensors): a "
                             "damaged checkpoint, left as it is; resume from an older one")
        with torch.no_grad():
            for k, v in state.items():
                params[k].copy_(v)

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """The reference policy: the pretrained denoiser, i.e. the LoRA adapter disabled."""
        if not self.has_lora:
            yield
            return
        self.transformer.disable_adapters()
        try:
            yield
        finally:
            self.transformer.enable_adapters()

    def train(self, mode: bool = True) -> None:
        self.transformer.train(mode)


def _vae_factor(vae) -> int:
    return 2 ** (len(vae.config.block_out_channels) - 1) if vae is not None else 1


class SD3Adapter(DiffusionAdapter):
    """SD3 / SD3.5 (MM-DiT, Esser et al. 2024). ``pipe.vae is None`` means a pixel-space model (latents in [-1, 1])."""

    kind = "sd3"

    def _encode(self, prompts: list[str]) -> Cond:
        pe, _, pooled, _ = self.pipe.encode_prompt(prompts, None, None, device=self.device,
                                                   do_classifier_free_guidance=False,
                                                   max_sequence_length=self.cfg.max_sequence_length)
        return {"prompt_embeds": pe, "pooled": pooled}

    @property
    def latent_shape(self) -> tuple[int, ...]:
        f = _vae_factor(self.pipe.vae)
        return (self.transformer.config.in_channels, self.cfg.height // f, self.cfg.width // f)

    def velocity(self, latents, sigma, cond):
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=latents.device).expand(latents.shape[0])
        out = self.transformer(hidden_states=latents.to(self.dtype), encoder_hidden_states=cond["prompt_embeds"],
                               pooled_projections=cond["pooled"], timestep=(sigma * 1000).to(self.dtype),
                               return_dict=False)[0]
        return out.float()

    @torch.no_grad()
    def decode(self, latents):
        vae = self.pipe.vae
        if vae is None:
            return (latents.float() / 2 + 0.5).clamp(0, 1)
        lat = latents.to(vae.dtype) / vae.config.scaling_factor + (vae.config.shift_factor or 0.0)
        return (vae.decode(lat, return_dict=False)[0].float() / 2 + 0.5).clamp(0, 1)


def packed_latent_shape(family: str, f: int, cfg, in_channels: int, hint: str = "") -> tuple[int, int, int]:
    """``(C, h, w)`` of a denoiser that packs 2x2 latent patches (FLUX, Qwen-Image): ``in_channels / 4`` channels at
    the image size over the VAE factor ``f``; an odd latent side is refused with one line (``hint``: what to use)."""
    h, w = cfg.height // f, cfg.width // f
    if h % 2 or w % 2:
        raise ValueError(f"{family} packs 2x2 latent patches: latent size {h}x{w} (image {cfg.height}x{cfg.width}) "
                         f"must be even{hint}")
    return (in_channels // 4, h, w)


def unpack_latents(out: torch.Tensor, b: int, c: int, h: int, w: int) -> torch.Tensor:
    """Packed tokens ``[B, hw/4, 4C]`` (the first ``hw/4``) back to latents ``[B, C, h, w]``, float32."""
    return out[:, :h * w // 4].reshape(b, h // 2, w // 2, c, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w).float()


class FluxAdapter(DiffusionAdapter):
    """FLUX.1 (Black Forest Labs). Latents are kept unpacked ``[B, C, h, w]``; packing into 2x2 patches
    ``[B, hw/4, 4C]`` (and the positional ids) happens inside :meth:`velocity`, as ``FluxPipeline`` does."""

    kind = "flux"

    def _encode(self, prompts):
        pe, pooled, _ = self.pipe.encode_prompt(prompts, None, device=self.device,
                                                max_sequence_length=self.cfg.max_sequence_length)
        return {"prompt_embeds": pe, "pooled": pooled}

    @property
    def latent_shape(self):
        return packed_latent_shape("FLUX", _vae_factor(self.pipe.vae), self.cfg, self.transformer.config.in_channels)

    def velocity(self, latents, sigma, cond):
        from diffusers import FluxPipeline

        b, c, h, w = latents.shape
        packed = FluxPipeline._pack_latents(latents.to(self.dtype), b, c, h, w)
        img_ids = FluxPipeline._prepare_latent_image_ids(b, h // 2, w // 2, latents.device, self.dtype)
        return unpack_latents(self._denoise(packed, img_ids, sigma, cond, b), b, c, h, w)

    def _denoise(self, hidden: torch.Tensor, img_ids: torch.Tensor, sigma, cond, b: int) -> torch.Tensor:
        """The FLUX transformer on packed tokens ``hidden [B, N, 4C]`` at ``sigma [B]``: text ids, the guidance
        embedding (distilled-guidance checkpoints) and the prompt's conditioning; returns ``[B, N, 4C]``."""
        dev = hidden.device
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=dev).expand(b)
        txt_ids = torch.zeros(cond["prompt_embeds"].shape[1], 3, device=dev, dtype=self.dtype)
        guidance = None
        if self.transformer.config.guidance_embeds:
            guidance = torch.full((b,), self.cfg.guidance, device=dev, dtype=torch.float32)
        return self.transformer(hidden_states=hidden, timestep=sigma.to(self.dtype), guidance=guidance,
                                pooled_projections=cond["pooled"], encoder_hidden_states=cond["prompt_embeds"],
                                txt_ids=txt_ids, img_ids=img_ids, return_dict=False)[0]

    @torch.no_grad()
    def decode(self, latents):
        vae = self.pipe.vae
        lat = latents.to(vae.dtype) / vae.config.scaling_factor + (vae.config.shift_factor or 0.0)
        return (vae.decode(lat, return_dict=False)[0].float() / 2 + 0.5).clamp(0, 1)


class WanAdapter(DiffusionAdapter):
    """Wan2.1 text-to-video. Latents ``[B, z, f, h, w]`` with ``f = (F - 1) / 4 + 1``, ``h = H / 8``;
    :meth:`decode` returns frames ``[B, F, 3, H, W]``."""

    kind = "wan"

    def _encode(self, prompts):
        # WanPipeline._get_t5_prompt_embeds, minus ftfy text cleaning (an optional dependency): UMT5 states of the
        # real tokens, zero-padded to max_sequence_length
        tok = self.pipe.tokenizer
        L = self.cfg.max_sequence_length
        prompts = [" ".join(p.split()) for p in prompts]
        ti = tok(prompts, padding="max_length", max_length=L, truncation=True, add_special_tokens=True,
                 return_attention_mask=True, return_tensors="pt")
        mask = ti.attention_mask.to(self.device)
        emb = self.pipe.text_encoder(ti.input_ids.to(self.device), mask).last_hidden_state
        return {"prompt_embeds": emb * mask[..., None].to(emb.dtype)}

    @property
    def latent_shape(self):
        vae = self.pipe.vae
        ts, ss = vae.config.scale_factor_temporal, vae.config.scale_factor_spatial
        if (self.cfg.num_frames - 1) % ts:
            raise ValueError(f"Wan needs num_frames = {ts} k + 1, got {self.cfg.num_frames}")
        return (vae.config.z_dim, (self.cfg.num_frames - 1) // ts + 1, self.cfg.height // ss, self.cfg.width // ss)

    def velocity(self, latents, sigma, cond):
        sigma = torch.as_tensor(sigma, dtype=torch.float32, device=latents.device).expand(latents.shape[0])
        out = self.transformer(hidden_states=latents.to(self.dtype), timestep=(sigma * 1000).to(self.dtype),
                               encoder_hidden_states=cond["prompt_embeds"], return_dict=False)[0]
        return out.float()

    @torch.no_grad()
    def decode(self, latents):
        vae = self.pipe.vae
        mean = torch.tensor(vae.config.latents_mean, device="cpu").view(1, -1, 1, 1, 1).to(latents.device)
        std = torch.tensor(vae.config.latents_std, device="cpu").view(1, -1, 1, 1, 1).to(latents.device)
        video = vae.decode((latents.float() * std + mean).to(vae.dtype), return_dict=False)[0].float()
        return (video / 2 + 0.5).clamp(0, 1).permute(0, 2, 1, 3, 4)  # [B, 3, F, H, W] -> [B, F, 3, H, W]


ADAPTERS = {"sd3": SD3Adapter, "flux": FluxAdapter, "wan": WanAdapter}


def adapter_class(kind: str) -> type:
    """The built-in adapter of a model kind: the three above, or a later family's from its own module
    (``families.ADAPTER_PATHS``, loaded by import path: those modules import this one)."""
    from .families import ADAPTER_PATHS

    if kind in ADAPTERS:
        return ADAPTERS[kind]
    if kind in ADAPTER_PATHS:
        from grpo.plugins import load_object

        return load_object(ADAPTER_PATHS[kind], "model.kind")
    raise ValueError(f"unknown model kind {kind!r}; expected one of {sorted([*ADAPTERS, *ADAPTER_PATHS])}")


ASSETS = Path(__file__).resolve().parent / "assets"
SHAPES_ASSET = "shapes_sd3"  # the shipped colors-and-shapes demo model (diffusion-rl pretrain-shapes)


def resolve_model_path(path: str) -> Path:
    """``"builtin:<name>"`` names weights shipped in ``diffusion_rl/assets/<name>``; anything else is a path. A missing
    ``builtin:shapes_sd3`` names the command that rebuilds it."""
    from grpo.config import resolve_builtin

    try:
        return resolve_builtin(path, ASSETS, "model.path")
    except FileNotFoundError as e:
        if path != f"builtin:{SHAPES_ASSET}":
            raise
        raise FileNotFoundError(f"{e}; build it with `diffusion-rl pretrain-shapes --out {ASSETS / SHAPES_ASSET}` "
                                "(the three-stage recipe of diffusion_rl.pretrain_shapes)") from None


def load_pipeline(cfg: ModelConfig):
    """The diffusers pipeline for ``cfg``: tiny in code (``path=None``), a local directory, or a hub id."""
    import diffusers

    adapter_class(cfg.kind)  # an unknown kind: one error listing the known ones
    if cfg.path is None:
        from .tiny_models import TINY_BUILDERS

        return TINY_BUILDERS[cfg.kind](words=cfg.tiny_words, max_length=cfg.max_sequence_length, **cfg.tiny)
    from .checkpoints import check_pipeline_dir, dropped_components, is_single_file, load_single_file

    if is_single_file(cfg.path):  # one checkpoint file (+ model.components), diffusion_rl.checkpoints
        return load_single_file(cfg, DTYPES[cfg.dtype] if cfg.dtype != "fp32" else None)
    cls = getattr(diffusers, PIPELINES[cfg.kind])
    p = resolve_model_path(cfg.path)
    if cfg.pretrain == "shapes" and not (p / "model_index.json").is_file():
        raise FileNotFoundError(f"model.path={cfg.path!r}: no shapes demo model there; build it first with "
                                f"`diffusion-rl pretrain-shapes --out {p}` (a few minutes on 2 CPU cores)")
    looks_local = p.is_absolute() or cfg.path.startswith((".", "~",
                                                          "builtin:")) or p.exists() or cfg.path.count("/") != 1
    if looks_local and not (p / "model_index.json").is_file():
        raise FileNotFoundError(f"model.path={cfg.path!r}: no diffusers pipeline there (expected a directory with "
                                f"model_index.json, as written by {PIPELINES[cfg.kind]}.save_pretrained, or a hub id)")
    # components saved as None (a pixel-space model has no VAE) are passed as None again; a listed component whose
    # folder or weights are absent is one error naming it (diffusion_rl.checkpoints)
    missing = check_pipeline_dir(p, cls, cfg.kind, cfg.drop_t5) if looks_local \
        else dropped_components(cfg.kind, cfg.drop_t5)
    quiet = cfg.path.startswith("builtin:")  # a shipped demo model loads in a fraction of a second: no progress bar
    if quiet:
        diffusers.utils.logging.disable_progress_bar()
    try:
        return cls.from_pretrained(str(p) if looks_local else cfg.path,
                                   torch_dtype=DTYPES[cfg.dtype] if cfg.dtype != "fp32" else None,
                                   local_files_only=os.environ.get("HF_HUB_OFFLINE", "0") == "1", **missing)
    except (OSError, ValueError, EnvironmentError) as e:
        raise FileNotFoundError(f"could not load {PIPELINES[cfg.kind]} weights from {cfg.path!r}: {e}") from e
    finally:
        if quiet:
            diffusers.utils.logging.enable_progress_bar()


def build_adapter(cfg: ModelConfig, pipe=None) -> DiffusionAdapter:
    """Load (or take) the pipeline and wrap it; LoRA is added when ``cfg.lora.enabled``."""
    cls = adapter_class(cfg.kind)
    if cfg.adapter:  # a user's adapter (grpo.plugins): its own pipeline loader when it has one
        from grpo.plugins import DIFFUSION_ADAPTER, load_checked

        cls = load_checked(cfg.adapter, DIFFUSION_ADAPTER, "model.adapter", want_class=True)
        if pipe is None and callable(getattr(cls, "load_pipeline", None)):
            pipe = cls.load_pipeline(cfg)
    pipe = pipe if pipe is not None else load_pipeline(cfg)
    adapter = cls(pipe, cfg)
    if cfg.lora.enabled:
        adapter.add_lora(cfg.lora)
        if cfg.lora_init:
            from .lora_files import load_lora_init

            load_lora_init(adapter, cfg.lora_init)
    elif cfg.lora_init:
        raise ValueError(f"model.lora_init={cfg.lora_init!r} needs model.lora.enabled=true")
    return adapter
