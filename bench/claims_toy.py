"""The CPU analogue the seed-claim benches share (issue 25): the 2-D toy flow task of ``grpo/demo.py`` with a
reward the bench chooses, trained by the core's GRPO pieces, many short runs from one pretrained start.

``grpo/demo.py``'s trainer owns checkpoints, metrics and distributed sharding and fixes its reward; a bench needs
dozens of short runs that differ only in the advantage rule, the group size and the reward, all from the same
pretrained model. So this module keeps the demo's model, pretraining and sampler (imported, not copied) and
restates only its inner loop, single-process, with a pluggable reward::

    rollout (Flow-GRPO SDE, stored latents and log-probs)  ->  reward(x, c, gen) -> (observed r[N], components, clean
    q[N])
    ->  grpo.train_step.compute_advantages(GRPOConfig, r, group_ids, components)
    ->  inner epochs of grpo.loss.clipped_pg_loss (+ grpo.loss.flow_kl to the pretrained model) and guarded_step

Evaluation is the demo's: ODE samples from fixed noise (``eval_samples`` per run, every prompt equally), scored by
the *clean* reward (without the observation noise a bench may add to the training reward).

Determinism: the pretrained start depends only on ``seed``; iteration ``it`` of a run draws its prompts, SDE noise and
reward noise from ``grpo.distributed.keyed_generator(seed, it, stream)``, so rerunning a bench gives the same numbers
on the same machine and arms of one seed see the same prompts at every iteration.
"""

from __future__ import annotations

import copy
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from grpo.demo import ToyModelConfig, ToySamplerConfig, ToyVelocity, mode_centers, pretrain, rollout  # noqa: E402
from grpo.distributed import keyed_generator  # noqa: E402
from grpo.flow_sde import flow_sigmas, sde_step  # noqa: E402
from grpo.loss import clipped_pg_loss, reference_kl  # noqa: E402
from grpo.train_step import GRPOConfig, NonFiniteGuard, compute_advantages, guarded_step  # noqa: E402

# reward(x[N,2], c[N], gen) -> (observed total r[N], components {name: [N]} or None, clean total q[N])
Reward = Callable[[torch.Tensor, torch.Tensor, torch.Generator],
                  tuple[torch.Tensor, dict[str, torch.Tensor] | None, torch.Tensor]]

STREAM_PROMPTS, STREAM_SDE, STREAM_REWARD = 0, 1, 2


@dataclass
class RunConfig:
    """One training run of an arm (every arm of a bench uses the same values except the GRPO section)."""

    iterations: int = 60  # GRPO iterations
    prompts_per_iter: int = 4  # prompts (groups) per iteration
    lr: float = 2e-3  # Adam learning rate (the demo's)
    inner_epochs: int = 2  # passes over each iteration's rollouts (the demo's)
    eval_samples: int = 256  # ODE samples per evaluation


def pretrained(seed: int, model_cfg: ToyModelConfig) -> dict[str, torch.Tensor]:
    """The demo's flow-matching pretraining from ``seed``: the shared start of every arm of that seed."""
    torch.manual_seed(seed)
    model = ToyVelocity(model_cfg.hidden, model_cfg.num_prompts)
    pretrain(model, model_cfg, torch.Generator().manual_seed(seed))
    return {k: v.clone() for k, v in model.state_dict().items()}


def target_mode(c: torch.Tensor, model_cfg: ToyModelConfig) -> torch.Tensor:
    """``[N,2]``: the ring mode prompt ``c`` is rewarded on (the demo's ``(c * num_modes) // num_prompts``)."""
    return mode_centers(model_cfg)[(c * model_cfg.num_modes) // model_cfg.num_prompts]


def sample_sde(state: dict, c: torch.Tensor, sampler: ToySamplerConfig, model_cfg: ToyModelConfig,
               gen: torch.Generator) -> torch.Tensor:
    """``[N,2]`` SDE samples (the rollout distribution) of the policy with weights ``state`` for prompts ``c``."""
    model = ToyVelocity(model_cfg.hidden, model_cfg.num_prompts)
    model.load_state_dict(state)
    noise = torch.randn(c.shape[0], sampler.num_steps + 1, 2, generator=gen)
    return rollout(model, c, sampler, noise)[0]


def evaluate(model: ToyVelocity, reward: Reward, model_cfg: ToyModelConfig, sampler: ToySamplerConfig, n: int,
             seed: int) -> dict[str, float]:
    """Clean reward of ``n`` ODE samples from fixed noise, and each component's mean when the reward has them."""
    c = torch.arange(n) % model_cfg.num_prompts
    noise = torch.randn(n, sampler.num_steps + 1, 2, generator=keyed_generator(seed, 10**6))
    x = rollout(model, c, sampler, noise, sde=False)[0]
    _, comps, clean = reward(x, c, torch.Generator().manual_seed(0))
    out = {"reward": float(clean.mean())}
    for name, v in (comps or {}).items():
        out[name] = float(v.mean())
    return out


def train_arm(start: dict, grpo: GRPOConfig, reward: Reward, run: RunConfig, model_cfg: ToyModelConfig,
              sampler: ToySamplerConfig, seed: int, return_state: bool = False):
    """GRPO from ``start`` for ``run.iterations``; returns the final evaluation (``evaluate``'s keys), or
    ``(evaluation, final state_dict)`` with ``return_state``."""
    torch.manual_seed(seed)
    model = ToyVelocity(model_cfg.hidden, model_cfg.num_prompts)
    model.load_state_dict(start)
    reference = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=run.lr)
    guard = NonFiniteGuard(grpo.max_nonfinite)
    g, p, T = grpo.group_size, run.prompts_per_iter, sampler.num_steps
    sigmas = flow_sigmas(T)
    smax = float(sigmas[1])
    for it in range(run.iterations):
        c = torch.randint(model_cfg.num_prompts, (p,), generator=keyed_generator(seed, it, STREAM_PROMPTS))
        c = c.repeat_interleave(g)
        group_ids = torch.arange(p).repeat_interleave(g)
        noise = torch.randn(p * g, T + 1, 2, generator=keyed_generator(seed, it, STREAM_SDE))
        x, lats, old_lp = rollout(model, c, sampler, noise)
        r, comps, _ = reward(x, c, keyed_generator(seed, it, STREAM_REWARD))
        adv = compute_advantages(grpo, r, group_ids, comps)
        b = p * g
        x_t, x_next = lats[:-1].reshape(T * b, 2), lats[1:].reshape(T * b, 2)
        s, s_next = sigmas[:-1].repeat_interleave(b), sigmas[1:].repeat_interleave(b)
        cc = c.repeat(T)
        with torch.no_grad():
            ref = sde_step(reference(x_t, s, cc), x_t, s, s_next, kind=sampler.sde, eta=sampler.eta, sigma_max=smax,
                           prev_sample=x_next)
        for _ in range(run.inner_epochs):
            st = sde_step(model(x_t, s, cc), x_t, s, s_next, kind=sampler.sde, eta=sampler.eta, sigma_max=smax,
                          prev_sample=x_next)
            kl = reference_kl(grpo.kl_type, st.log_prob, ref.log_prob, st.mean, ref.mean, st.std,
                              st.std_dev_t).reshape(T, b).T
            lo = clipped_pg_loss(st.log_prob.reshape(T, b).T, old_lp.T, adv.values, adv.mask[:, None], grpo.clip_low,
                                 grpo.clip_high, kl, grpo.kl_coef, grpo.loss_reduction)
            lo.loss.backward()
            guarded_step(model.parameters(), opt, grpo.max_grad_norm, guard)
    ev = evaluate(model, reward, model_cfg, sampler, run.eval_samples, seed)
    return (ev, {k: v.detach().clone() for k, v in model.state_dict().items()}) if return_state else ev


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (sample std / sqrt(n); 0 for one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def fmt(values: list[float], digits: int = 3) -> str:
    m, se = mean_se(values)
    return f"{m:.{digits}f} +- {se:.{digits}f}"
