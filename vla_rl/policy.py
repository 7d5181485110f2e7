"""The built-in small VLA for CPU, with LeRobot's policy interface.

Architecture (all small enough to train on 2 CPU cores)::

    images[B, 3, H, W] per camera --conv (3 x stride 2) + spatial softmax--> keypoints  [B, 2*C_img] per camera
    instruction (str)  --word-level tokenizer--> ids[B, L] --embedding, masked mean--> [B, E]
    state[B, D]        --(x - mu) / sigma--> [B, D]
    concat --MLP--> ctx[B, C]  --action head--> action chunk a[B, K, A]

Spatial softmax (Levine et al. 2016) turns each conv feature map into an expected (x, y) image coordinate,
which is what a reaching/pushing policy needs from pixels. The action head is the pi0-style flow-matching
expert or the Gaussian head of :mod:`vla_rl.action_head`.

Batches use LeRobot's keys: ``"observation.images.<camera>"`` float ``[B, 3, H, W]`` in [0, 1] (uint8 is
accepted), ``"observation.state"`` ``[B, D]``, ``"task"`` ``list[str]``, and for training ``"action"``
``[B, K, A]`` with ``"action_is_pad"`` ``[B, K]``. As in LeRobot, the caller puts a batch's tensors on the policy's
device (:func:`batch_to`; ``model.to(device)`` places the policy); the outputs are on that device, and noise drawn
from a CPU generator is drawn on the CPU and moved (:mod:`grpo.device`), so a seed samples the same on any device.
LeRobot's methods:

* ``select_action(batch) -> [B, A]``: pops the action queue, refilled with the first ``n_action_steps``
  actions of a freshly predicted chunk when empty;
* ``predict_action_chunk(batch) -> [B, K, A]`` (deterministic: ODE / Gaussian mean unless ``stochastic``);
* ``forward(batch) -> (loss, {"loss": float})``: the supervised loss (flow matching or MSE);
* ``reset()``: clears the queue (call at every episode start).

RL methods: ``sample_chunk(batch, stochastic=True)`` returns a :class:`~vla_rl.action_head.HeadSample` with
old log-probs; ``chunk_log_prob(batch, record)`` recomputes them under the current weights.

Mixed precision: :meth:`SmallVLA.set_mixed_precision` (``"bf16"``, from ``dist.mixed_precision``) runs the image
encoder, the fuse MLP and the action head's network under ``torch.autocast(bfloat16)`` in every call (sampling,
log-prob recomputation, the SFT loss); weights stay fp32 and the context / velocity outputs are cast to fp32.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from grpo.config import MAX_WIDTH, require_at_least, require_at_most

from .action_head import (
    FlowHeadConfig,
    FlowMatchingActionHead,
    GaussianActionHead,
    GaussianHeadConfig,
    HeadLogProb,
    HeadSample,
    autocast,
)
from .tokenizer import WordTokenizer

IMAGE_PREFIX = "observation.images."
ASSETS = Path(__file__).resolve().parent / "assets"  # built-in pretrained policies: ``builtin:<name>``
STATE_KEY = "observation.state"
MIXED_PRECISION = {"fp32": None, "bf16": torch.bfloat16}  # dist.mixed_precision -> autocast dtype


POLICY_KINDS = {"builtin": ("small_vla",), "lerobot": ("smolvla", "pi0", "pi05")}


def check_kind_type(kind: str, type_: str) -> None:
    """``policy.kind`` / ``policy.type`` name a policy class :func:`vla_rl.policies.make_policy` can build: a built-in
    kind, or ``package.module:Class`` (a user's policy, imported and checked against
    :data:`grpo.plugins.VLA_POLICY` here, when the config loads)."""
    if ":" in kind:
        from grpo.plugins import resolve_policy_class

        resolve_policy_class(kind)
        return
    if kind not in POLICY_KINDS:
        raise ValueError(f"policy.kind={kind!r}; expected one of {tuple(POLICY_KINDS)} or 'package.module:Class'")
    if type_ and type_ not in POLICY_KINDS[kind]:
        raise ValueError(f"policy.type={type_!r} is not a {kind} policy; expected one of {POLICY_KINDS[kind]}")
    if kind == "lerobot" and not type_:
        raise ValueError(f"policy.kind=lerobot needs policy.type, one of {POLICY_KINDS['lerobot']}")


@dataclass
class PolicyConfig:
    kind: str = "builtin"  # builtin (SmallVLA), lerobot (vla_rl.policies.lerobot) or package.module:Class (yours)
    type: str = ""  # builtin: small_vla (or empty); lerobot: smolvla, pi0 or pi05
    path: str | None = None  # lerobot: a LeRobot checkpoint directory to start from (None: a fresh policy)
    lerobot: dict[str, Any] = field(default_factory=dict)  # lerobot: overrides of LeRobot's policy config
                                                           # (vlm_model_name: tiny ...)
    head: Literal["flow", "gaussian"] = "flow"  # flow (pi0-style flow-matching action expert,
                                                # SDE log-probs) or gaussian
    cameras: list[str] = field(default_factory=lambda: ["agentview"])  # camera images the policy reads
    use_images: bool = True  # read camera images
    use_state: bool = True  # read the proprio state
    image_size: int = 64  # side of the square input images (pixels)
    conv_channels: list[int] = field(default_factory=lambda: [16, 32, 32])  # channels of the
        # conv image encoder's blocks
    text_dim: int = 32  # instruction word-embedding width
    max_text_len: int = 16  # instruction tokens kept
    ctx_dim: int = 128  # width of the fused observation context
    film: bool = False  # condition every conv block on the instruction (FiLM, as RT-1 does):
                        # language picks what to look at
    chunk_size: int = 4  # K actions per chunk
    n_action_steps: int = 4  # actions executed per chunk (<= chunk_size)
    state_dim: int = 0  # 0: taken from the environment
    action_dim: int = 0  # 0: taken from the environment
    flow: FlowHeadConfig = field(default_factory=FlowHeadConfig)  # the flow-matching head (head: flow)
    gaussian: GaussianHeadConfig = field(default_factory=GaussianHeadConfig)  # the Gaussian head (head: gaussian)

    def __post_init__(self) -> None:
        check_kind_type(self.kind, self.type)
        require_at_least("policy", self, text_dim=1, max_text_len=1, ctx_dim=1, state_dim=0, action_dim=0)
        require_at_most("policy", self, text_dim=MAX_WIDTH, max_text_len=MAX_WIDTH, ctx_dim=MAX_WIDTH,
                        state_dim=MAX_WIDTH, action_dim=MAX_WIDTH, chunk_size=MAX_WIDTH, conv_channels=MAX_WIDTH)
        if self.use_images and (not self.conv_channels or min(self.conv_channels) < 1):
            raise ValueError(f"policy.conv_channels must be a non-empty list of channel counts >= 1, got "
                             f"{self.conv_channels}")
        if not 1 <= self.n_action_steps <= self.chunk_size:
            raise ValueError(f"policy.n_action_steps={self.n_action_steps} must be in [1, "
                             f"chunk_size={self.chunk_size}]")
        if not (self.use_images or self.use_state):
            raise ValueError("policy needs at least one of use_images / use_state")
        if self.use_images and not self.cameras:
            raise ValueError("policy.use_images is set but policy.cameras is empty")
        dup = sorted({c for c in self.cameras if list(self.cameras).count(c) > 1})
        if dup:
            raise ValueError(f"policy.cameras names {dup} more than once (expected distinct cameras)")


class SpatialSoftmax(nn.Module):
    """``[B, C, H, W]`` feature maps -> ``[B, 2C]`` expected (x, y) coordinates in [-1, 1]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        att = F.softmax(x.reshape(b, c, h * w), dim=-1)
        ys = torch.linspace(-1, 1, h, device=x.device).repeat_interleave(w)
        xs = torch.linspace(-1, 1, w, device=x.device).repeat(h)
        return torch.cat([(att * xs).sum(-1), (att * ys).sum(-1)], dim=-1)


class ImageEncoder(nn.Module):
    """Small conv net: ``[B, 3, H, W]`` in [0, 1] -> ``[B, 2 * channels[-1]]`` keypoints + ``[B, C]`` pooled.

    With ``film_dim > 0`` every conv block is FiLM-conditioned on a ``[B, film_dim]`` instruction embedding
    (``h <- GroupNorm(conv(h)) * (1 + gamma) + beta``, zero-initialized so it starts as the plain encoder): the
    instruction can then select which object the spatial-softmax keypoints track ("the red ball")."""

    def __init__(self, channels: list[int], film_dim: int = 0):
        super().__init__()
        self.convs, self.norms = nn.ModuleList(), nn.ModuleList()
        c_in = 3
        for i, c in enumerate(channels):
            self.convs.append(nn.Conv2d(c_in, c, 3, stride=2 if i < len(channels) - 1 else 1, padding=1))
            self.norms.append(nn.GroupNorm(4, c))
            c_in = c
        self.film = nn.Linear(film_dim, 2 * sum(channels)) if film_dim > 0 else None
        if self.film is not None:
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)
        self.channels = list(channels)
        self.softmax = SpatialSoftmax()
        self.out_dim = 3 * c_in

    def feature_maps(self, images: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        h = images * 2 - 1
        film = None
        if self.film is not None and cond is not None:
            film = self.film(cond).split([c for c in self.channels for _ in (0, 1)], dim=-1)
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            h = norm(conv(h))
            if film is not None:
                h = h * (1 + film[2 * i][:, :, None, None]) + film[2 * i + 1][:, :, None, None]
            h = F.silu(h)
        return h

    def forward(self, images: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        f = self.feature_maps(images, cond)
        return torch.cat([self.softmax(f), f.mean(dim=(2, 3))], dim=-1)


def batch_to(batch: dict, device: torch.device | str) -> dict:
    """A LeRobot-style batch with its tensors on ``device`` (lists, e.g. ``"task"``, as they are)."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _images(batch: dict, key: str, size: int) -> torch.Tensor:
    if key not in batch:
        raise KeyError(f"batch has no {key!r}; keys: {sorted(k for k in batch if isinstance(k, str))}")
    x = batch[key]
    if x.dim() != 4:
        raise ValueError(f"{key} must be [B, 3, H, W] (or [B, H, W, 3] uint8), got {tuple(x.shape)}")
    if x.shape[-1] == 3 and x.shape[1] != 3:
        x = x.permute(0, 3, 1, 2)
    x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return x


class SmallVLA(nn.Module):
    """The built-in VLA (module docstring). ``tokenizer`` is built from the task instructions."""

    name = "small_vla"

    def __init__(self, cfg: PolicyConfig, tokenizer: WordTokenizer):
        super().__init__()
        if cfg.action_dim <= 0 or (cfg.use_state and cfg.state_dim <= 0):
            raise ValueError(f"policy needs action_dim > 0 and (with use_state) state_dim > 0; got "
                             f"action_dim={cfg.action_dim}, state_dim={cfg.state_dim}")
        self.cfg = cfg
        self.tokenizer = tokenizer
        d = 0
        if cfg.use_images:
            self.image_encoder = ImageEncoder(cfg.conv_channels, cfg.text_dim if cfg.film else 0)
            d += self.image_encoder.out_dim * len(cfg.cameras)
        self.text_embed = nn.Embedding(len(tokenizer), cfg.text_dim, padding_idx=0)
        d += cfg.text_dim
        if cfg.use_state:
            d += cfg.state_dim
            self.register_buffer("state_mean", torch.zeros(cfg.state_dim))
            self.register_buffer("state_std", torch.ones(cfg.state_dim))
        self.fuse = nn.Sequential(nn.Linear(d, cfg.ctx_dim), nn.SiLU(), nn.Linear(cfg.ctx_dim, cfg.ctx_dim), nn.SiLU())
        if cfg.head == "flow":
            self.head: FlowMatchingActionHead | GaussianActionHead = FlowMatchingActionHead(
                cfg.ctx_dim, cfg.action_dim, cfg.chunk_size, cfg.flow)
        else:
            self.head = GaussianActionHead(cfg.ctx_dim, cfg.action_dim, cfg.chunk_size, cfg.gaussian)
        self._queue: deque[torch.Tensor] = deque()
        self.autocast_dtype: torch.dtype | None = None

    def set_mixed_precision(self, mode: str) -> None:
        """``"bf16"``: network forwards under ``torch.autocast(bfloat16)`` (module docstring); ``"fp32"``: none.

        Not part of the saved config (a runtime setting, like the device); ``copy.deepcopy`` keeps it."""
        if mode not in MIXED_PRECISION:
            raise ValueError(f"mixed precision must be one of {tuple(MIXED_PRECISION)}, got {mode!r}")
        self.autocast_dtype = self.head.autocast_dtype = MIXED_PRECISION[mode]

    # ---- features ------------------------------------------------------------------------------
    def set_state_normalization(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        if self.cfg.use_state:
            self.state_mean.copy_(mean.float())
            self.state_std.copy_(std.float().clamp(min=1e-3))

    def text_features(self, tasks: list[str]) -> torch.Tensor:
        ids, mask = self.tokenizer(list(tasks), self.cfg.max_text_len, device=self.text_embed.weight.device)
        e = self.text_embed(ids) * mask[..., None]
        return e.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)

    def context(self, batch: dict) -> torch.Tensor:
        """Fused features ``ctx[B, ctx_dim]`` of a LeRobot-style batch on the policy's device (:func:`batch_to`)."""
        tasks = batch.get("task")
        first = IMAGE_PREFIX + self.cfg.cameras[0] if self.cfg.use_images else STATE_KEY
        n = batch[first].shape[0] if first in batch else -1
        if tasks is None or len(tasks) != n:
            raise ValueError(f"batch['task'] must be a list of {n} instructions, got {tasks!r:.80}")
        text = self.text_features(tasks)
        feats = []
        with autocast(self.autocast_dtype, text.device):  # a no-op context in fp32
            if self.cfg.use_images:
                for cam in self.cfg.cameras:
                    feats.append(self.image_encoder(_images(batch, IMAGE_PREFIX + cam, self.cfg.image_size),
                                                    text if self.cfg.film else None))
            feats.append(text)
            if self.cfg.use_state:
                s = batch[STATE_KEY].float()
                if s.shape[-1] != self.cfg.state_dim:
                    raise ValueError(f"observation.state has dim {s.shape[-1]}, policy expects "
                                     f"state_dim={self.cfg.state_dim}")
                feats.append((s - self.state_mean) / self.state_std)
            ctx = self.fuse(torch.cat(feats, dim=-1))
        return ctx.float()

    # ---- LeRobot interface ---------------------------------------------------------------------
    def reset(self) -> None:
        self._queue.clear()

    @torch.no_grad()
    def predict_action_chunk(self, batch: dict, stochastic: bool = False,
                             generator: torch.Generator | None = None) -> torch.Tensor:
        return self.head.sample(self.context(batch), stochastic=stochastic, generator=generator).actions

    @torch.no_grad()
    def select_action(self, batch: dict, stochastic: bool = False,
                      generator: torch.Generator | None = None) -> torch.Tensor:
        if not self._queue:
            chunk = self.predict_action_chunk(batch, stochastic, generator)  # [B, K, A]
            self._queue.extend(chunk[:, : self.cfg.n_action_steps].transpose(0, 1))
        return self._queue.popleft()

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        actions = batch["action"].float()
        if actions.dim() != 3 or actions.shape[1:] != (self.cfg.chunk_size, self.cfg.action_dim):
            raise ValueError(f"batch['action'] must be [B, {self.cfg.chunk_size}, {self.cfg.action_dim}], got "
                             f"{tuple(actions.shape)}")
        pad = batch.get("action_is_pad")
        loss = self.head.loss(self.context(batch), actions, None if pad is None else ~pad.bool())
        return loss, {"loss": float(loss.detach())}

    # ---- RL interface --------------------------------------------------------------------------
    @torch.no_grad()
    def sample_chunk(self, batch: dict, stochastic: bool = True,
                     generator: torch.Generator | None = None) -> HeadSample:
        return self.head.sample(self.context(batch), stochastic=stochastic, generator=generator)

    def chunk_log_prob(self, batch: dict, record: dict[str, torch.Tensor]) -> HeadLogProb:
        return self.head.log_prob(self.context(batch), record)

    @property
    def tokens_per_chunk(self) -> int:
        return self.head.tokens_per_chunk

    # ---- save / load ---------------------------------------------------------------------------
    def vocabulary(self) -> list[str]:
        """The word tokenizer's vocabulary (a trainer checkpoint stores it beside the weights)."""
        return self.tokenizer.vocab

    def set_vocabulary(self, words: list[str]) -> None:
        """A checkpoint's vocabulary back into the word tokenizer (the embedding is the weights')."""
        self.tokenizer = WordTokenizer(words)

    def save_pretrained(self, path: str | Path) -> Path:
        from safetensors.torch import save_file

        from grpo.config import config_to_dict

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path / "model.safetensors"))
        (path / "config.json").write_text(json.dumps({"policy": config_to_dict(self.cfg),
                                                      "vocab": self.tokenizer.vocab}))
        return path

    @classmethod
    def plan_passes(cls, cfg: PolicyConfig, instruction: str, rollout_rows: int, train_rows: int) -> dict[str, Any]:
        """What ``vla-rl train --plan`` traces of this policy on the meta device (:mod:`vla_rl.plan`, the policy
        protocol's planning hook): ``build() -> policy`` from ``cfg`` (dims resolved); the rollout pass
        ``rollout(policy, rollout_inputs(policy))`` (the fused context and one head call, no grad, for
        ``rollout_rows`` episodes at once); the training pass ``train(policy, train_inputs(policy))``
        (``chunk_log_prob`` of ``train_rows`` stored chunks + backward of ``-logp``); ``calls_per_step``, head calls
        per policy call (the flow steps); and a ``label``."""
        flow = cfg.head == "flow"
        steps = cfg.flow.num_steps if flow else 1

        def build() -> "SmallVLA":
            with torch.device("meta"):
                m = cls(cfg, WordTokenizer.build([" ".join(sorted(set(instruction.lower().split())))]))
            if flow:  # the flow head reads float(sigmas[1]) (Flow-GRPO's sigma_max): a value, not a shape, so give it
                from grpo.flow_sde import flow_sigmas  # from the schedule the head was built with

                kw = dict(kind=m.head.cfg.sde_kind, eta=m.head.cfg.eta,
                          sigma_max=float(flow_sigmas(m.head.cfg.num_steps)[1]), reduce=m.head.cfg.logprob_reduce)
                m.head._sde_kwargs = lambda: dict(kw)
            return m

        def batch(rows: int) -> dict:
            b: dict = {"task": [instruction] * rows}
            if cfg.use_images:
                for cam in cfg.cameras:
                    b[IMAGE_PREFIX + cam] = torch.rand(rows, 3, cfg.image_size, cfg.image_size)
            if cfg.use_state:
                b[STATE_KEY] = torch.randn(rows, cfg.state_dim)
            return b

        def rollout(pol: "SmallVLA", x: dict) -> None:
            ctx = pol.context(x["batch"])
            if flow:
                pol.head.velocity(x["a"], x["s"], ctx)
            else:
                pol.head.mean(ctx)

        def rollout_inputs(pol: "SmallVLA") -> dict:
            return {"batch": batch(rollout_rows), "a": torch.randn(rollout_rows, cfg.chunk_size, cfg.action_dim),
                    "s": torch.full((rollout_rows,), 0.5)}

        def train_inputs(pol: "SmallVLA") -> dict:
            rec = {"step_mask": torch.ones(train_rows, steps, dtype=torch.bool)}
            if flow:
                rec["chain"] = torch.randn(train_rows, steps + 1, cfg.chunk_size, cfg.action_dim)
            else:
                rec["actions"] = torch.randn(train_rows, cfg.chunk_size, cfg.action_dim)
            return {"batch": batch(train_rows), "record": rec}

        def train(pol: "SmallVLA", x: dict) -> None:
            pol.train()
            lp = pol.chunk_log_prob(x["batch"], x["record"]).logp
            (-lp.sum(1).mean()).backward()

        return dict(label=f"built-in SmallVLA ({cfg.head} head)", build=build, rollout=rollout,
                    rollout_inputs=rollout_inputs, train=train, train_inputs=train_inputs, calls_per_step=steps)

    @classmethod
    def from_pretrained(cls, path: str | Path, cfg: PolicyConfig | None = None) -> "SmallVLA":
        """Load a :meth:`save_pretrained` directory, or ``"builtin:<name>"`` (shipped in ``vla_rl/assets``).

        With ``cfg`` the model is built from ``cfg`` (e.g. a run's own flow-SDE settings and ``n_action_steps``)
        and only the weights, vocabulary and state normalization come from ``path``; a ``cfg`` whose
        architecture differs from the saved one (cameras, image size, chunk size, widths, dims) is an error
        naming the differing keys."""
        from safetensors.torch import load_file

        from grpo.config import config_diff, config_to_dict, resolve_builtin

        path = resolve_builtin(str(path), ASSETS, "policy path")
        if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
            raise FileNotFoundError(f"no SmallVLA at {path} (expected config.json + model.safetensors)")
        meta = json.loads((path / "config.json").read_text())
        saved = policy_config_from_dict(meta["policy"])
        if cfg is not None:
            arch = [d for d in config_diff(config_to_dict(saved), config_to_dict(cfg))
                    if not d.startswith(RUNTIME_KEYS)]
            if arch:
                raise ValueError(f"the policy at {path} has a different architecture than policy.* asks for: "
                                 f"{'; '.join(arch)}")
        model = cls(cfg or saved, WordTokenizer(meta["vocab"]))
        model.load_state_dict(load_file(str(path / "model.safetensors")))
        return model


# PolicyConfig keys that change how a trained model samples, not its weights: a run may set them freely
RUNTIME_KEYS = ("n_action_steps", "flow.num_steps", "flow.sde_kind", "flow.eta", "flow.noise_mode",
                "flow.logprob_reduce",
                "gaussian.init_std", "gaussian.min_std", "gaussian.max_std", "gaussian.logprob_reduce")


def policy_config_from_dict(d: dict) -> PolicyConfig:
    from grpo.config import _build  # typed construction, same checks as YAML configs

    return _build(PolicyConfig, d, "policy", "saved policy config")
