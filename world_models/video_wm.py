"""Action-conditioned, state-aware video world model: context frames + action chunk -> next frames + success.

    frames_next, success_logit = wm.predict(context[B, Tc, 3, H, W], actions[B, K, A])

* **Frames**: a flow-matching video model over the ``K`` future frames, parameterized as the change from
  the last context frame, ``x_0 = 2 (future - last)`` (pixel space; the full recipes put a video VAE in
  front), so "nothing moves" is the zero sample and the model spends its capacity on motion. The denoiser is diffusers' ``WanTransformer3DModel`` (tiny config on
  CPU, Wan2.1-sized on GPUs). Conditioning, as image-to-video models do: the last context frame is
  concatenated to every noisy future frame along channels, and the cross-attention tokens are the action
  chunk (one token per step, a linear embedding) followed by tokens of the context frames (a strided conv).
  Trained with the rectified-flow objective (Lipman et al. 2023; Esser et al. 2024, Eq. 1-3)::

      x_s = (1 - s) x_0 + s eps,    L = E || v_theta(x_s, s, c) - (eps - x_0) ||^2

  or, by default (``prediction="x0"``), the same path with the network predicting ``x_0`` (``L = E ||
  x0_theta - x_0||^2``, ``v = (x_s - x0_theta) / s``), which a tiny CPU-sized denoiser learns much faster.

  and sampled with ``grpo.flow_sde.sde_step`` (ODE by default; SDE when the model itself is RL-trained).
* **State**: a reward head on the frames and actions predicts, per future step, the logit of
  ``success`` (the task's own success test in the simulator). "State-aware" as in World-VLA-Loop: it is
  trained on successes, near-successes and failures so its success prediction is calibrated, and at
  inference it reads the *predicted* frames, so reward and video stay consistent. Because of that it is
  also trained on the model's own predicted frames (open-loop rollouts under recorded actions, labelled
  with the real episode's success; :func:`train_success_head` ``imagined=``): fit on real frames alone it
  is at chance on imagined ones (balanced accuracy 0.54 vs 0.68 with imagined frames and augmentation,
  72 held-out reach episodes, see ``world_models.loop.fit_success_head``).

Shapes: frames are float ``[B, T, 3, H, W]`` in [0, 1] at the API; internally ``[B, 3, T, H, W]`` in [-1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from grpo.flow_sde import flow_sigmas, sde_step


@dataclass
class WorldModelConfig:
    image_size: int = 32
    context_frames: int = 2
    chunk: int = 4  # future frames per call = actions per call
    action_dim: int = 4
    hidden_heads: int = 2
    head_dim: int = 16
    layers: int = 2
    ffn_dim: int = 64
    token_dim: int = 32
    patch: int = 4
    sampling_steps: int = 8
    reward_channels: tuple[int, ...] = (16, 32)
    reward_pool: int = 4  # spatial grid the success head keeps (small objects: keep where things are)
    text_dim: int = 64  # hashed bag-of-words of the instruction for the success head (0: no instruction)
    prediction: str = "x0"  # what the transformer outputs: "x0" (the clean change) or "velocity"

    def __post_init__(self) -> None:
        if self.image_size % self.patch:
            raise ValueError(f"image_size {self.image_size} must be divisible by patch {self.patch}")
        if self.prediction not in ("x0", "velocity"):
            raise ValueError(f"prediction must be 'x0' or 'velocity', got {self.prediction!r}")
        if self.context_frames < 1 or self.chunk < 1:
            raise ValueError(f"need context_frames >= 1 and chunk >= 1, got {self.context_frames}, {self.chunk}")


def instruction_features(texts, dim: int) -> torch.Tensor:
    """Hashed bag of words ``[B, dim]`` (crc32 of each lower-cased word, L2-normalized): enough for the success
    head to know *which* object the instruction names without a text encoder."""
    import zlib

    out = torch.zeros(len(texts), dim)
    for i, t in enumerate(texts):
        for w in str(t).lower().split():
            out[i, zlib.crc32(w.encode()) % dim] += 1.0
    return F.normalize(out, dim=-1) if dim else out


class SuccessHead(nn.Module):
    """``frames[B, K, 3, H, W]`` in [-1, 1], ``actions[B, K, A]`` (+ instruction features ``[B, text_dim]``)
    -> success logits ``[B, K]``."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        layers, c_in = [], 3
        for c in cfg.reward_channels:
            layers += [nn.Conv2d(c_in, c, 4, stride=2, padding=1), nn.SiLU()]
            c_in = c
        self.conv = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(cfg.reward_pool), nn.Flatten())
        self.text_dim = cfg.text_dim
        self.mlp = nn.Sequential(nn.Linear(c_in * cfg.reward_pool ** 2 + cfg.action_dim + cfg.text_dim, 128), nn.SiLU(),
                                 nn.Linear(128, 1))

    def forward(self, frames: torch.Tensor, actions: torch.Tensor, text: torch.Tensor | None = None) -> torch.Tensor:
        b, k = frames.shape[:2]
        f = self.conv(frames.flatten(0, 1)).reshape(b, k, -1)
        parts = [f, actions.float()]
        if self.text_dim:
            t = torch.zeros(b, self.text_dim) if text is None else text.float()
            parts.append(t[:, None].expand(-1, k, -1))
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
        if text is None or isinstance(text, torch.Tensor):
            return text
        return instruction_features(list(text), self.cfg.text_dim)

    def loss(self, context: torch.Tensor, actions: torch.Tensor, future: torch.Tensor, success: torch.Tensor,
             generator: torch.Generator | None = None, success_weight: float = 0.5, text=None) -> dict[str, torch.Tensor]:
        """Flow-matching loss on ``future[B, K, 3, H, W]`` in [0,1] + BCE of the success head vs ``success[B, K]``."""
        self._check(context, actions)
        ctx = context * 2 - 1
        x0 = (2 * (future - context[:, -1:])).permute(0, 2, 1, 3, 4)  # [B, 3, K, H, W], change from last frame
        b = x0.shape[0]
        eps = torch.randn(x0.shape, generator=generator)
        s = torch.rand(b, generator=generator)
        xs = (1 - s.view(-1, 1, 1, 1, 1)) * x0 + s.view(-1, 1, 1, 1, 1) * eps
        out = self.net(xs, s, ctx, actions)
        fm = F.mse_loss(out, eps - x0 if self.cfg.prediction == "velocity" else x0)
        logits = self.success_head(future * 2 - 1, actions, self.text_features(text))
        bce = F.binary_cross_entropy_with_logits(logits, success.float())
        return {"loss": fm + success_weight * bce, "flow": fm.detach(), "success_bce": bce.detach()}

    # ---- inference -----------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, context: torch.Tensor, actions: torch.Tensor, generator: torch.Generator | None = None,
                steps: int | None = None, sde: str = "ode", eta: float = 0.0, text=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Future frames ``[B, K, 3, H, W]`` in [0,1] and success logits ``[B, K]`` (read from the predicted frames)."""
        self._check(context, actions)
        c = self.cfg
        ctx = context.float() * 2 - 1
        b = ctx.shape[0]
        tokens = self._tokens(ctx, actions)
        x = torch.randn((b, 3, c.chunk, c.image_size, c.image_size), generator=generator)
        sig = flow_sigmas(steps or c.sampling_steps)
        for i in range(len(sig) - 1):
            v = self.velocity(x, sig[i].expand(b), ctx, actions, tokens)
            x = sde_step(v, x, sig[i], sig[i + 1], kind=sde, eta=eta, generator=generator).prev_sample  # type: ignore[arg-type]
        frames = (context[:, -1:].float() + x.permute(0, 2, 1, 3, 4) / 2).clamp(0, 1)
        return frames, self.success_head(frames * 2 - 1, actions, self.text_features(text))


def window_dataset(videos: torch.Tensor, actions: torch.Tensor, success: torch.Tensor, cfg: WorldModelConfig
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cut trajectories into (context, action chunk, future, success) training windows.

    ``videos[N, T, 3, H, W]`` (frame ``t`` is the observation before action ``t``), ``actions[N, T-1, A]``,
    ``success[N, T]`` (the simulator's success flag at each frame). Returns tensors with a leading window dim.
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
    return torch.cat(ctx), torch.cat(act), torch.cat(fut), torch.cat(suc)


def train_world_model(wm: VideoWorldModel, data: tuple[torch.Tensor, ...], steps: int, batch: int = 16,
                      lr: float = 1e-3, seed: int = 0) -> list[float]:
    """Adam on random windows of ``data = window_dataset(...)``; returns the loss curve."""
    ctx, act, fut, suc = data[:4]
    text = data[4] if len(data) > 4 else None  # instruction features [N, text_dim] per window
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(wm.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    wm.train()
    for _ in range(steps):
        idx = torch.randint(ctx.shape[0], (min(batch, ctx.shape[0]),), generator=gen)
        out = wm.loss(ctx[idx], act[idx], fut[idx], suc[idx], generator=gen, text=None if text is None else text[idx])
        opt.zero_grad()
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(wm.parameters(), 1.0)
        opt.step()
        losses.append(float(out["loss"].detach()))
    wm.eval()
    return losses


@torch.no_grad()
def world_model_metrics(wm: VideoWorldModel, data: tuple[torch.Tensor, ...], seed: int = 0) -> dict[str, float]:
    """Held-out frame MSE vs the real simulator under the same actions, and success agreement (accuracy)."""
    ctx, act, fut, suc = data[:4]
    pred, logits = wm.predict(ctx, act, generator=torch.Generator().manual_seed(seed), text=data[4] if len(data) > 4 else None)
    copy_last = ((ctx[:, -1:].expand_as(fut) - fut) ** 2).mean()
    return {
        "frame_mse": float(((pred - fut) ** 2).mean()),
        "copy_last_frame_mse": float(copy_last),  # baseline: predict no motion
        "success_agreement": float(((logits > 0) == (suc > 0.5)).float().mean()),
    }


def success_samples(frames: torch.Tensor, actions: torch.Tensor, success: torch.Tensor,
                    text: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """Flatten per-step data into the success head's samples: ``frames[N, K, 3, H, W]`` in [0, 1], the actions
    that produced them ``actions[N, K, A]``, labels ``success[N, K]`` (and instruction features ``text[N, D]``)
    -> ``(frames[N*K, 3, H, W], actions[N*K, A], labels[N*K], text[N*K, D] or None)``."""
    n, k = frames.shape[:2]
    if actions.shape[:2] != (n, k) or success.shape != (n, k):
        raise ValueError(f"frames {tuple(frames.shape)}, actions {tuple(actions.shape)} and success "
                         f"{tuple(success.shape)} must share the leading [N, K]")
    txt = None if text is None else text.repeat_interleave(k, 0)
    return frames.flatten(0, 1), actions.flatten(0, 1).float(), success.flatten().float(), txt


def _augment_frames(x: torch.Tensor, gen: torch.Generator, shift: int = 2) -> torch.Tensor:
    """Label-preserving augmentation of ``x[B, 3, H, W]`` for the success head: a random horizontal flip and
    a random translation of up to ``shift`` pixels (edge-replicated), both of which keep the gripper-object
    relation that decides success."""
    b, _, h, w = x.shape
    flip = torch.rand(b, generator=gen) < 0.5
    x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
    pad = F.pad(x, (shift,) * 4, mode="replicate")
    dy, dx = (torch.randint(0, 2 * shift + 1, (2, b), generator=gen))
    rows = (dy.view(-1, 1) + torch.arange(h)).view(b, 1, h, 1).expand(-1, 3, -1, w + 2 * shift)
    x = pad.gather(2, rows)
    cols = (dx.view(-1, 1) + torch.arange(w)).view(b, 1, 1, w).expand(-1, 3, h, -1)
    return x.gather(3, cols)


def train_success_head(wm: VideoWorldModel, data: tuple[torch.Tensor, ...], steps: int, batch: int = 64,
                       lr: float = 1e-3, seed: int = 0, balance: bool = True,
                       imagined: tuple[torch.Tensor, ...] | None = None, imagined_fraction: float = 0.5,
                       augment: bool = False) -> list[float]:
    """Extra training of the success head alone (the rest of ``wm`` is untouched).

    ``data``: windows as for :func:`train_world_model`; the head is trained on their *real* future frames.
    ``imagined``: optional samples of the world model's *own* predicted frames, as returned by
    :func:`success_samples` (``frames[M, 3, H, W]``, ``actions[M, A]``, ``labels[M]``, ``text[M, D]`` or None),
    labelled with the real episode's success at that step (``world_models.loop.imagined_success_samples``).
    At inference (the world-model env) the head only ever sees predicted frames, which are blurrier and
    drift from the real ones, so a head fit on real frames alone is near chance there; each batch then
    holds ``round(imagined_fraction * batch)`` imagined samples and the rest real ones, and the loss is

        L = mean_i w_i BCE(head(frame_i, a_i, text_i), y_i),    w_i = (#neg / #pos of i's source) if y_i else 1

    (``balance``: positives weighted by the negative/positive ratio of their own source, real or imagined,
    so a rare success is not ignored and the env's reward does not say "never"). ``augment``: each frame
    is randomly flipped left-right and shifted by up to 2 pixels (:func:`_augment_frames`), which keeps
    the gripper-object relation that decides success and keeps the head from memorizing the training
    episodes' layouts. Returns the loss curve."""
    _, act, fut, suc = data[:4]
    sources = [success_samples(fut, act, suc, data[4] if len(data) > 4 else None)]
    if imagined is not None:
        if not 0.0 <= imagined_fraction <= 1.0:
            raise ValueError(f"imagined_fraction must be in [0, 1], got {imagined_fraction}")
        if len(imagined) != 4 or imagined[0].dim() != 4 or imagined[0].shape[0] != imagined[2].shape[0]:
            raise ValueError("imagined must be (frames [M, 3, H, W], actions [M, A], labels [M], text [M, D] or None)")
        sources.append(tuple(imagined))
    fractions = [1.0] if imagined is None else [1.0 - imagined_fraction, imagined_fraction]
    counts = [int(round(f * batch)) for f in fractions]
    counts[0] = batch - sum(counts[1:])
    pws = []
    for _, _, y, _ in sources:
        pos = float(y.sum())
        pws.append((y.numel() - pos) / max(pos, 1.0) if balance else 1.0)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(wm.success_head.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        fr, ac, ys, tx, ws = [], [], [], [], []
        for (frames, acts, y, txt), n, pw in zip(sources, counts, pws):
            if n <= 0:
                continue
            i = torch.randint(y.numel(), (n,), generator=gen)
            fr.append(frames[i]), ac.append(acts[i]), ys.append(y[i]), ws.append(1.0 + (pw - 1.0) * y[i])
            if txt is not None:
                tx.append(txt[i])
        text = torch.cat(tx) if tx and len(tx) == len(fr) else None
        y = torch.cat(ys)
        x = torch.cat(fr).float()
        if augment:
            x = _augment_frames(x, gen)
        logits = wm.success_head(x[:, None] * 2 - 1, torch.cat(ac)[:, None], text)[:, 0]
        loss = F.binary_cross_entropy_with_logits(logits, y, weight=torch.cat(ws))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    wm.eval()
    return losses
