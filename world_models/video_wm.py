"""Action-conditioned, state-aware video world model: context frames + action chunk -> next frames + success.

    frames_next, success_logit = wm.predict(context[B, Tc, 3, H, W], actions[B, K, A])
    # state-aware head: + state=[B, K, D] (the state at each future frame), ref=[B, 3, H, W] (first real frame)

* **Frames**: a flow-matching video model over the ``K`` future frames, parameterized as the change from
  the last context frame, ``x_0 = 2 (future - last)`` (pixel space; the full recipes put a video VAE in
  front), so "nothing moves" is the zero sample and the model spends its capacity on motion. The denoiser is
  diffusers' ``WanTransformer3DModel`` (tiny config on CPU, Wan2.1-sized on GPUs). Conditioning, as image-to-video
  models do: the last context frame is concatenated to every noisy future frame along channels, and the
  cross-attention tokens are the action chunk (one token per step, a linear embedding) followed by tokens of the
  context frames (a strided conv). Trained with the rectified-flow objective (Lipman et al. 2023; Esser et al. 2024,
  Eq. 1-3)::

      x_s = (1 - s) x_0 + s eps,    L = E || v_theta(x_s, s, c) - (eps - x_0) ||^2

  or, by default (``prediction="x0"``), the same path with the network predicting ``x_0`` (``L = E ||
  x0_theta - x_0||^2``, ``v = (x_s - x0_theta) / s``), which a tiny CPU-sized denoiser learns much faster.

  and sampled with ``grpo.flow_sde.flow_chain`` (ODE by default; SDE when the model itself is RL-trained).
* **State**: a reward head on the frames and actions predicts, per future step, the logit of
  ``success`` (the task's own success test in the simulator). It is trained on successes, near-successes
  and failures so its success prediction is calibrated, and at inference it reads the *predicted* frames,
  so it is also trained on the model's own predicted frames (open-loop rollouts under recorded actions,
  labelled with the real episode's success; :func:`train_success_head` ``imagined=``).
  Frames alone bound it: open-loop frames blur the gripper, and on reach the frames-only head flags
  success in 61 % of the unsuccessful imagined episodes (threshold 0.7), which RL then exploits.
  **State-aware** (World-VLA-Loop; ``cfg.state_dim > 0``): the head also reads the simulator state at each
  frame ``state[B, K, D]`` -- in the env the state model's open-loop prediction, far more accurate than the
  pixels -- plus (``state_points``) grip-to-object distances and (``state_camera``) an instruction grounding:
  each object's colour in the episode's first real frame ``ref`` (through the camera projection) scored
  against the instruction, giving the expected distance to the *named* object (what it changes, measured:
  docs/RESULTS.md#world-model-parts-and-eva).

Shapes: frames are float ``[B, T, 3, H, W]`` in [0, 1] at the API; internally ``[B, 3, T, H, W]`` in [-1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from grpo.config import MAX_WIDTH, require_at_least, require_at_most
from grpo.device import module_device, rand, randint, randn
from grpo.flow_sde import flow_chain, flow_sigmas

from .windows import FrameBatch, FrameSamples, WindowBatch, WindowSet, instruction_features


@dataclass
class WorldModelConfig:
    image_size: int = 32  # frame side in pixels
    context_frames: int = 2  # past frames the model conditions on
    chunk: int = 4  # future frames per call = actions per call
    action_dim: int = 4  # action size
    hidden_heads: int = 2  # attention heads
    head_dim: int = 16  # width per attention head
    layers: int = 2  # transformer blocks
    ffn_dim: int = 64  # feed-forward width
    token_dim: int = 32  # patch-token width before the transformer
    patch: int = 4  # pixels per patch side
    sampling_steps: int = 8  # denoising steps per predicted chunk
    reward_channels: tuple[int, ...] = (16, 32)  # conv channels of the success head
    reward_pool: int = 4  # spatial grid the success head keeps (small objects: keep where things are)
    text_dim: int = 64  # hashed bag-of-words of the instruction for the success head (0: no instruction)
    prediction: Literal["x0", "velocity"] = "x0"  # what the transformer outputs: "x0" (the clean change) or "velocity"
    # state-aware success head: > 0 feeds the (predicted) simulator state at each future frame ``[B, K, state_dim]``
    # (proprio + object positions with ``object_state``) into the head next to the frames; 0: frames only
    state_dim: int = 0  # simulator-state size the success head reads (0: frames only)
    # offsets of xyz points in the state (first: the gripper); the state-aware head also reads the distances
    # from the first point to each other one (e.g. (0, 9, 12, 15): grip point to each reach ball)
    state_points: tuple[int, ...] = ()  # state indices of 3-D points whose distances the head reads
    # instruction grounding for the state-aware head: a pinhole camera (position xyz, image x axis xyz, image
    # y axis xyz, vertical fov in degrees: MuJoCo's ``pos``/``xyaxes``/``fovy``) that projects each object point
    # into the episode's first real frame (``ref``; later frames hide the target under the gripper); the head
    # reads each object's colour there, scores it against the instruction (softmax over objects) and reads the
    # expected grip-to-target distance. () = no grounding (and with one object, e.g. reach_one's (0, 9), where
    # the single grip-to-object distance is the target distance)
    state_camera: tuple[float, ...] = ()  # camera projection for the instruction grounding (empty: none)

    def __post_init__(self) -> None:
        require_at_least("wm", self, image_size=1, context_frames=1, chunk=1, action_dim=1, hidden_heads=1, head_dim=1,
                         layers=1, ffn_dim=1, token_dim=1, patch=1, sampling_steps=1, reward_pool=1, text_dim=0)
        require_at_most("wm", self, layers=256, hidden_heads=MAX_WIDTH, head_dim=MAX_WIDTH, ffn_dim=4 * MAX_WIDTH,
                        token_dim=MAX_WIDTH, text_dim=MAX_WIDTH, reward_channels=MAX_WIDTH, context_frames=1024,
                        chunk=1024, sampling_steps=10_000,  # (1e9 layers: the loop's models never built; a traceback)
                        state_dim=MAX_WIDTH,  # (1e9: the success head's input layer, the memory once built)
                        reward_pool=self.image_size)  # (the head's pooled grid: 1e9 asked 1e18 features)
        if not self.reward_channels or min(self.reward_channels) < 1:
            raise ValueError(f"wm.reward_channels must be a non-empty list of channel counts >= 1, got "
                             f"{list(self.reward_channels)}")
        if self.image_size % self.patch:
            raise ValueError(f"image_size {self.image_size} must be divisible by patch {self.patch}")
        if self.state_dim < 0:
            raise ValueError(f"state_dim must be >= 0 (0: frames-only success head), got {self.state_dim}")
        self.state_points = tuple(int(p) for p in self.state_points)
        if self.state_points and (len(self.state_points) < 2 or not self.state_dim
                                  or any(p < 0 or p + 3 > self.state_dim for p in self.state_points)):
            raise ValueError(f"state_points {self.state_points} must be >= 2 offsets of xyz points within "
                             f"state_dim={self.state_dim}")
        self.state_camera = tuple(float(c) for c in self.state_camera)
        if self.state_camera and (len(self.state_camera) != 10 or len(self.state_points) < 2):
            raise ValueError(f"state_camera needs 10 numbers (pos xyz, x axis xyz, y axis xyz, fovy) and state_points, "
                             f"got {len(self.state_camera)} numbers, state_points={self.state_points}")
        if self.state_camera and len(self.state_points) == 2:  # one object: nothing to pick between
            raise ValueError("state_camera grounds the instruction among >= 2 objects, "
                             f"state_points={self.state_points} "
                             "names one (the grip-to-object distance already is the target distance): leave "
                             "state_camera empty")
        if self.context_frames < 1 or self.chunk < 1:
            raise ValueError(f"need context_frames >= 1 and chunk >= 1, got {self.context_frames}, {self.chunk}")


class SuccessHead(nn.Module):
    """``frames[B, K, 3, H, W]`` in [-1, 1], ``actions[B, K, A]`` (+ instruction features ``[B, text_dim]``;
    + with ``cfg.state_dim > 0`` the state at each frame ``state[B, K, state_dim]``) -> success logits ``[B, K]``.

    The state is standardized with buffers ``state_mean`` / ``state_std`` (:meth:`fit_state_stats`, fit once on
    the training states; saved with ``state_dict``) and concatenated to the MLP input next to the frame features
    (with ``state_points`` also the grip-to-object distances). With ``state_camera`` the head also grounds the
    instruction: ``ref[B, 3, H, W]`` in [-1, 1] (the episode's first real frame) gives each object's colour,
    :meth:`ground_logits` scores it against the instruction, and the expected grip-to-target distance joins
    the MLP input (:meth:`grounding`)."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        layers, c_in = [], 3
        for c in cfg.reward_channels:
            layers += [nn.Conv2d(c_in, c, 4, stride=2, padding=1), nn.SiLU()]
            c_in = c
        self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(cfg.reward_pool), nn.Flatten())
        self.text_dim = cfg.text_dim
        self.state_dim = cfg.state_dim
        self.points = tuple(cfg.state_points)
        feat = cfg.state_dim + max(len(self.points) - 1, 0)  # the state + point distances
        if self.state_dim:
            self.register_buffer("state_mean", torch.zeros(feat))
            self.register_buffer("state_std", torch.ones(feat))
            self.register_buffer("state_fitted", torch.zeros(()))  # 1 once fit_state_stats ran
        n_ground = 0
        if cfg.state_camera:  # camera frame: rows x, y, z (z = x cross y; the camera looks along -z)
            c = torch.tensor(cfg.state_camera, dtype=torch.float32)
            x_ax, y_ax = F.normalize(c[3:6], dim=0), F.normalize(c[6:9], dim=0)
            self.register_buffer("cam_pos", c[:3].clone())
            self.register_buffer("cam_rot", torch.stack([x_ax, y_ax, torch.linalg.cross(x_ax, y_ax)]))
            self.cam_f = 0.5 / float(torch.tan(torch.deg2rad(c[9]) / 2))
            self.ground = nn.Sequential(nn.Linear(3 + cfg.text_dim, 32), nn.SiLU(), nn.Linear(32, 1))
            n_ground = 5
        self.mlp = nn.Sequential(nn.Linear(c_in * cfg.reward_pool ** 2 + cfg.action_dim + cfg.text_dim
                                           + (feat + n_ground if self.state_dim else 0), 128), nn.SiLU(),
                                 nn.Linear(128, 1))

    def point_offsets(self, state: torch.Tensor) -> torch.Tensor:
        """``state[..., state_dim]`` -> each object point minus the grip point (``state_points[1:]`` minus
        ``state_points[0]``), ``[..., P, 3]``."""
        p0 = state[..., self.points[0]:self.points[0] + 3]
        return torch.stack([state[..., q:q + 3] for q in self.points[1:]], dim=-2) - p0.unsqueeze(-2)

    def object_colours(self, frames: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Colour of each object point (``state_points[1:]``) where the camera sees it: ``frames[N, 3, H, W]``
        in [-1, 1], ``state[N, state_dim]`` -> ``[N, P, 3]`` (mean of 5 bilinear samples around the projection)."""
        pts = torch.stack([state[:, p:p + 3] for p in self.points[1:]], dim=1)  # [N, P, 3]
        d = (pts - self.cam_pos) @ self.cam_rot.T
        depth = (-d[..., 2]).clamp_min(1e-3)
        uv = torch.stack([d[..., 0], -d[..., 1]], dim=-1) * (2 * self.cam_f) / depth[..., None]  # [-1, 1] grid coords
        h = frames.shape[-1]
        offs = torch.tensor([[0.0, 0.0], [1, 0], [-1, 0], [0, 1], [0, -1]], device=frames.device) * (2.0 / h)
        grid = uv[:, :, None, :] + offs  # [N, P, 5, 2]
        col = F.grid_sample(frames.float(), grid, mode="bilinear", padding_mode="border", align_corners=False)
        return col.mean(-1).transpose(1, 2)  # [N, P, 3]

    def ground_logits(self, ref: torch.Tensor, state: torch.Tensor, text: torch.Tensor | None) -> torch.Tensor:
        """Which object the instruction names: ``ref[N, 3, H, W]`` in [-1, 1] (the episode's first real frame),
        ``state[N, state_dim]``, ``text[N, text_dim]`` -> logits over the objects ``[N, P]`` (``g(colour_i, text)``)."""
        col = self.object_colours(ref, state)
        n, p = col.shape[:2]
        t = torch.zeros(n, self.text_dim, device=col.device) if text is None else text.float()
        return self.ground(torch.cat([col, t[:, None].expand(-1, p, -1)], dim=-1)).squeeze(-1)

    def grounding(self, ref: torch.Tensor, state: torch.Tensor, text: torch.Tensor | None) -> torch.Tensor:
        """``w = softmax(ground_logits)``; returns ``[N, 5]``: the expected grip-to-target distance and offset
        (``sum_i w_i (p_i - p_0)``, in 5 cm units) and ``max w``."""
        w = torch.softmax(self.ground_logits(ref, state, text), dim=-1)
        rel = self.point_offsets(state)  # [N, P, 3]
        dist = (w * rel.norm(dim=-1)).sum(-1, keepdim=True)
        return torch.cat([dist, (w[..., None] * rel).sum(1), w.max(-1, keepdim=True).values], dim=-1) / torch.tensor(
            [0.05, 0.05, 0.05, 0.05, 1.0], device=dist.device)

    def state_features(self, state: torch.Tensor) -> torch.Tensor:
        """``state[..., state_dim]`` -> the state followed by the ``state_points`` distances (unnormalized)."""
        if len(self.points) < 2:
            return state
        return torch.cat([state, self.point_offsets(state).norm(dim=-1)], dim=-1)

    @torch.no_grad()
    def fit_state_stats(self, state: torch.Tensor, force: bool = False) -> None:
        """Fit the state normalizer on ``state[..., state_dim]`` (once: later calls are no-ops unless ``force``)."""
        if not self.state_dim:
            return
        if state is None or state.shape[-1] != self.state_dim:
            raise ValueError(f"state must be [..., {self.state_dim}], got "
                             f"{None if state is None else tuple(state.shape)}")
        if bool(self.state_fitted) and not force:
            return
        s = self.state_features(state.reshape(-1, self.state_dim).float().to(self.state_mean.device))
        self.state_mean.copy_(s.mean(0))
        self.state_std.copy_(s.std(0).clamp_min(1e-3) if s.shape[0] > 1 else torch.ones_like(self.state_std))
        self.state_fitted.fill_(1.0)

    def _check_state(self, state: torch.Tensor | None, b: int, k: int, ref: torch.Tensor | None = None,
                     frame_shape: tuple[int, ...] = ()) -> torch.Tensor:
        """The state-aware inputs: ``state[B, K, state_dim]`` and, for a grounding head, ``ref[B, *frame_shape]``."""
        if state is None:
            raise ValueError(f"this success head is state-aware (state_dim={self.state_dim}): pass state "
                             f"[B={b}, K={k}, {self.state_dim}] (the state at each frame)")
        if state.dim() != 3 or tuple(state.shape) != (b, k, self.state_dim):
            raise ValueError(f"state must be [B={b}, K={k}, {self.state_dim}], got {tuple(state.shape)}")
        if hasattr(self, "ground") and (ref is None or tuple(ref.shape) != (b, *frame_shape)):
            raise ValueError(f"a grounding success head (state_camera) needs ref [B={b}, "
                             f"{', '.join(map(str, frame_shape))}] (the episode's first real frame), got "
                             f"{None if ref is None else tuple(ref.shape)}")
        return state.float()

    def forward(self, frames: torch.Tensor, actions: torch.Tensor, text: torch.Tensor | None = None,
                state: torch.Tensor | None = None, ref: torch.Tensor | None = None) -> torch.Tensor:
        b, k = frames.shape[:2]
        f = self.conv(frames.flatten(0, 1)).reshape(b, k, -1)
        parts = [f, actions.float()]
        if self.text_dim:
            t = torch.zeros(b, self.text_dim, device=f.device) if text is None else text.float()
            parts.append(t[:, None].expand(-1, k, -1))
        if self.state_dim:
            st = self._check_state(state, b, k, ref, tuple(frames.shape[2:]))
            parts.append((self.state_features(st) - self.state_mean) / self.state_std)
            if hasattr(self, "ground"):
                t = None if not self.text_dim or text is None else text.float().repeat_interleave(k, 0)
                parts.append(self.grounding(ref.float().repeat_interleave(k, 0), st.flatten(0, 1), t).reshape(b, k, -1))
        return self.mlp(torch.cat(parts, dim=-1)).squeeze(-1)


class VideoWorldModel(nn.Module):
    def __init__(self, cfg: WorldModelConfig | None = None, transformer: nn.Module | None = None):
        super().__init__()
        from diffusers import WanTransformer3DModel

        self.cfg = cfg = cfg or WorldModelConfig()
        self.transformer = transformer or WanTransformer3DModel(
            patch_size=(1, cfg.patch, cfg.patch), num_attention_heads=cfg.hidden_heads, attention_head_dim=cfg.head_dim,
            in_channels=6, out_channels=3, text_dim=cfg.token_dim, freq_dim=32, ffn_dim=cfg.ffn_dim,
            num_layers=cfg.layers, rope_max_seq_len=64)
        self.action_tokens = nn.Linear(cfg.action_dim, cfg.token_dim)
        self.frame_tokens = nn.Conv2d(3, cfg.token_dim, cfg.patch * 2, stride=cfg.patch * 2)
        self.success_head = SuccessHead(cfg)

    # ---- conditioning ---------------------------------------------------------------------
    def _check(self, context: torch.Tensor, actions: torch.Tensor) -> None:
        c = self.cfg
        if context.dim() != 5 or context.shape[1] != c.context_frames or context.shape[-1] != c.image_size:
            raise ValueError(f"context must be [B, {c.context_frames}, 3, {c.image_size}, {c.image_size}], "
                             f"got {tuple(context.shape)}")
        if actions.shape[1:] != (c.chunk, c.action_dim):
            raise ValueError(f"actions must be [B, {c.chunk}, {c.action_dim}], got {tuple(actions.shape)}")

    def _tokens(self, context: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        b = context.shape[0]
        ft = self.frame_tokens(context.flatten(0, 1)).flatten(2).transpose(1, 2)  # [B*Tc, n, D]
        ft = ft.reshape(b, -1, ft.shape[-1])
        return torch.cat([self.action_tokens(actions.float()), ft], dim=1)

    def net(self, x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor, actions: torch.Tensor,
            tokens: torch.Tensor | None = None) -> torch.Tensor:
        """The transformer's raw output for ``x[B, 3, K, H, W]`` at noise level ``sigma[B]`` (x0 or velocity)."""
        last = context[:, -1][:, :, None].expand(-1, -1, x.shape[2], -1, -1)  # [B, 3, K, H, W]
        tokens = self._tokens(context, actions) if tokens is None else tokens
        return self.transformer(hidden_states=torch.cat([x, last], dim=1), timestep=sigma * 1000,
                                encoder_hidden_states=tokens, return_dict=False)[0]

    def velocity(self, x: torch.Tensor, sigma: torch.Tensor, context: torch.Tensor, actions: torch.Tensor,
                 tokens: torch.Tensor | None = None) -> torch.Tensor:
        """``x[B, 3, K, H, W]`` (noisy future frames, [-1,1] scale), ``sigma[B]`` -> velocity, same shape.

        With ``prediction="x0"`` the transformer predicts the clean sample and ``v = (x - x0_hat) / sigma``:
        a small denoiser then only has to produce the (mostly zero) change, not copy the noise through
        its patch bottleneck, which is what limits a tiny velocity-predicting model on CPU."""
        out = self.net(x, sigma, context, actions, tokens)
        if self.cfg.prediction == "velocity":
            return out
        return (x - out) / sigma.float().clamp_min(1e-3).view(-1, 1, 1, 1, 1)

    # ---- training ------------------------------------------------------------------------
    def text_features(self, text) -> torch.Tensor | None:
        """Instructions (list of str) or ready features ``[B, text_dim]`` -> features (None stays None)."""
        if text is None:
            return None
        if isinstance(text, torch.Tensor):
            return text.to(self.device)
        return instruction_features(list(text), self.cfg.text_dim).to(self.device)

    @property
    def device(self) -> torch.device:
        """Where the model's parameters are: its public methods take inputs on any device and move them here;
        outputs stay here."""
        return module_device(self)

    def _to_device(self, *tensors: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        dev = self.device
        return tuple(None if t is None else t.to(dev) for t in tensors)

    def loss(self, context: torch.Tensor, actions: torch.Tensor, future: torch.Tensor, success: torch.Tensor,
             generator: torch.Generator | None = None, success_weight: float = 0.5, text=None,
             state: torch.Tensor | None = None, ref: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Flow-matching loss on ``future[B, K, 3, H, W]`` in [0,1] + BCE of the success head vs ``success[B, K]``
        (``state[B, K, state_dim]``: the state at each future frame, required when ``cfg.state_dim > 0``;
        ``ref[B, 3, H, W]`` in [0, 1]: the episode's first real frame, required with ``cfg.state_camera``)."""
        self._check(context, actions)
        context, actions, future, success, state, ref = self._to_device(context, actions, future, success, state, ref)
        ctx = context * 2 - 1
        x0 = (2 * (future - context[:, -1:])).permute(0, 2, 1, 3, 4)  # [B, 3, K, H, W], change from last frame
        b = x0.shape[0]
        eps = randn(x0.shape, generator, x0.device)
        s = rand((b,), generator, x0.device)
        xs = (1 - s.view(-1, 1, 1, 1, 1)) * x0 + s.view(-1, 1, 1, 1, 1) * eps
        out = self.net(xs, s, ctx, actions)
        fm = F.mse_loss(out, eps - x0 if self.cfg.prediction == "velocity" else x0)
        logits = self.success_head(future * 2 - 1, actions, self.text_features(text), state,
                                   None if ref is None else ref * 2 - 1)
        bce = F.binary_cross_entropy_with_logits(logits, success.float())
        return {"loss": fm + success_weight * bce, "flow": fm.detach(), "success_bce": bce.detach()}

    # ---- inference -----------------------------------------------------------------------
    @torch.no_grad()
    def sample_frames(self, context: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None,
                      steps: int | None = None, sde: str = "ode", eta: float = 0.0, noise: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """Future frames ``[B, K, 3, H, W]`` in [0, 1] of ``actions[B, K, A]`` after ``context[B, Tc, 3, H, W]``
        (flow-matching sampling, ``steps`` Euler steps of kind ``sde``); no success head.
        ``noise[B, 3, K, H, W]``: the initial noise (default: drawn from ``generator``), so rows drawn from separate
        generators can be predicted in one batch."""
        self._check(context, actions)
        c = self.cfg
        context, actions, noise = self._to_device(context, actions, noise)
        ctx = context.float() * 2 - 1
        b = ctx.shape[0]
        tokens = self._tokens(ctx, actions)
        shape = (b, 3, c.chunk, c.image_size, c.image_size)
        if noise is not None and tuple(noise.shape) != shape:
            raise ValueError(f"noise must be {list(shape)}, got {list(noise.shape)}")
        x = randn(shape, generator, ctx.device) if noise is None else noise.float()
        sig = flow_sigmas(steps or c.sampling_steps, device=ctx.device)
        # zero-variance steps draw nothing: a generator serves the initial noise only, so ``noise`` can stand in for it
        x, _ = flow_chain(lambda i, z: self.velocity(z, sig[i].expand(b), ctx, actions, tokens), x, sig,
                          kind=sde, eta=eta, generator=generator, keep=False)  # type: ignore[arg-type]
        return (context[:, -1:].float() + x.permute(0, 2, 1, 3, 4) / 2).clamp(0, 1)

    @torch.no_grad()
    def predict(self, context: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None,
                steps: int | None = None, sde: str = "ode", eta: float = 0.0, text=None,
                state: torch.Tensor | None = None, ref: torch.Tensor | None = None, noise: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`sample_frames` and the success logits ``[B, K]`` read from the predicted frames and, with
        ``cfg.state_dim > 0``, from ``state[B, K, state_dim]``, the (predicted) state at each future frame (with
        ``cfg.state_camera`` also ``ref[B, 3, H, W]`` in [0, 1], the episode's first real frame)."""
        self._check(context, actions)
        c = self.cfg
        if c.state_dim:  # fail before the sampling loop, not after it
            self.success_head._check_state(state, context.shape[0], c.chunk, ref, (3, c.image_size, c.image_size))
        frames = self.sample_frames(context, actions, generator, steps, sde, eta, noise)
        actions, state, ref = self._to_device(actions, state, ref)
        return frames, self.success_head(frames * 2 - 1, actions, self.text_features(text), state,
                                         None if ref is None else ref.float() * 2 - 1)


def window_dataset(videos: torch.Tensor, actions: torch.Tensor, success: torch.Tensor, cfg: WorldModelConfig
                   ) -> WindowBatch:
    """Cut trajectories into (context, action chunk, future, success) training windows (no first-frame padding).

    ``videos[N, T, 3, H, W]`` (frame ``t`` is the observation before action ``t``), ``actions[N, T-1, A]``,
    ``success[N, T]`` (the simulator's success flag at each frame). Returns a :class:`WindowBatch` (start-major).
    """
    n, t = videos.shape[:2]
    if actions.shape[:2] != (n, t - 1) or success.shape != (n, t):
        raise ValueError(f"expected actions [N={n}, T-1={t - 1}, A] and success [N, T={t}], got "
                         f"{tuple(actions.shape)}, {tuple(success.shape)}")
    tc, k = cfg.context_frames, cfg.chunk
    ctx, act, fut, suc = [], [], [], []
    for start in range(0, t - tc - k + 1):
        ctx.append(videos[:, start:start + tc])
        act.append(actions[:, start + tc - 1:start + tc - 1 + k])
        fut.append(videos[:, start + tc:start + tc + k])
        suc.append(success[:, start + tc:start + tc + k])
    if not ctx:
        raise ValueError(f"trajectories of {t} frames are too short for {tc} context + {k} future frames")
    return WindowBatch(torch.cat(ctx), torch.cat(act), torch.cat(fut), torch.cat(suc))


def train_world_model(wm: VideoWorldModel, data: WindowBatch | WindowSet, steps: int, batch: int = 16,
                      lr: float = 1e-3, seed: int = 0) -> list[float]:
    """Adam on random windows of ``data``: a :class:`~world_models.windows.WindowSet` (cut per batch) or a
    :class:`~world_models.windows.WindowBatch` (``wm_windows(...)`` / :func:`window_dataset`); the two give the same
    batches. A state-aware head needs the windows' ``state`` (its normalizer is fit on them the first time), a
    grounding head their ``ref``. Returns the loss curve."""
    n = len(data)
    state = data.future_states()
    if wm.cfg.state_dim and state is not None:
        wm.success_head.fit_state_stats(state)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(wm.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    wm.train()
    for _ in range(steps):
        idx = torch.randint(n, (min(batch, n),), generator=gen, device="cpu")
        w = data.take(idx)
        out = wm.loss(w.context, w.actions, w.future, w.success, generator=gen, text=w.text, state=w.state, ref=w.ref)
        opt.zero_grad()
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(wm.parameters(), 1.0)
        opt.step()
        losses.append(float(out["loss"].detach()))
    wm.eval()
    return losses


@torch.no_grad()
def world_model_metrics(wm: VideoWorldModel, data: WindowBatch | WindowSet, seed: int = 0,
                        batch: int = 64) -> dict[str, float]:
    """Held-out frame MSE vs the real simulator under the same actions (and of the copy-last-frame baseline), and
    success agreement (accuracy); ``batch`` windows per model call, windows as for :func:`train_world_model`."""
    gen = torch.Generator().manual_seed(seed)
    n = len(data)
    sq = copy_sq = agree = 0.0
    n_values = n_flags = 0
    for i in range(0, n, batch):  # inputs stay in CPU RAM; batches go to the model
        w = data.take(torch.arange(i, min(i + batch, n), device="cpu"))
        ctx, fut, suc = w.context, w.future, w.success
        p, lg = wm.predict(ctx, w.actions, generator=gen, text=w.text, state=w.state, ref=w.ref)
        sq += float(((p.cpu() - fut) ** 2).sum())
        copy_sq += float(((ctx[:, -1:].expand_as(fut) - fut) ** 2).sum())
        agree += float(((lg.cpu() > 0) == (suc > 0.5)).sum())
        n_values, n_flags = n_values + fut.numel(), n_flags + suc.numel()
    return {
        "frame_mse": sq / n_values,
        "copy_last_frame_mse": copy_sq / n_values,  # baseline: predict no motion
        "success_agreement": agree / n_flags,
    }


def _augment_frames(x: torch.Tensor, gen: torch.Generator, shift: int = 2, flip: bool = True) -> torch.Tensor:
    """Label-preserving augmentation of ``x[B, 3, H, W]`` for the success head: a random horizontal flip
    (``flip``) and a random translation of up to ``shift`` pixels (edge-replicated), both of which keep the
    gripper-object relation that decides success. A state-aware head trains without the flip: a mirrored
    image no longer matches the x coordinates in its state."""
    b, _, h, w = x.shape
    if flip:
        f = rand((b,), gen, x.device) < 0.5
        x = torch.where(f.view(-1, 1, 1, 1), x.flip(-1), x)
    pad = F.pad(x, (shift,) * 4, mode="replicate")
    dy, dx = randint(0, 2 * shift + 1, (2, b), gen, x.device)
    rows = (dy.view(-1, 1) + torch.arange(h, device=x.device)).view(b, 1, h, 1).expand(-1, 3, -1, w + 2 * shift)
    x = pad.gather(2, rows)
    cols = (dx.view(-1, 1) + torch.arange(w, device=x.device)).view(b, 1, 1, w).expand(-1, 3, h, -1)
    return x.gather(3, cols)


def train_success_head(wm: VideoWorldModel, data: WindowBatch | WindowSet, steps: int, batch: int = 64,
                       lr: float = 1e-3, seed: int = 0, balance: bool = True,
                       imagined: FrameBatch | FrameSamples | None = None, imagined_fraction: float = 0.5,
                       augment: bool = False, ground_weight: float = 1.0) -> list[float]:
    """Extra training of the success head alone (the rest of ``wm`` is untouched).

    ``data``: windows as for :func:`train_world_model`; the head is trained on their *real* future frames
    (``data.frame_samples()``). ``imagined``: optional per-frame samples of the world model's *own* predicted
    frames (a :class:`~world_models.windows.FrameBatch`, e.g. from :func:`~world_models.windows.success_samples`, or
    a :class:`~world_models.windows.FrameSamples`), labelled with the real episode's success at that step
    (``world_models.fit.imagined_success_samples``).
    At inference (the world-model env) the head only ever sees predicted frames, which are blurrier and
    drift from the real ones, so a head fit on real frames alone is near chance there; each batch then
    holds ``round(imagined_fraction * batch)`` imagined samples and the rest real ones, and the loss is

        L = mean_i w_i BCE(head(frame_i, a_i, text_i), y_i),    w_i = (#neg / #pos of i's source) if y_i else 1

    (``balance``: positives weighted by the negative/positive ratio of their own source, real or imagined,
    so a rare success is not ignored and the env's reward does not say "never"). ``augment``: each frame
    is randomly flipped left-right and shifted by up to 2 pixels (:func:`_augment_frames`), which keeps
    the gripper-object relation that decides success and keeps the head from memorizing the training
    episodes' layouts.

    State-aware head (``wm.cfg.state_dim > 0``): the windows' ``state`` holds the real future states ``[N, K, D]``
    (``wm_windows(state=True)``) and the imagined samples' ``state`` the state at each imagined frame ``[M, D]`` --
    the state model's *open-loop prediction* under the recorded actions, what the env feeds the head at inference;
    the head's state normalizer is fit on the real states (once); ``augment`` then only shifts (no flip: a
    mirrored frame would contradict the x coordinates of its state).

    Grounding head (``wm.cfg.state_camera``): ``ref`` of both holds the episodes' first real frames, and on every
    successful sample the grounding logits also get a cross-entropy towards the object nearest to the grip point
    (success = the grip point at the named object), weight ``ground_weight``. Returns the loss curve."""
    head = wm.success_head
    sd = wm.cfg.state_dim
    grounding = bool(sd and wm.cfg.state_camera)
    first = torch.zeros(1, dtype=torch.long, device="cpu")
    probe = data.take(first)
    if (sd and probe.state is None) or (grounding and probe.ref is None):
        raise ValueError(f"the success head is state-aware (state_dim={sd}): data needs the future states "
                         f"[N, K, {sd}] (state)" + (" and the first real frames [N, 3, H, W] (ref)" if grounding
                                                    else "") + " (wm_windows(..., state=True) / WindowSet(state=True))")
    sources = [data.frame_samples()]  # per-frame samples in success_samples' order (a WindowSet cuts them on the fly)
    if sd:
        head.fit_state_stats(data.future_states())
    if imagined is not None:
        if not 0.0 <= imagined_fraction <= 1.0:
            raise ValueError(f"imagined_fraction must be in [0, 1], got {imagined_fraction}")
        got = imagined.take(first) if len(imagined) else None
        if got is None or got.frames.dim() != 4 or (sd and got.state is None) or (grounding and got.ref is None):
            raise ValueError("imagined must be samples (FrameBatch / FrameSamples) with frames [M, 3, H, W], actions "
                             "[M, A], labels [M], text [M, D] or None" + (f", state [M, {sd}]" if sd else "")
                             + (", ref [M, 3, H, W]" if grounding else ""))
        sources.append(imagined)
    fractions = [1.0] if imagined is None else [1.0 - imagined_fraction, imagined_fraction]
    counts = [int(round(f * batch)) for f in fractions]
    counts[0] = batch - sum(counts[1:])
    pws = []
    for src in sources:
        y = src.labels
        pos = float(y.sum())
        pws.append((y.numel() - pos) / max(pos, 1.0) if balance else 1.0)
    gen = torch.Generator().manual_seed(seed)  # batches are drawn and augmented on the CPU, then moved to the model
    dev = wm.device
    opt = torch.optim.Adam(wm.success_head.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        fr, ac, ys, tx, st, rf, ws = [], [], [], [], [], [], []
        for src, n, pw in zip(sources, counts, pws):
            if n <= 0:
                continue
            i = torch.randint(src.labels.numel(), (n,), generator=gen, device="cpu")
            rows = src.take(i)
            y = rows.labels
            fr.append(rows.frames), ac.append(rows.actions), ys.append(y), ws.append(1.0 + (pw - 1.0) * y)
            if rows.text is not None:
                tx.append(rows.text)
            if sd:
                st.append(rows.state)
            if grounding:
                rf.append(rows.ref)
        text = torch.cat(tx) if tx and len(tx) == len(fr) else None
        y = torch.cat(ys)
        x = torch.cat(fr).float()
        if augment:
            x = _augment_frames(x, gen, flip=not sd)
        state = torch.cat(st).to(dev) if sd else None
        ref = torch.cat(rf).to(dev).float() * 2 - 1 if grounding else None
        x, y, text = x.to(dev), y.to(dev), None if text is None else text.to(dev)
        logits = head(x[:, None] * 2 - 1, torch.cat(ac).to(dev)[:, None], text,
                      None if state is None else state[:, None],
                      ref)[:, 0]
        loss = F.binary_cross_entropy_with_logits(logits, y, weight=torch.cat(ws).to(dev))
        pos = y > 0.5
        if grounding and ground_weight > 0 and pos.any():  # the named object is the one the grip point is at
            near = head.point_offsets(state[pos]).norm(dim=-1).argmin(-1)
            gl = head.ground_logits(ref[pos], state[pos], None if text is None else text[pos])
            loss = loss + ground_weight * F.cross_entropy(gl, near)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    wm.eval()
    return losses
