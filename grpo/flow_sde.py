"""The flow-SDE chain: one stochastic step of a flow-matching sampler with its Gaussian log-prob, the loop of such
steps over a schedule, and which steps are stochastic (Mix).

Written once, used by every sampler of the project: the diffusion rollouts and evaluation (SD3/FLUX/Wan latents),
the flow-matching action heads of VLA policies (pi0-style action chunks), the video world model and the toy demo.

* :func:`sde_step` -- one step ``sigma -> sigma_next`` (the kinds below);
* :func:`chain_step` / :func:`flow_chain` -- the loop ``x_i -> x_{i+1}`` over a schedule (:func:`flow_sigmas`) with
  hooks for the model, the noise of each step (keyed per step / sample) and the SDE/ODE mask, keeping the latents
  and log-probs of every step (:class:`ChainStep`);
* :func:`mix_sde_mask` -- MixGRPO / BranchGRPO-Mix: only a sliding window of steps (:func:`sliding_window`) is SDE,
  plus the steps a caller forces (BranchGRPO's split steps); the others are ODE steps.

Convention (rectified flow, as diffusers' ``FlowMatchEulerDiscreteScheduler``)::

    x_sigma = (1 - sigma) * x_0 + sigma * eps,      sigma: 1 (noise) -> 0 (data)
    v       = model(x_sigma, sigma) ~ eps - x_0      (the predicted velocity)
    dt      = sigma_next - sigma < 0

Every kind below draws ``x_next ~ N(mean, std^2 I)`` and returns ``log N(x_next; mean, std^2)``
computed in float32 whatever the model's dtype (bf16 log-probs make the PPO ratio drift from 1).

``kind`` selects the SDE:

* ``"flow_grpo"`` -- Flow-GRPO (Liu et al. 2025, Eq. 9): the reverse SDE with the same marginals
  as the ODE, diffusion coefficient ``sigma_t = eta * sqrt(sigma / (1 - sigma))``::

      mean = x + [v + sigma_t^2 / (2 sigma) * (x + (1 - sigma) v)] * dt
      std  = sigma_t * sqrt(-dt)

  At the first step of a schedule (``sigma == 1``) the denominator has a pole; as in the reference
  implementation (Flow-GRPO's ``sde_step_with_logprob``: ``sqrt(sigma / (1 - where(sigma == 1, sigma_max,
  sigma)))`` with ``sigma_max = sigmas[1]``) only that denominator is replaced by ``1 - sigma_max``, where
  ``sigma_max`` is the schedule's *second* sigma; the numerator stays ``sigma`` and no other step is capped.
  Every caller passes ``sigma_max``; a ``sigma == 1`` step without it is refused. Log-prob: the exact
  Gaussian density (the reference's).
* ``"dance_grpo"`` -- DanceGRPO (Xue et al. 2025, Sec. 3.2): ``std = eta * sqrt(-dt)`` and the score
  correction ``s = -(x - (1 - sigma) x0_hat) / sigma^2`` with ``x0_hat = x - sigma v``::

      mean = x + v dt - 0.5 eta^2 s dt
* ``"cps"`` -- Coefficients-Preserving Sampling (Wang & Yu 2025, Eq. 12): keeps the coefficients of
  ``x0_hat`` and noise on the schedule, ``std = sigma_next * sin(eta * pi / 2)``::

      mean = (1 - sigma_next) x0_hat + sqrt(sigma_next^2 - std^2) * eps_hat,  eps_hat = x + (1 - sigma) v

  Log-prob as in the reference implementations (the official CPS code and Flow-GRPO's ``sde_type="cps"``):
  ``-(x_next - mean)^2`` averaged (or summed) over the non-batch dims, no ``1 / (2 std^2)``, no constants.
  The PPO ratio of this "log-prob" is what the reference code clips.
* ``"cps_gaussian"`` -- the same CPS step with the exact Gaussian log-density ``log N(x_next; mean, std^2)``
  (a named option, not the reference): its log-ratio is the reference's times ``1 / (2 std^2)`` (0.68 at
  ``sigma_next = 0.964``, 10.1 at 0.25 for ``eta = 0.7``), a true likelihood ratio, so a clip range bounds the
  same quantity at every step.
* ``"ode"`` -- the deterministic Euler step ``x + v dt`` (``std = 0``, log-prob 0).

All SDE kinds reduce to the ODE step as ``eta -> 0`` (tested). Where ``std == 0`` (the ODE, or CPS at
``sigma_next = 0``) the step is deterministic: ``log_prob`` is 0 and ``stochastic`` is False; callers
must mask such steps out of the policy loss.

A deterministic step draws no noise (no generator advances).

Shapes: ``x``, ``v``, ``noise``, ``prev_sample``: ``[B, ...]``; ``sigma``, ``sigma_next``: python
floats or tensors broadcastable to ``[B]``; ``log_prob``: ``[B]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import torch

from .device import randn

SDEKind = Literal["flow_grpo", "dance_grpo", "cps", "cps_gaussian", "ode"]
SDE_KINDS: tuple[str, ...] = ("flow_grpo", "dance_grpo", "cps", "cps_gaussian", "ode")
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass
class SDEStepOutput:
    """Result of one step. ``mean``/``std``/``std_dev_t`` are kept for the Flow-GRPO KL on Gaussian means."""

    prev_sample: torch.Tensor  # [B, ...] float32
    log_prob: torch.Tensor  # [B] float32
    mean: torch.Tensor  # [B, ...] float32
    std: torch.Tensor  # [B, 1, ..., 1] float32 (0 where deterministic): the step's noise std
    # [B, 1, ..., 1] float32: the scale the reference implementations return next to the mean and divide the KL by
    # (Flow-GRPO's ``std_dev_t``): sigma_t = std / sqrt(-dt) for flow_grpo, eta for dance_grpo (std / sqrt(-dt)),
    # std itself for cps / cps_gaussian; 0 where deterministic. See :func:`grpo.loss.flow_kl`.
    std_dev_t: torch.Tensor

    @property
    def stochastic(self) -> torch.Tensor:
        """``[B]`` bool: True where the step drew noise (and its log-prob is meaningful)."""
        return self.std.reshape(-1) > 0


def _per_sample(s: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Turn a scalar or ``[B]`` sigma into a float32 tensor shaped ``[B, 1, ..., 1]``."""
    t = torch.as_tensor(s, dtype=torch.float32, device=like.device)
    if t.dim() == 0:
        t = t.expand(like.shape[0])
    if t.shape != (like.shape[0],):
        raise ValueError(f"sigma must be a scalar or have shape [{like.shape[0]}], got {tuple(t.shape)}")
    return t.reshape(-1, *([1] * (like.dim() - 1)))


def sde_step(
    v: torch.Tensor,
    x: torch.Tensor,
    sigma: float | torch.Tensor,
    sigma_next: float | torch.Tensor,
    *,
    kind: SDEKind = "flow_grpo",
    eta: float = 0.7,
    sigma_max: float | None = None,
    prev_sample: torch.Tensor | None = None,
    noise: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    reduce: Literal["mean", "sum"] = "mean",
) -> SDEStepOutput:
    """Take one step ``sigma -> sigma_next`` and return the sample and its log-prob.

    Args:
        v: predicted velocity ``[B, ...]`` (any dtype; computed in float32).
        x: current sample ``x_sigma`` ``[B, ...]``.
        sigma, sigma_next: current and next noise level, ``1 >= sigma > sigma_next >= 0``.
        kind: which SDE (see module docstring).
        eta: noise level (``a`` in Flow-GRPO, ``eta`` in DanceGRPO, the angle fraction in CPS).
        sigma_max: Flow-GRPO only: the schedule's second sigma (``sigmas[1]``); at ``sigma == 1`` it replaces
            sigma in the denominator of ``sqrt(sigma / (1 - sigma))`` (the reference's rule). Required when a
            flow_grpo step starts at ``sigma == 1``; ignored elsewhere.
        prev_sample: a stored transition ``x_next``; when given, nothing is sampled and the
            log-prob of this sample under the (new) mean/std is returned (PPO ratio recomputation).
        noise: standard-normal noise ``[B, ...]`` to use instead of drawing it (seeded branching).
        generator: generator for the draw when neither ``prev_sample`` nor ``noise`` is given. A deterministic
            step (``kind="ode"`` or ``eta == 0``) draws nothing and ignores ``noise``.
        reduce: ``"mean"`` (Flow-GRPO/DanceGRPO convention: average over the non-batch dims) or
            ``"sum"`` (the exact joint log-density of the step).
    """
    if kind not in SDE_KINDS:
        raise ValueError(f"unknown SDE kind {kind!r}; expected one of {SDE_KINDS}")
    if v.shape != x.shape:
        raise ValueError(f"velocity shape {tuple(v.shape)} != sample shape {tuple(x.shape)}")
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    x32 = x.float()
    v32 = v.float()
    s = _per_sample(sigma, x32)
    sn = _per_sample(sigma_next, x32)
    dt = sn - s

    if kind == "ode" or eta == 0.0:
        mean = x32 + v32 * dt
        std = torch.zeros_like(s)
        std_dev_t = std
    elif kind == "flow_grpo":
        at_one = s == 1
        if sigma_max is None and bool(at_one.any()):
            raise ValueError("flow_grpo SDE step at sigma = 1 needs sigma_max, the schedule's second sigma "
                             "(pass sigma_max=float(sigmas[1]))")
        denom_sigma = torch.where(at_one, torch.full_like(s, 0.0 if sigma_max is None else float(sigma_max)), s)
        sigma_t = eta * torch.sqrt(s / (1 - denom_sigma))
        mean = x32 * (1 + sigma_t**2 / (2 * s) * dt) + v32 * (1 + sigma_t**2 * (1 - s) / (2 * s)) * dt
        std = sigma_t * torch.sqrt(-dt)
        std_dev_t = sigma_t
    elif kind == "dance_grpo":
        x0_hat = x32 - s * v32
        score = -(x32 - (1 - s) * x0_hat) / s**2
        mean = x32 + v32 * dt - 0.5 * eta**2 * score * dt
        std = eta * torch.sqrt(-dt)
        std_dev_t = torch.full_like(s, float(eta))
    else:  # cps, cps_gaussian
        x0_hat = x32 - s * v32
        eps_hat = x32 + (1 - s) * v32
        std = sn * math.sin(eta * math.pi / 2)
        mean = (1 - sn) * x0_hat + torch.sqrt(torch.clamp(sn**2 - std**2, min=0.0)) * eps_hat
        std_dev_t = std

    if prev_sample is None:
        if noise is not None and noise.shape != x32.shape:
            raise ValueError(f"noise shape {tuple(noise.shape)} != sample shape {tuple(x32.shape)}")
        if kind == "ode" or eta == 0.0:  # deterministic: nothing drawn, no generator advanced
            prev_sample = mean
        else:
            if noise is None:
                noise = randn(x32.shape, generator, x32.device)  # on the generator's device, then moved
            prev_sample = mean + std * noise.float()
    elif prev_sample.shape != x32.shape:
        raise ValueError(f"prev_sample shape {tuple(prev_sample.shape)} != sample shape {tuple(x32.shape)}")

    if kind == "cps" and eta > 0:
        log_prob = cps_log_prob(prev_sample.detach().float(), mean, std, reduce=reduce)
    else:
        log_prob = gaussian_log_prob(prev_sample.detach().float(), mean, std, reduce=reduce)
    std_dev_t = torch.where(std > 0, std_dev_t, torch.zeros_like(std_dev_t))
    return SDEStepOutput(prev_sample=prev_sample.float(), log_prob=log_prob, mean=mean, std=std, std_dev_t=std_dev_t)


def cps_log_prob(
    sample: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, reduce: Literal["mean", "sum"] = "mean"
) -> torch.Tensor:
    """The reference CPS "log-prob" ``-(sample - mean)^2`` per element, reduced over non-batch dims to ``[B]``
    (the official CPS code and Flow-GRPO's ``cps``: no ``1 / (2 std^2)``, no normalizing constants).

    Rows with ``std == 0`` (CPS at ``sigma_next = 0``: deterministic) get 0.
    """
    lp = -((sample - mean) ** 2)
    lp = torch.where(std.expand_as(mean) > 0, lp, torch.zeros_like(lp))
    dims = tuple(range(1, lp.dim()))
    if not dims:
        return lp
    return lp.mean(dim=dims) if reduce == "mean" else lp.sum(dim=dims)


def gaussian_log_prob(
    sample: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, reduce: Literal["mean", "sum"] = "mean"
) -> torch.Tensor:
    """``log N(sample; mean, std^2)`` per element, reduced over non-batch dims to ``[B]``.

    Rows with ``std == 0`` (deterministic steps) get log-prob 0 instead of +/-inf.
    """
    std_b = std.expand_as(mean)
    safe = torch.where(std_b > 0, std_b, torch.ones_like(std_b))
    lp = -((sample - mean) ** 2) / (2 * safe**2) - torch.log(safe) - _LOG_SQRT_2PI
    lp = torch.where(std_b > 0, lp, torch.zeros_like(lp))
    dims = tuple(range(1, lp.dim()))
    if not dims:
        return lp
    return lp.mean(dim=dims) if reduce == "mean" else lp.sum(dim=dims)


def flow_sigmas(num_steps: int, shift: float = 1.0, device: torch.device | str = "cpu") -> torch.Tensor:
    """The ``num_steps + 1`` noise levels ``1 -> 0`` of a flow-matching sampler, with SD3's time shift (on
    ``device``; the samplers index them one level at a time, so the CPU serves any model).

    ``sigma' = shift * sigma / (1 + (shift - 1) * sigma)`` (Esser et al. 2024, Eq. 23); ``shift=1`` is uniform.
    """
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    if shift <= 0:
        raise ValueError(f"shift must be > 0, got {shift}")
    s = torch.linspace(1.0, 0.0, num_steps + 1, device=device, dtype=torch.float32)
    return shift * s / (1 + (shift - 1) * s)


# ---- the chain: a whole schedule of steps -------------------------------------------------------------------------
@dataclass
class ChainStep:
    """One step ``x_i -> x_{i+1}`` of :func:`flow_chain` as it was computed (kept with ``keep=True``).

    ``x``: ``[B, ...]`` the step's input as given; ``x_next``: ``[B, ...]`` float32; ``log_prob``: ``[B]`` float32
    (0 on rows that took the ODE step); ``sde``: ``[B]`` bool, the rows that drew noise with ``std > 0``.
    """

    index: int
    sigma: torch.Tensor  # 0-dim, the schedule's entry i
    sigma_next: torch.Tensor  # 0-dim, entry i + 1
    x: torch.Tensor
    x_next: torch.Tensor
    log_prob: torch.Tensor
    sde: torch.Tensor

    @property
    def stochastic(self) -> bool:
        """True when every row of the step drew noise (the step enters the policy loss)."""
        return bool(self.sde.all())


def chain_step(
    v: torch.Tensor,
    x: torch.Tensor,
    sigma: float | torch.Tensor,
    sigma_next: float | torch.Tensor,
    *,
    sde: bool | torch.Tensor = True,
    kind: SDEKind = "flow_grpo",
    eta: float = 0.7,
    sigma_max: float | None = None,
    noise: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    reduce: Literal["mean", "sum"] = "mean",
) -> SDEStepOutput:
    """One step of a chain: :func:`sde_step` of ``kind`` on the rows where ``sde`` (a bool, or ``[B]`` bool), the
    deterministic ODE step ``x + v dt`` (log-prob 0) on the others.

    Where only some rows are SDE, the two results are merged row by row (``mean``/``std`` included).
    """
    if isinstance(sde, bool) or sde.dim() == 0:
        some = every = bool(sde)
    else:
        some, every = bool(sde.any()), bool(sde.all())
    if not some:
        return sde_step(v, x, sigma, sigma_next, kind="ode", eta=eta, sigma_max=sigma_max, reduce=reduce)
    out = sde_step(v, x, sigma, sigma_next, kind=kind, eta=eta, sigma_max=sigma_max, noise=noise,
                   generator=generator, reduce=reduce)
    if every:
        return out
    ode = sde_step(v, x, sigma, sigma_next, kind="ode", eta=eta, sigma_max=sigma_max, reduce=reduce)
    rows = sde.reshape(-1, *([1] * (x.dim() - 1)))

    def pick(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(rows if a.dim() > 1 else sde, a, b)

    return SDEStepOutput(pick(out.prev_sample, ode.prev_sample), pick(out.log_prob, torch.zeros_like(out.log_prob)),
                         pick(out.mean, ode.mean), pick(out.std, ode.std), pick(out.std_dev_t, ode.std_dev_t))


def flow_chain(
    velocity: Callable[[int, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    sigmas: torch.Tensor,
    *,
    kind: SDEKind = "flow_grpo",
    eta: float = 0.7,
    steps: Sequence[int] | None = None,
    sde_mask: torch.Tensor | None = None,
    noise: Callable[[int], torch.Tensor | None] | None = None,
    generator: torch.Generator | None = None,
    reduce: Literal["mean", "sum"] = "mean",
    keep: bool = True,
) -> tuple[torch.Tensor, list[ChainStep]]:
    """Integrate ``x`` along the schedule ``sigmas [T+1]`` (``1 -> 0``): at each step ``i`` of ``steps`` (default
    all ``T``) ``v_i = velocity(i, x_i)``, then :func:`chain_step` ``(v_i, x_i, sigmas[i], sigmas[i+1])``. Every
    flow-matching sampler of the project is this loop (diffusion rollouts and evaluation, the action heads, the
    video world model, the toy demo).

    Hooks:
        velocity: ``(i, x [B, ...]) -> v [B, ...]``, the model at ``sigmas[i]`` (the caller holds the conditioning).
        sde_mask: which steps are SDE steps, ``[T]`` (one flag per step, e.g. :func:`mix_sde_mask`) or ``[B, T]``
            (per row, e.g. one random step per action chunk); ``None``: every step. The rest are ODE steps.
        noise: ``i -> [B, ...]`` the standard normal of step ``i`` (keyed noise), asked only on steps where some
            row is SDE; ``None`` (or a hook returning ``None``): drawn from ``generator``.
        keep: return the :class:`ChainStep` of every step (latents and log-probs, what a trainer recomputes);
            ``False`` keeps nothing (evaluation, exploration).

    ``sigma_max`` of the Flow-GRPO step is the schedule's ``sigmas[1]``. Returns ``(x_final [B, ...], steps)``.
    """
    sigma_max = float(sigmas[1]) if len(sigmas) > 1 else None
    records: list[ChainStep] = []
    for i in range(len(sigmas) - 1) if steps is None else steps:
        v = velocity(i, x)
        sde = True if sde_mask is None else sde_mask[..., i]
        if isinstance(sde, torch.Tensor) and sde.dim() == 0:
            sde = bool(sde)
        some = sde if isinstance(sde, bool) else bool(sde.any())
        eps = noise(i) if some and noise is not None else None
        out = chain_step(v, x, sigmas[i], sigmas[i + 1], sde=sde, kind=kind, eta=eta, sigma_max=sigma_max,
                         noise=eps, generator=generator, reduce=reduce)
        if keep:
            records.append(ChainStep(i, sigmas[i], sigmas[i + 1], x, out.prev_sample, out.log_prob, out.stochastic))
        x = out.prev_sample
    return x, records


# ---- Mix: which steps are SDE ---------------------------------------------------------------------------------------
def sliding_window(iteration: int, num_positions: int, window: int, stride: int = 1) -> list[int]:
    """MixGRPO's sliding window (Li et al. 2025, "MixGRPO: Unlocking Flow-based GRPO Efficiency with Mixed ODE-SDE"):
    positions ``[start, start + window)`` active at ``iteration``; the window advances one position every ``stride``
    iterations and wraps around. The SDE window of :func:`mix_sde_mask`; BranchGRPO's depth pruning slides it over
    tree depths (:func:`grpo.tree.tree_advantages`)."""
    if not 1 <= window <= num_positions:
        raise ValueError(f"window must be in [1, {num_positions}], got {window}")
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    start = (iteration // stride) % (num_positions - window + 1)
    return list(range(start, start + window))


def mix_sde_mask(num_steps: int, iteration: int = 0, *, window: int = 0, stride: int = 1, sde_last_step: bool = False,
                 force: Sequence[int] = ()) -> torch.Tensor:
    """``[T]`` bool on the CPU: which of ``T = num_steps`` steps draw SDE noise at ``iteration`` (the rest are ODE
    steps: no noise, no log-prob, not trained).

    * default: every step but the last (``sigma -> 0``: its noise would stay in the sample) unless ``sde_last_step``;
    * MixGRPO / BranchGRPO-Mix (``window > 0``): only the ``window`` consecutive steps of :func:`sliding_window`
      over those steps, advancing one step every ``stride`` iterations;
    * ``force``: steps that are SDE whatever the window says (BranchGRPO's split steps: siblings must diverge).
    """
    mask = torch.ones(num_steps, dtype=torch.bool, device="cpu")
    last_is_ode = not sde_last_step and num_steps > 1
    if last_is_ode:
        mask[-1] = False
    if window:
        positions = num_steps - 1 if last_is_ode else num_steps
        mask[:] = False
        mask[sliding_window(iteration, positions, min(window, positions), stride)] = True
    for s in force:
        mask[s] = True
    return mask
