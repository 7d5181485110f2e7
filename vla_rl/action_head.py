"""Action heads of the built-in VLA: a pi0-style flow-matching action expert and a Gaussian head.

Both map a context vector ``ctx[B, C]`` (fused image/instruction/state features) to an *action chunk*
``a[B, K, A]`` (``K`` future actions of dimension ``A``), and both expose the same RL interface:

    s = head.sample(ctx, stochastic=True)          # HeadSample: actions [B,K,A], record, logp [B,S], step_mask [B,S]
    lp = head.log_prob(ctx, s.record)              # HeadLogProb: logp [B,S] recomputed under the current weights
    loss = head.loss(ctx, actions, action_mask)    # supervised (SFT) loss, scalar

``S`` is the number of log-prob "tokens" per chunk: the ``T`` denoising steps of the flow head, 1 for the
Gaussian head. ``step_mask`` marks which of them are stochastic (only those enter the policy loss).

Flow-matching head (pi0, Black et al. 2024, Sec. IV; rectified-flow convention of :mod:`grpo.flow_sde`)::

    a_sigma = (1 - sigma) a + sigma eps,   eps ~ N(0, I),   sigma ~ Beta(1.5, 1)   (pi0 emphasizes noisy levels)
    L_FM    = || v_theta(a_sigma, sigma, ctx) - (eps - a) ||^2

Sampling integrates ``sigma: 1 -> 0`` in ``T`` steps (:func:`grpo.flow_sde.flow_chain`). For RL each step can be made
a Gaussian SDE step ``x_{t+1} ~ N(mu_theta(x_t), std_t^2)`` by :func:`grpo.flow_sde.sde_step` -- the very chain and
step the diffusion frontend uses -- whose log-prob is exact. ``noise_mode="all"`` makes every step stochastic (Flow-GRPO
style); ``noise_mode="one"`` draws one step index ``j ~ U{0..T-1}`` per chunk and keeps the others
deterministic ODE steps (RLinf's recipe for pi0, Zang et al. 2025 "RLinf-VLA"), so the chunk's log-prob is
the single step's Gaussian log-density. ``eta`` sets the noise level.

Gaussian head: ``a = mu_theta(ctx) + exp(log_std) * eps`` with a state-independent learned ``log_std[K*A]``;
``log pi(a) = log N(a; mu, std^2)`` via :func:`grpo.flow_sde.gaussian_log_prob`. SFT fits ``mu`` by MSE.

Mixed precision (``autocast_dtype = torch.bfloat16``, set by :meth:`vla_rl.policy.SmallVLA.set_mixed_precision`):
only the networks (``velocity`` / ``mean``) run under ``torch.autocast``; their outputs are cast to fp32 before the
SDE step, the Gaussian densities and the losses, so sampling and :meth:`log_prob` share one precision path.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Literal, Sequence

import torch
from torch import nn

from grpo.config import MAX_WIDTH, require_at_least, require_at_most
from grpo.device import rand, randint, randn
from grpo.flow_sde import SDEKind, flow_chain, flow_sigmas, gaussian_log_prob, sde_step

MAX_LAYERS = 256  # the deepest action-head MLP a config may ask for (each layer is built when the policy is)
NoiseMode = Literal["all", "one"]
# one generator for the whole batch, or one per row (row i's draws then depend on generator[i] alone, never on
# which other rows share the batch: what rank-sharded rollouts need, see vla_rl.rollout.run_episodes)
Generators = torch.Generator | Sequence[torch.Generator] | None


def _per_row(generator: Generators, b: int) -> bool:
    if isinstance(generator, (list, tuple)):
        if len(generator) != b:
            raise ValueError(f"got {len(generator)} per-row generators for a batch of {b}")
        return True
    return False


def _randn(shape: tuple[int, ...], generator: Generators, device) -> torch.Tensor:
    """``randn(shape)`` on ``device``, drawn on the generator's device (a CPU generator draws the same numbers for a
    CUDA policy, :mod:`grpo.device`); with per-row generators row ``i`` of ``[B, ...]`` comes from ``generator[i]``."""
    if _per_row(generator, shape[0]):
        return torch.stack([randn(shape[1:], g, g.device) for g in generator]).to(device)
    return randn(shape, generator, device)


def _randint(high: int, b: int, generator: Generators, device) -> torch.Tensor:
    """``[B]`` integers in ``[0, high)`` on ``device`` (drawn on the generator's device), per row from
    ``generator[i]`` when given a list."""
    if _per_row(generator, b):
        return torch.cat([randint(0, high, (1,), g, g.device) for g in generator]).to(device)
    return randint(0, high, (b,), generator, device)


@dataclass
class HeadSample:
    actions: torch.Tensor  # [B, K, A] float32
    record: dict[str, torch.Tensor]  # what log_prob needs to recompute (chain / actions, step mask)
    logp: torch.Tensor  # [B, S] float32 (0 where not stochastic)
    step_mask: torch.Tensor  # [B, S] bool


@dataclass
class HeadLogProb:
    logp: torch.Tensor  # [B, S]
    step_mask: torch.Tensor  # [B, S] bool
    mean: torch.Tensor  # [B, S, K, A] Gaussian means of each token (for the Flow-GRPO closed-form KL)
    std: torch.Tensor  # [B, S, 1, 1] or [B, S, K, A]
    std_dev_t: torch.Tensor | None = None  # [B, S, 1, 1]: the flow head's SDEStepOutput.std_dev_t
                                           # (grpo.loss.flow_kl_scale)


def autocast(dtype: torch.dtype | None, device: torch.device | str):
    """``torch.autocast(device.type, dtype)`` when ``dtype`` is set, else a no-op context (fp32 as written)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def _mlp(d_in: int, hidden: int, d_out: int, layers: int = 2) -> nn.Sequential:
    mods: list[nn.Module] = []
    d = d_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.SiLU()]
        d = hidden
    mods.append(nn.Linear(d, d_out))
    return nn.Sequential(*mods)


def sigma_features(sigma: torch.Tensor, n: int = 8) -> torch.Tensor:
    """Fourier features of the noise level: ``[B] -> [B, 2n]``."""
    freqs = (2.0 ** torch.arange(n, device=sigma.device, dtype=torch.float32)) * math.pi
    ang = sigma.float()[:, None] * freqs[None]
    return torch.cat([ang.sin(), ang.cos()], dim=-1)


@dataclass
class FlowHeadConfig:
    num_steps: int = 5  # denoising steps T
    sde_kind: SDEKind = "flow_grpo"  # see grpo.flow_sde.SDE_KINDS
    eta: float = 0.5  # SDE noise level
    noise_mode: NoiseMode = "all"  # which denoising steps are stochastic in rollouts (see grpo.flow_sde)
    logprob_reduce: Literal["mean", "sum"] = "sum"  # sum or mean the per-dim log-probs of a step
    hidden: int = 256  # width of the velocity MLP
    layers: int = 3  # depth of the velocity MLP

    def __post_init__(self) -> None:
        if self.num_steps < 1:
            raise ValueError(f"flow.num_steps must be >= 1, got {self.num_steps}")
        if self.num_steps > 10_000:  # (denoising steps per action chunk, every control step)
            raise ValueError(f"flow.num_steps={self.num_steps}: expected at most 10000 denoising steps")
        if self.eta < 0:
            raise ValueError(f"flow.eta must be >= 0, got {self.eta}")
        require_at_least("flow", self, hidden=1, layers=1)
        require_at_most("flow", self, hidden=MAX_WIDTH, layers=MAX_LAYERS)


class FlowMatchingActionHead(nn.Module):
    """pi0-style action expert ``v_theta(a_sigma[B,K,A], sigma[B], ctx[B,C]) -> [B,K,A]`` (an MLP over the
    flattened chunk, Fourier features of sigma and the context; pi0's is a transformer attending to the VLM)."""

    def __init__(self, ctx_dim: int, action_dim: int, chunk_size: int, cfg: FlowHeadConfig | None = None):
        super().__init__()
        self.cfg = cfg or FlowHeadConfig()
        self.action_dim, self.chunk_size = action_dim, chunk_size
        self.net = _mlp(chunk_size * action_dim + 16 + ctx_dim, self.cfg.hidden, chunk_size * action_dim,
                        self.cfg.layers)
        self.register_buffer("sigmas", flow_sigmas(self.cfg.num_steps), persistent=False)
        self.autocast_dtype: torch.dtype | None = None  # torch.bfloat16: the velocity net runs under autocast

    @property
    def tokens_per_chunk(self) -> int:
        return self.cfg.num_steps

    def velocity(self, x: torch.Tensor, sigma: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """``v_theta(x[B,K,A], sigma[B], ctx[B,C]) -> [B,K,A]`` fp32 (the net under autocast with
        ``autocast_dtype``)."""
        b = x.shape[0]
        h = torch.cat([x.reshape(b, -1), sigma_features(sigma), ctx], dim=-1)
        with autocast(self.autocast_dtype, h.device):  # a no-op context in fp32 (.float() is then the identity)
            v = self.net(h)
        return v.float().reshape(b, self.chunk_size, self.action_dim)

    def loss(self, ctx: torch.Tensor, actions: torch.Tensor, action_mask: torch.Tensor | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
        """Flow-matching loss (module docstring); ``actions[B,K,A]``, ``action_mask[B,K]`` (False = padding)."""
        b = actions.shape[0]
        eps = randn(actions.shape, generator, actions.device)
        u = rand((b,), generator, actions.device)
        sigma = u ** (1.0 / 1.5)  # inverse CDF of Beta(1.5, 1)
        sigma = sigma.clamp(1e-3, 1.0)
        s = sigma[:, None, None]
        x = (1 - s) * actions + s * eps
        err = (self.velocity(x, sigma, ctx) - (eps - actions)) ** 2
        if action_mask is None:
            return err.mean()
        m = action_mask.float()[:, :, None].expand_as(err)
        return (err * m).sum() / m.sum().clamp(min=1.0)

    def _sde_kwargs(self) -> dict:
        return dict(kind=self.cfg.sde_kind, eta=self.cfg.eta, sigma_max=float(self.sigmas[1]),
                    reduce=self.cfg.logprob_reduce)

    def _step_mask(self, b: int, stochastic: bool, generator: Generators, device) -> torch.Tensor:
        t = self.cfg.num_steps
        if not stochastic or self.cfg.eta == 0 or self.cfg.sde_kind == "ode":
            return torch.zeros(b, t, dtype=torch.bool, device=device)
        if self.cfg.noise_mode == "all":
            return torch.ones(b, t, dtype=torch.bool, device=device)
        j = _randint(t, b, generator, device)
        return torch.arange(t, device=device)[None] == j[:, None]

    @torch.no_grad()
    def sample(self, ctx: torch.Tensor, stochastic: bool = True, generator: Generators = None) -> HeadSample:
        """Integrate ``sigma: 1 -> 0``; stochastic steps (per ``noise_mode``) are SDE steps with log-probs.

        ``generator``: one for the batch, or a list of ``B`` (one per row of ``ctx[B, C]``): then every row draws
        its initial noise, its step index (``noise_mode="one"``) and one noise per step from its own generator."""
        b, dev = ctx.shape[0], ctx.device
        shape = (b, self.chunk_size, self.action_dim)
        x = _randn(shape, generator, dev)
        step_mask = self._step_mask(b, stochastic, generator, dev)
        # one noise per step where a row is stochastic, drawn in step order; per-row streams draw on every step, so
        # row i's draws never depend on what the other rows do
        every = _per_row(generator, b) and stochastic
        noise = [_randn(shape, generator, dev) if every or bool(step_mask[:, t].any()) else None
                 for t in range(self.cfg.num_steps)]
        kw = self._sde_kwargs()
        final, steps = flow_chain(lambda t, z: self.velocity(z, self.sigmas[t].expand(b), ctx), x, self.sigmas,
                                  kind=kw["kind"], eta=kw["eta"], reduce=kw["reduce"], sde_mask=step_mask,
                                  noise=noise.__getitem__)
        return HeadSample(actions=final, record={"chain": torch.stack([x] + [c.x_next for c in steps], 1),
                                                 "step_mask": step_mask},
                          logp=torch.stack([c.log_prob for c in steps], 1), step_mask=step_mask)

    def log_prob(self, ctx: torch.Tensor, record: dict[str, torch.Tensor]) -> HeadLogProb:
        """Recompute the log-prob of every stored transition ``chain[:, t] -> chain[:, t+1]`` at once.

        ``record["chain"]``: ``[B, T+1, K, A]``; ``record["step_mask"]``: ``[B, T]``. Returns ``logp[B, T]``.
        """
        chain, step_mask = record["chain"], record["step_mask"].bool()
        b, t = step_mask.shape
        if chain.shape[1] != t + 1 or t != self.cfg.num_steps:
            raise ValueError(f"chain has {chain.shape[1]} states for {t} steps; the head has "
                             f"num_steps={self.cfg.num_steps}")
        x = chain[:, :-1].reshape(b * t, self.chunk_size, self.action_dim)
        x_next = chain[:, 1:].reshape(b * t, self.chunk_size, self.action_dim)
        s = self.sigmas[:-1].repeat(b)
        sn = self.sigmas[1:].repeat(b)
        v = self.velocity(x, s, ctx.repeat_interleave(t, dim=0))
        out = sde_step(v, x, s, sn, prev_sample=x_next, **self._sde_kwargs())
        logp = torch.where(step_mask, out.log_prob.reshape(b, t), torch.zeros(b, t, device=ctx.device))
        return HeadLogProb(logp=logp, step_mask=step_mask, mean=out.mean.reshape(b, t, *out.mean.shape[1:]),
                           std=out.std.reshape(b, t, *out.std.shape[1:]),
                           std_dev_t=out.std_dev_t.reshape(b, t, *out.std_dev_t.shape[1:]))


@dataclass
class GaussianHeadConfig:
    hidden: int = 256  # width of the mean MLP
    layers: int = 2  # depth of the mean MLP
    init_std: float = 0.2  # initial action std
    min_std: float = 0.02  # lower bound of the learned std
    max_std: float = 1.0  # upper bound of the learned std
    logprob_reduce: Literal["mean", "sum"] = "sum"  # sum or mean the per-dim log-probs of a chunk

    def __post_init__(self) -> None:
        require_at_least("gaussian", self, hidden=1, layers=1)
        require_at_most("gaussian", self, hidden=MAX_WIDTH, layers=MAX_LAYERS)
        if not 0 < self.min_std <= self.init_std <= self.max_std:
            raise ValueError(f"need 0 < min_std <= init_std <= max_std, got {self.min_std}, {self.init_std}, "
                             f"{self.max_std}")


class GaussianActionHead(nn.Module):
    """``mu_theta(ctx) [B,K,A]`` and a learned state-independent ``log_std [K*A]`` (clamped)."""

    def __init__(self, ctx_dim: int, action_dim: int, chunk_size: int, cfg: GaussianHeadConfig | None = None):
        super().__init__()
        self.cfg = cfg or GaussianHeadConfig()
        self.action_dim, self.chunk_size = action_dim, chunk_size
        self.net = _mlp(ctx_dim, self.cfg.hidden, chunk_size * action_dim, self.cfg.layers)
        self.log_std = nn.Parameter(torch.full((chunk_size, action_dim), math.log(self.cfg.init_std)))
        self.autocast_dtype: torch.dtype | None = None  # torch.bfloat16: the mean net runs under autocast

    @property
    def tokens_per_chunk(self) -> int:
        return 1

    def mean(self, ctx: torch.Tensor) -> torch.Tensor:
        """``mu_theta(ctx[B,C]) -> [B,K,A]`` fp32 (the net under autocast with ``autocast_dtype``)."""
        with autocast(self.autocast_dtype, ctx.device):  # a no-op context in fp32 (.float() is then the identity)
            mu = self.net(ctx)
        return mu.float().reshape(-1, self.chunk_size, self.action_dim)

    def std(self) -> torch.Tensor:
        return self.log_std.clamp(math.log(self.cfg.min_std), math.log(self.cfg.max_std)).exp()

    def loss(self, ctx: torch.Tensor, actions: torch.Tensor, action_mask: torch.Tensor | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
        err = (self.mean(ctx) - actions) ** 2
        if action_mask is None:
            return err.mean()
        m = action_mask.float()[:, :, None].expand_as(err)
        return (err * m).sum() / m.sum().clamp(min=1.0)

    @torch.no_grad()
    def sample(self, ctx: torch.Tensor, stochastic: bool = True, generator: Generators = None) -> HeadSample:
        """``a = mu + std * eps`` (``mu`` when not stochastic); ``generator`` as in
        :meth:`FlowMatchingActionHead.sample`."""
        mu = self.mean(ctx)
        b = mu.shape[0]
        if not stochastic:
            mask = torch.zeros(b, 1, dtype=torch.bool, device=ctx.device)
            return HeadSample(mu, {"actions": mu, "step_mask": mask}, torch.zeros(b, 1, device=ctx.device), mask)
        std = self.std().expand_as(mu)
        a = mu + std * _randn(tuple(mu.shape), generator, ctx.device)
        lp = gaussian_log_prob(a, mu, std, reduce=self.cfg.logprob_reduce)[:, None]
        mask = torch.ones(b, 1, dtype=torch.bool, device=ctx.device)
        return HeadSample(a, {"actions": a, "step_mask": mask}, lp, mask)

    def log_prob(self, ctx: torch.Tensor, record: dict[str, torch.Tensor]) -> HeadLogProb:
        """``record["actions"]``: ``[B, K, A]``; returns ``logp[B, 1]``."""
        mu = self.mean(ctx)
        std = self.std().expand_as(mu)
        a = record["actions"]
        if a.shape != mu.shape:
            raise ValueError(f"stored actions have shape {tuple(a.shape)}, the head predicts {tuple(mu.shape)}")
        lp = gaussian_log_prob(a.float(), mu.float(), std.float(), reduce=self.cfg.logprob_reduce)[:, None]
        mask = record["step_mask"].bool()
        return HeadLogProb(logp=torch.where(mask, lp, torch.zeros_like(lp)), step_mask=mask, mean=mu[:, None],
                           std=std[None].expand(mu.shape[0], *std.shape)[:, None] if std.dim() == 2 else std[:, None])
