"""Flat SDE rollouts (Flow-GRPO / DanceGRPO) with stored per-step latents and log-probs.

A rollout of ``B`` samples over the sigma schedule ``1 = sigma_0 > ... > sigma_T = 0`` takes, at step ``i``,
one denoiser call on the whole batch and one :func:`grpo.flow_sde.sde_step`::

    v_i      = v_theta(x_i, sigma_i, c)                    (CFG: v_u + w (v_c - v_u), [uncond; cond] in ONE call)
    x_{i+1}  ~ N(mu_theta(x_i, v_i), std_i^2 I),           log pi_old(x_{i+1} | x_i)  (Flow-GRPO Eq. 9-10)

The per-step record (:class:`StepRecord`) keeps ``x_i``, ``x_{i+1}``, the log-prob and *which rows were
batched together*. That is what makes the PPO ratio exactly 1 before the first update: a denoiser's output
for one row depends (in the last float bits) on the other rows of its batch (GEMM blocking), so the trainer
recomputes ``log pi_theta(x_{i+1} | x_i)`` with exactly the rows of the rollout call, in the same dtype; where
it cannot (width-pruned rows), it takes the old log-prob from its own first, pre-update forward pass (see
:mod:`diffusion_rl.trainer`). The known DanceGRPO/Flow-GRPO pitfall (ratio != 1 at the first step from
recomputing under a different batch composition or precision) is tested in ``tests/diffusion_rl``.

Noise is keyed, never drawn from a shared stream: the initial latent and the per-step SDE noise of global sample
``i`` at iteration ``k`` come from :func:`grpo.distributed.keyed_generator` ``(seed, k, stream, i)`` (see
:func:`keyed_noise`), so a rank that rolls out only its contiguous share of the samples draws exactly the rows a
single process would, and a run is reproducible from one seed whatever the world size.

The loop itself is :func:`grpo.flow_sde.flow_chain` (the one chain of the project). BranchGRPO-Mix / MixGRPO: only
the steps in a sliding window are stochastic (and trained); the others are ODE steps (``std = 0``, no log-prob), see
:meth:`SamplerConfig.sde_mask` (:func:`grpo.flow_sde.mix_sde_mask`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal  # noqa: F401

import torch

from grpo.config import require_at_least, require_positive
from grpo.device import randint, randn
from grpo.distributed import keyed_randn
from grpo.flow_sde import SDEKind, flow_chain, flow_sigmas, mix_sde_mask

from .adapters import Cond, DiffusionAdapter

MIN_SHIFT, MAX_SHIFT = 1e-3, 1e3  # sampler.shift's range (outside it the float32 sigma schedule is degenerate)
MAX_CFG_SCALE = 100.0  # sampler.cfg_scale's largest value


@dataclass
class SamplerConfig:
    """Sampling settings (the YAML ``sampler:`` section)."""

    num_steps: int = 10  # denoising steps per sample
    sde: SDEKind = "flow_grpo"  # step kind: flow_grpo, dance_grpo, cps, cps_gaussian or ode (grpo.flow_sde)
    eta: float = 0.7  # SDE noise level
    shift: float = 1.0  # SD3 time shift of the sigma schedule
    cfg_scale: float = 1.0  # > 1 enables classifier-free guidance (unconditional = empty prompt)
    same_init_noise: bool = True  # one initial noise per group (flat GRPO)
    timestep_fraction: float = 1.0  # fraction of the stochastic steps trained per iteration (random subset)
    mix_window: int = 0  # > 0: MixGRPO / BranchGRPO-Mix, only this many consecutive steps are SDE, the rest ODE
    mix_stride: int = 1  # iterations per one-step advance of the SDE window
    sde_last_step: bool = False  # the last step (sigma -> 0) is ODE by default: its noise would stay in the image

    def __post_init__(self) -> None:
        if self.num_steps < 1:
            raise ValueError(f"sampler.num_steps must be >= 1, got {self.num_steps}")
        if self.num_steps > 10_000:  # (its schedule is built when the config loads: 1e9 steps took GBs in a dry run)
            raise ValueError(f"sampler.num_steps={self.num_steps}: expected at most 10000 denoising steps")
        if not 0 < self.timestep_fraction <= 1:
            raise ValueError(f"sampler.timestep_fraction must be in (0, 1], got {self.timestep_fraction}")
        if not 0 <= self.mix_window <= self.num_steps:
            raise ValueError(f"sampler.mix_window must be in [0, num_steps={self.num_steps}], got {self.mix_window}")
        require_at_least("sampler", self, eta=0.0, cfg_scale=0.0, mix_stride=1)
        require_positive("sampler", self, "shift")
        if not MIN_SHIFT <= self.shift <= MAX_SHIFT:  # (1e300 / 1e-50: the float32 schedule's inf / 0 gave 0/0 = NaN
            # sigmas, NaN images, then a torch.cat traceback after the first files)
            raise ValueError(f"sampler.shift={self.shift}: expected in [{MIN_SHIFT}, {MAX_SHIFT}] (SD3's time shift "
                             "of the sigma schedule; recipes use 1 to 12)")
        if self.cfg_scale > MAX_CFG_SCALE:  # (1e30: NaN images and NaN evaluation, exit 0)
            raise ValueError(f"sampler.cfg_scale={self.cfg_scale}: expected at most {MAX_CFG_SCALE} (classifier-free "
                             "guidance scales of 1 to 20 are used; beyond, the guided velocity overflows)")

    def sde_mask(self, iteration: int, force: tuple[int, ...] = ()) -> torch.Tensor:
        """``[T]`` bool: which steps draw SDE noise at ``iteration`` (``force``: steps that must, e.g. tree splits);
        :func:`grpo.flow_sde.mix_sde_mask` with this section's Mix window."""
        return mix_sde_mask(self.num_steps, iteration, window=self.mix_window, stride=self.mix_stride,
                            sde_last_step=self.sde_last_step, force=force)


# key streams of :func:`keyed_noise`: one per kind of draw, so no two draws of an iteration share a generator
STREAM_INIT, STREAM_STEP, STREAM_TREE_ROOT, STREAM_TREE_NODE, STREAM_TIMESTEPS = 1, 2, 3, 4, 5


def keyed_noise(shape: tuple[int, ...], seed: int, iteration: int, stream: int, indices) -> torch.Tensor:
    """``[len(indices), *shape]`` standard normals; row ``j`` from ``keyed_generator(seed, iteration, stream,
    indices[j])``.

    Any split of the global ``indices`` over ranks yields the same rows as one process drawing them all.
    """
    return keyed_randn(shape, seed, iteration, indices, stream=stream)  # on the CPU: callers move it


def seed_from(generator: torch.Generator | None, seed: int | None) -> int:
    """The noise key: ``seed`` if given, else one number drawn from ``generator`` (else 0)."""
    if seed is not None:
        return int(seed)
    if generator is not None:
        return int(randint(0, 2**62, (1,), generator))
    return 0


@dataclass
class StepRecord:
    """One denoising step of a batch of rows (flat: samples; tree: nodes), as it was computed.

    ``x``/``x_next``: ``[R, *latent]`` float32; ``log_prob``: ``[R]``; ``rows``: ``[R]`` row ids (flat sample
    index, or global tree node id); ``prompt_idx``: ``[R]`` index into the iteration's prompt list. Rows listed in
    one record were ONE denoiser call, in this order (a rollout made in pieces, ``reward.overlap > 1``: one call per
    piece, :func:`concat_rollouts`).
    """

    step: int
    sigma: float
    sigma_next: float
    stochastic: bool
    x: torch.Tensor
    x_next: torch.Tensor
    log_prob: torch.Tensor
    rows: torch.Tensor
    prompt_idx: torch.Tensor


@dataclass
class Rollout:
    records: list[StepRecord]
    final: torch.Tensor  # [L, *latent] the final samples (flat: all samples; tree: leaves)
    final_rows: torch.Tensor  # [L] row id of each final sample
    final_prompt_idx: torch.Tensor  # [L]
    nfe: int  # denoiser evaluations (a CFG pair counts 2)
    extra: dict = field(default_factory=dict)


def concat_rollouts(parts: list[Rollout]) -> Rollout:
    """Rollouts of consecutive pieces of one rollout (``reward.overlap``) joined: final samples, rows and prompt ids
    concatenated in order, tensors of ``extra`` along dim 0 (the tree's ``edge_log_prob`` ``[P', N]``), NFE summed,
    and the records of one step merged into one (rows in piece order), so the update runs one batch per step as it
    does for a rollout made in one piece. The merged record's stored log-probs come from the pieces' smaller
    denoiser batches: the update's recomputation matches them up to float rounding (the on-policy gap is ~1e-7
    instead of exactly 0)."""
    if len(parts) == 1:
        return parts[0]
    extra = {}
    for k in parts[0].extra:
        vals = [p.extra[k] for p in parts]
        if not all(isinstance(v, torch.Tensor) for v in vals):
            raise ValueError(f"cannot join rollout pieces: extra[{k!r}] is not a tensor")
        extra[k] = torch.cat(vals)
    by_step: dict[int, list[StepRecord]] = {}
    for p in parts:
        for r in p.records:
            by_step.setdefault(r.step, []).append(r)
    records = []
    for step in sorted(by_step):
        rs = by_step[step]
        records.append(rs[0] if len(rs) == 1 else StepRecord(
            step, rs[0].sigma, rs[0].sigma_next, all(r.stochastic for r in rs), torch.cat([r.x for r in rs]),
            torch.cat([r.x_next for r in rs]), torch.cat([r.log_prob for r in rs]), torch.cat([r.rows for r in rs]),
            torch.cat([r.prompt_idx for r in rs])))
    return Rollout(records, torch.cat([p.final for p in parts]), torch.cat([p.final_rows for p in parts]),
                   torch.cat([p.final_prompt_idx for p in parts]), sum(p.nfe for p in parts), extra)


def guided_velocity(adapter: DiffusionAdapter, x: torch.Tensor, sigma: float | torch.Tensor, cond: Cond,
                    uncond: Cond | None = None, cfg_scale: float = 1.0) -> torch.Tensor:
    """``v = v_u + w (v_c - v_u)`` with ``[uncond; cond]`` in one denoiser call (``w <= 1`` or no ``uncond``:
    ``v_c``)."""
    sig = torch.as_tensor(sigma, dtype=torch.float32, device=x.device).expand(x.shape[0])
    if uncond is None or cfg_scale == 1.0:
        return adapter.velocity(x, sig, cond)
    both = {k: torch.cat([uncond[k], cond[k]]) for k in cond}
    v = adapter.velocity(torch.cat([x, x]), torch.cat([sig, sig]), both)
    vu, vc = v.chunk(2)
    return vu + cfg_scale * (vc - vu)


def denoise_rows(adapter: DiffusionAdapter, x: torch.Tensor, cond: Cond, uncond: Cond | None, sc: SamplerConfig,
                 sigmas: torch.Tensor, steps: range, sde_mask: torch.Tensor, noise_fn, rows: torch.Tensor,
                 prompt_idx: torch.Tensor) -> tuple[torch.Tensor, list[StepRecord], int]:
    """Run ``steps`` on the batch ``x[R]`` (one denoiser call per step, :func:`grpo.flow_sde.flow_chain`);
    ``noise_fn(step) -> [R, *latent]``."""
    final, chain = flow_chain(lambda i, x: guided_velocity(adapter, x, sigmas[i], cond, uncond, sc.cfg_scale), x,
                              sigmas, kind=sc.sde, eta=sc.eta, steps=steps, sde_mask=sde_mask, noise=noise_fn)
    records = [StepRecord(c.index, float(c.sigma), float(c.sigma_next), c.stochastic, c.x, c.x_next, c.log_prob,
                          rows, prompt_idx) for c in chain]
    nfe = len(chain) * x.shape[0] * (2 if uncond is not None and sc.cfg_scale != 1.0 else 1)
    return final, records, nfe


@torch.no_grad()
def flat_rollout(adapter: DiffusionAdapter, prompts: list[str], group_size: int, sc: SamplerConfig,
                 generator: torch.Generator | None = None, iteration: int = 0, uncond_prompt: str = "", *,
                 seed: int | None = None, rows: range | list[int] | None = None) -> Rollout:
    """Samples of ``len(prompts) * group_size`` global rows, ``group_size`` per prompt (rows ``p * G .. p * G + G -
    1``).

    ``rows``: the global sample indices rolled out here (a rank's contiguous share; default all). Noise is keyed by
    ``(seed, iteration, global index)`` (``seed``, or one number drawn from ``generator``); with
    ``sc.same_init_noise`` the initial latent is keyed by the group (prompt) index, so a group shares it even
    when it is split over ranks. ``prompt_idx`` of the records index the global ``prompts`` list.
    """
    P, G = len(prompts), group_size
    seed = seed_from(generator, seed)
    rows = (torch.arange(P * G, device="cpu") if rows is None
            else torch.as_tensor(list(rows), dtype=torch.long, device="cpu"))
    if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= P * G):
        raise ValueError(f"rows {rows.tolist()} out of range for {P} prompts x {G} samples")
    shape = adapter.latent_shape
    prompt_idx = rows // G
    cond = adapter.encode_prompts([prompts[i] for i in prompt_idx.tolist()])
    uncond = adapter.encode_prompts([uncond_prompt] * len(rows)) if sc.cfg_scale != 1.0 else None
    if sc.same_init_noise:
        x0 = keyed_noise(shape, seed, iteration, STREAM_INIT, prompt_idx.tolist())
    else:
        x0 = keyed_noise(shape, seed, iteration, STREAM_INIT, rows.tolist())
    sigmas = flow_sigmas(sc.num_steps, sc.shift)
    mask = sc.sde_mask(iteration)
    step_noise = keyed_noise((sc.num_steps, *shape), seed, iteration, STREAM_STEP, rows.tolist()).transpose(0, 1)
    final, records, nfe = denoise_rows(adapter, x0.to(adapter.device), cond, uncond, sc, sigmas, range(sc.num_steps),
                                       mask, lambda i: step_noise[i].to(adapter.device), rows, prompt_idx)
    return Rollout(records, final, rows, prompt_idx, nfe)


@torch.no_grad()
def ode_sample(adapter: DiffusionAdapter, prompts: list[str], num_steps: int, generator: torch.Generator,
               shift: float = 1.0, cfg_scale: float = 1.0, batch: int = 64) -> torch.Tensor:
    """Deterministic Euler samples (evaluation; :func:`grpo.flow_sde.flow_chain` of ODE steps), one per prompt:
    ``[len(prompts), *latent]``."""
    sigmas = flow_sigmas(num_steps, shift)
    x = randn((len(prompts), *adapter.latent_shape), generator, adapter.device)
    outs = []
    for s in range(0, len(prompts), batch):
        xb = x[s:s + batch]
        cond = adapter.encode_prompts(prompts[s:s + batch])
        uncond = adapter.encode_prompts([""] * xb.shape[0]) if cfg_scale != 1.0 else None
        outs.append(flow_chain(lambda i, z, c=cond, u=uncond: guided_velocity(adapter, z, sigmas[i], c, u, cfg_scale),
                               xb, sigmas, kind="ode", keep=False)[0])
    return torch.cat(outs)
