"""Two-stage "pool, select, train" rollouts (Sol-RL: explore in FP4, train in BF16).

Per prompt ``p`` and iteration ``k``, candidate ``j < K`` is identified by its global index ``g = p K + j``; its initial
latent and per-step SDE noise are keyed by ``(seed, k, stream, g)`` exactly as in
:func:`diffusion_rl.sampling.flat_rollout` with ``group_size = K`` (so candidate ``g`` *is* the flat rollout's sample
``g``)::

    stage 1 (explore)  x^g_T..x^g_0 with the cheap explorer (a quantized rollout copy, no log-probs, chunked)
                       r^g = R(x^g_0)                                  pool rewards [P, K]
    select             S_p = select_subset(r^{pK..pK+K-1}, N, method)  grpo.selection: N distinct of K per prompt
    stage 2 (train)    for g in S_p: regenerate x^g from the SAME keys with the policy (the trained bf16 model),
                       storing per-step latents and log pi_old(x_{i+1} | x_i) (grpo.flow_sde.sde_step), one call per
                       step
    re-score           r'^g = R(x'^g_0)                                rewards the policy gradient uses

Stage 2 of candidate ``g`` is *bit for bit* ``flat_rollout(adapter, prompts, K, sc, seed=seed, iteration=k,
rows=[selected g])`` (tested), so the trainer's exact PPO-ratio machinery applies unchanged. Stage 1 samples with the
SDE by default (``pool_sampler="sde"``: the same noise as stage 2, so the pool reward predicts the regenerated
sample's reward) or the deterministic ODE from the same initial noise (``"ode"``; needs
``sampler.same_init_noise=False`` or all K candidates of a prompt would coincide).

The subset should be contrastive (GRPO learns from the reward spread inside a group): ``best_worst`` keeps the top
``ceil(N/2)`` and bottom ``floor(N/2)`` candidates. Cost per prompt: ``K T`` cheap + ``N T`` policy denoiser calls,
versus ``N T`` for plain GRPO; the pool pays off when a low-precision call is much cheaper than a bf16 one (NVFP4
GEMMs on Blackwell: ~4x bf16 throughput) -- on a CPU, emulation makes it *more* expensive (see bench/bench_quant.py).

Reference: Sol-RL (2025), low-precision exploration for diffusion RL; Flow-GRPO (Liu et al. 2025) for the SDE.

The generic entry point :func:`two_stage_rollout` takes any two "denoisers" (objects with
``velocity(x [B, ...], sigma [B], cond) -> v [B, ...]``; wrap a plain function with :class:`VelocityModel`);
:func:`pool_rollout` does it for a :class:`~diffusion_rl.adapters.DiffusionAdapter` and its quantized copy
(:class:`QuantizedAdapterView`); :class:`diffusion_rl.strategies.PoolStrategy` is this rollout as a strategy of the
diffusion GRPO trainer (``pool.enabled: true``).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from grpo.distributed import keyed_generator
from grpo.flow_sde import flow_chain, flow_sigmas
from grpo.selection import select_per_group

from .adapters import Cond, cond_select
from .pool_config import PoolConfig  # noqa: F401 - re-exported (the YAML ``pool:`` section)
from .sampling import (
    STREAM_INIT,
    STREAM_STEP,
    Rollout,
    SamplerConfig,
    denoise_rows,
    guided_velocity,
    keyed_noise,
)

STREAM_SELECT = 101  # key stream of the random part of the subset selection (distinct from sampling's 1..5)


class VelocityModel:
    """Wrap ``fn(x [B, ...], sigma [B], cond) -> v`` as a denoiser for :func:`two_stage_rollout`."""

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor, Cond], torch.Tensor],
                 device: torch.device | str = "cpu"):
        self.fn, self.device = fn, torch.device(device)

    def velocity(self, x, sigma, cond):
        return self.fn(x, sigma, cond).float()


class QuantizedAdapterView:
    """An adapter whose denoiser is the rollout copy ``model_q``; prompts, cache, decoding are the base adapter's.

    The conditioning (cached in the base adapter's dtype) and the latents are cast to the copy's dtype.
    """

    def __init__(self, adapter, model_q: torch.nn.Module):
        self.base = adapter
        self.model_q = model_q
        self.dtype = model_q.rollout_quant_config.torch_dtype
        self._view = copy.copy(adapter)  # shallow: shares pipe and prompt cache
        self._view.transformer = model_q
        self._view.dtype = self.dtype

    def velocity(self, latents, sigma, cond):
        return self._view.velocity(latents, sigma, {k: v.to(self.dtype) for k, v in cond.items()})

    def __getattr__(self, name):  # encode_prompts, decode, latent_shape, device, ...
        return getattr(self.base, name)


@dataclass
class PoolRollout:
    rollout: Rollout  # stage 2: rows p*N + slot, prompt_idx p; extra["pool_rows"]: the candidates' global indices
    pool_rewards: torch.Tensor  # [P', K] stage-1 rewards (P' = prompts handled here)
    selected: torch.Tensor  # [P', N] indices into each prompt's K candidates
    rewards: torch.Tensor | None  # [P' N] stage-2 rewards (None unless rescored here)
    pool_final: torch.Tensor | None  # [P' K, ...] stage-1 samples (kept when keep_pool=True)
    nfe_pool: int
    nfe_train: int
    seconds_pool: float
    seconds_train: float
    nonfinite_pool: int = 0


def candidate_noise(shape: tuple[int, ...], sc: SamplerConfig, seed: int, iteration: int, global_idx: Sequence[int],
                    prompt_idx: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x_init [R, *shape], step_noise [T, R, *shape])`` of candidates ``global_idx``, keyed as ``flat_rollout``."""
    init_keys = list(prompt_idx) if sc.same_init_noise else list(global_idx)
    x0 = keyed_noise(shape, seed, iteration, STREAM_INIT, init_keys)
    steps = keyed_noise((sc.num_steps, *shape), seed, iteration, STREAM_STEP, list(global_idx)).transpose(0, 1)
    return x0, steps


@torch.no_grad()
def explore(model, cond_rows: Cond, uncond_rows: Cond | None, x: torch.Tensor, noise: torch.Tensor, sc: SamplerConfig,
            iteration: int, ode: bool = False) -> torch.Tensor:
    """Stage 1 for one chunk: final samples ``[R, ...]`` (no records, no log-probs; :func:`grpo.flow_sde.flow_chain`).
    ``ode``: every step deterministic (``pool_sampler="ode"``)."""
    sigmas = flow_sigmas(sc.num_steps, sc.shift)
    dev = getattr(model, "device", x.device)
    mask = torch.zeros(sc.num_steps, dtype=torch.bool) if ode else sc.sde_mask(iteration)
    return flow_chain(lambda i, z: guided_velocity(model, z, sigmas[i], cond_rows, uncond_rows, sc.cfg_scale),
                      x.to(dev), sigmas, kind=sc.sde, eta=sc.eta, sde_mask=mask, noise=lambda i: noise[i].to(dev),
                      keep=False)[0]


def _finite_rows(r: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Replace non-finite pool rewards by their prompt's median finite reward (neutral for every selection rule)."""
    bad = ~torch.isfinite(r)
    if not bool(bad.any()):
        return r, 0
    out = r.clone()
    for p in range(r.shape[0]):
        ok = r[p][~bad[p]]
        out[p][bad[p]] = ok.median() if ok.numel() else 0.0
    return out, int(bad.sum())


@torch.no_grad()
def two_stage_rollout(policy, explorer, cond: Cond, score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                      latent_shape: tuple[int, ...], sc: SamplerConfig, pc: PoolConfig, *, seed: int,
                      iteration: int = 0,
                      prompt_ids: Sequence[int] | None = None, uncond: Cond | None = None,
                      generator: torch.Generator | None = None, rescore: bool = True,
                      keep_pool: bool = False) -> PoolRollout:
    """Pool with ``explorer``, select, regenerate with ``policy`` (see module docstring).

    Args:
        policy, explorer: denoisers (``.velocity(x, sigma[B], cond) -> v``; ``.device`` optional).
        cond: conditioning of ALL prompts of the iteration, ``{name: [P, ...]}`` (``{}`` for none).
        score_fn: ``(final latents [R, ...], prompt index [R]) -> rewards [R]`` (decode + reward).
        prompt_ids: the prompts handled here (a rank's share; default all ``P``); global indices are kept.
        uncond: ``{name: [1, ...]}`` unconditional embedding for CFG (``sc.cfg_scale != 1``).
        generator: for the random part of the selection; default keyed by ``(seed, iteration, STREAM_SELECT)``.
        rescore: score the stage-2 samples here (the trainer scores them itself).
    """
    if pc.pool_sampler == "ode" and sc.same_init_noise:
        raise ValueError("pool.pool_sampler='ode' with sampler.same_init_noise=True would make all K candidates of a "
                         "prompt identical; set sampler.same_init_noise=false or pool.pool_sampler='sde'")
    P = next(iter(cond.values())).shape[0] if cond else (max(prompt_ids) + 1 if prompt_ids else 1)
    pids = list(range(P)) if prompt_ids is None else [int(p) for p in prompt_ids]
    K, N = pc.pool_size, pc.train_size
    cfg_mult = 2 if uncond is not None and sc.cfg_scale != 1.0 else 1

    def rows_cond(pidx: torch.Tensor) -> tuple[Cond, Cond | None]:
        c = cond_select(cond, pidx) if cond else {}
        u = {k: v.expand(len(pidx), *v.shape[1:]) for k, v in uncond.items()} if cfg_mult == 2 else None
        return c, u

    # ---- stage 1: the pool ----------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    g_all = torch.tensor([p * K + j for p in pids for j in range(K)], dtype=torch.long, device="cpu")
    p_all = g_all // K
    finals, rewards = [], []
    for s in range(0, len(g_all), pc.chunk):
        g, pi = g_all[s:s + pc.chunk], p_all[s:s + pc.chunk]
        x0, noise = candidate_noise(latent_shape, sc, seed, iteration, g.tolist(), pi.tolist())
        c, u = rows_cond(pi)
        xf = explore(explorer, c, u, x0, noise, sc, iteration, ode=pc.pool_sampler == "ode")
        rewards.append(torch.as_tensor(score_fn(xf, pi), device="cpu").detach().float().cpu().reshape(-1))
        if keep_pool:
            finals.append(xf.detach().cpu())
    pool_rewards = torch.cat(rewards).view(len(pids), K)
    nfe_pool = len(g_all) * sc.num_steps * cfg_mult
    t1 = time.perf_counter()

    # ---- select ---------------------------------------------------------------------------------------------------
    gen = generator if generator is not None else keyed_generator(seed, iteration, STREAM_SELECT)
    finite, n_bad = _finite_rows(pool_rewards)
    selected = select_per_group(finite, N, pc.select, gen)  # [P', N]

    # ---- stage 2: regenerate the subset with the policy, with log-probs ---------------------------------------------
    t2 = time.perf_counter()
    pid_t = torch.tensor(pids, dtype=torch.long, device="cpu")
    g_sel = (pid_t[:, None] * K + selected).reshape(-1)
    p_sel = g_sel // K
    train_rows = (p_sel * N + torch.arange(N, device="cpu").repeat(len(pids)))
    x0, noise = candidate_noise(latent_shape, sc, seed, iteration, g_sel.tolist(), p_sel.tolist())
    c, u = rows_cond(p_sel)
    dev = getattr(policy, "device", torch.device("cpu"))
    final, records, nfe = denoise_rows(policy, x0.to(dev), c, u, sc, flow_sigmas(sc.num_steps, sc.shift),
                                       range(sc.num_steps), sc.sde_mask(iteration),
                                       lambda i: noise[i].to(dev), train_rows, p_sel)
    ro = Rollout(records, final, train_rows, p_sel, nfe + nfe_pool,
                 extra={"pool_rows": g_sel, "pool_rewards": pool_rewards, "selected": selected, "nfe_pool": nfe_pool,
                        "nfe_policy": nfe})
    out_r = torch.as_tensor(score_fn(final, p_sel),
                            device="cpu").detach().float().cpu().reshape(-1) if rescore else None
    t3 = time.perf_counter()
    return PoolRollout(ro, pool_rewards, selected, out_r, torch.cat(finals) if keep_pool else None, nfe_pool, nfe,
                       t1 - t0, t3 - t2, n_bad)


def pool_rollout(adapter, explorer, prompts: list[str], sc: SamplerConfig, pc: PoolConfig,
                 score_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, seed: int, iteration: int = 0,
                 prompt_ids: Sequence[int] | None = None, uncond_prompt: str = "", **kw) -> PoolRollout:
    """:func:`two_stage_rollout` for a :class:`DiffusionAdapter` (policy) and its :class:`QuantizedAdapterView`."""
    cond = adapter.encode_prompts(prompts)
    uncond = adapter.encode_prompts([uncond_prompt]) if sc.cfg_scale != 1.0 else None
    return two_stage_rollout(adapter, explorer, cond, score_fn, adapter.latent_shape, sc, pc, seed=seed,
                             iteration=iteration, prompt_ids=prompt_ids, uncond=uncond, **kw)
