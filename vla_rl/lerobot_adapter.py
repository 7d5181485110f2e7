"""Adapter for LeRobot's flow-matching policies (SmolVLA, pi0) -- used only when ``lerobot`` is installed.

LeRobot's ``sample_actions`` integrates the flow ODE ``x <- x + dt * v_theta(x, t)`` from ``t = 1`` (noise)
to 0 with ``dt = -1 / num_steps`` -- the same rectified-flow convention as :mod:`grpo.flow_sde`. The adapter
makes that loop stochastic *without copying LeRobot's model code*: while ``sample_actions`` runs, the
model's ``denoise_step`` is wrapped so that at step ``i``

    v      = denoise_step(..., x_t, t)                      (the policy's velocity)
    x_next ~ N(mu(x_t, v), std^2)  via grpo.flow_sde.sde_step   (stochastic steps per ``noise_mode``)
    return (x_next - x_t) / dt                              (so LeRobot's own Euler update lands on x_next)

and ``(x_t, x_next, log-prob)`` are recorded. Recomputation (``chunk_log_prob``) replays the stored chain the
same way: at step ``i`` the wrapper substitutes the stored ``x_t``, evaluates ``v`` with gradients and
returns the log-prob of the stored ``x_{t+1}``. If LeRobot runs the VLM prefix under ``no_grad`` the RL
gradient reaches the action expert only (the VLM is then frozen for RL, as in several pi0 RL recipes).

The LeRobot batch must already be preprocessed (normalized, tokenized) by the policy's preprocessor,
passed as ``preprocessor``; ``postprocessor`` (un-normalization) is applied to actions sent to the env.
Devices: the adapter runs where the LeRobot policy is (``policy.to(device)``; :attr:`LeRobotFlowAdapter.device`,
which ``vla_rl.rollout`` moves observation batches to). The SDE noise and step indices are drawn from the (CPU)
generator and moved, the step masks are CPU tensors, the chain and log-probs are on the policy's device.
Not exercised in this repository's CI (lerobot is optional); the tests skip cleanly without it.
"""

from __future__ import annotations

import importlib.util
from collections import deque
from typing import Any, Callable

import torch

from grpo.device import module_device, randint, randn
from grpo.flow_sde import flow_sigmas, sde_step

from .action_head import FlowHeadConfig, HeadLogProb, HeadSample


def lerobot_available() -> bool:
    return importlib.util.find_spec("lerobot") is not None


def require_lerobot() -> None:
    if not lerobot_available():
        raise ImportError("the LeRobot adapter needs lerobot (SmolVLA/pi0): pip install 'branchloop[lerobot]' "
                          "(on Python 3.11: pip install --no-deps lerobot)")


def load_lerobot_policy(path: str, kind: str = "smolvla"):
    """``SmolVLAPolicy`` / ``PI0Policy`` from a local directory (``from_pretrained``); no hub access at run time."""
    require_lerobot()
    if kind == "smolvla":
        from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy as cls
    elif kind == "pi0":
        from lerobot.policies.pi0.modeling_pi0 import PI0Policy as cls
    else:
        raise ValueError(f"unknown LeRobot policy kind {kind!r}; expected 'smolvla' or 'pi0'")
    return cls.from_pretrained(path)


class LeRobotFlowAdapter:
    """The RL interface of :class:`vla_rl.policy.SmallVLA` around a LeRobot flow-matching policy."""

    def __init__(self, policy: Any, flow: FlowHeadConfig | None = None, action_dim: int | None = None,
                 preprocessor: Callable[[dict], dict] | None = None, postprocessor: Callable[[torch.Tensor], torch.Tensor] | None = None):
        require_lerobot()
        self.policy = policy
        self.model = policy.model
        self.flow = flow or FlowHeadConfig()
        lcfg = policy.config
        self.num_steps = int(getattr(lcfg, "num_steps", None) or getattr(lcfg, "num_inference_steps", 10))
        self.flow.num_steps = self.num_steps
        self.sigmas = flow_sigmas(self.num_steps)
        self.action_dim = action_dim
        self.pre = preprocessor or (lambda b: b)
        self.post = postprocessor or (lambda a: a)
        self.cfg = lcfg
        self._queue: deque[torch.Tensor] = deque()

    @property
    def device(self) -> torch.device:
        """The LeRobot policy's device (its parameters')."""
        return module_device(self.model)

    # LeRobot's own interface, delegated
    def reset(self) -> None:
        self._queue.clear()
        self.policy.reset()

    def forward(self, batch: dict):
        return self.policy.forward(self.pre(batch))

    @torch.no_grad()
    def predict_action_chunk(self, batch: dict, stochastic: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.sample_chunk(batch, stochastic, generator).actions

    @torch.no_grad()
    def select_action(self, batch: dict, stochastic: bool = False, generator: torch.Generator | None = None) -> torch.Tensor:
        if not self._queue:
            n = int(getattr(self.cfg, "n_action_steps", 1))
            self._queue.extend(self.predict_action_chunk(batch, stochastic, generator)[:, :n].transpose(0, 1))
        return self._queue.popleft()

    @property
    def tokens_per_chunk(self) -> int:
        return self.num_steps

    # ---- the SDE loop through LeRobot's denoise_step ---------------------------------------------
    def _sde_kwargs(self) -> dict:
        return dict(kind=self.flow.sde_kind, eta=self.flow.eta, sigma_max=float(self.sigmas[1]),
                    reduce=self.flow.logprob_reduce)

    def _run(self, batch: dict, step_fn: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor], noise: torch.Tensor | None):
        """Run ``policy``'s ``sample_actions`` with ``denoise_step`` wrapped; ``step_fn(i, x_t, v) -> x_next``."""
        orig = self.model.denoise_step
        counter = {"i": 0}

        def wrapped(*args, **kwargs):
            vals = list(args) + list(kwargs.values())
            x_t = next(a for a in vals if isinstance(a, torch.Tensor) and a.dim() == 3)
            i = counter["i"]
            v = orig(*args, **kwargs)
            x_next = step_fn(i, x_t, v)
            counter["i"] += 1
            dt = self.sigmas[i + 1] - self.sigmas[i]
            return ((x_next - x_t.float()) / dt).to(v.dtype)

        self.model.denoise_step = wrapped
        try:
            b = self.pre(batch)
            if hasattr(self.policy, "_get_action_chunk"):
                self.policy._get_action_chunk(b, noise=noise)
            else:
                self.policy.predict_action_chunk(b, noise=noise)
        finally:
            self.model.denoise_step = orig
        if counter["i"] != self.num_steps:
            raise RuntimeError(f"LeRobot ran {counter['i']} denoising steps, expected {self.num_steps}")

    @torch.no_grad()
    def sample_chunk(self, batch: dict, stochastic: bool = True, generator: torch.Generator | None = None) -> HeadSample:
        chain: list[torch.Tensor] = []
        logps: list[torch.Tensor] = []
        masks: list[torch.Tensor] = []
        one = self.flow.noise_mode == "one"
        state: dict[str, torch.Tensor] = {}

        def step(i: int, x_t: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            b = x_t.shape[0]
            if i == 0:
                chain.append(x_t.detach().float().clone())
                state["j"] = randint(0, self.num_steps, (b,), generator, "cpu")
            m = torch.full((b,), stochastic and self.flow.eta > 0, dtype=torch.bool, device="cpu")
            if one:
                m &= state["j"] == i
            s, sn = self.sigmas[i], self.sigmas[i + 1]
            ode = x_t.float() + v.float() * (sn - s)
            out = sde_step(v, x_t, s, sn, noise=randn(x_t.shape, generator, x_t.device), **self._sde_kwargs())
            x_next = torch.where(m[:, None, None].to(x_t.device), out.prev_sample, ode)
            chain.append(x_next.clone())
            logps.append(torch.where(m.to(x_t.device), out.log_prob, torch.zeros_like(out.log_prob)))
            masks.append(m)
            return x_next

        self._run(batch, step, None)
        actions = chain[-1] if self.action_dim is None else chain[-1][..., : self.action_dim]
        return HeadSample(actions=self.post(actions), record={"chain": torch.stack(chain, 1), "step_mask": torch.stack(masks, 1)},
                          logp=torch.stack(logps, 1), step_mask=torch.stack(masks, 1))

    def chunk_log_prob(self, batch: dict, record: dict[str, torch.Tensor]) -> HeadLogProb:
        chain, mask = record["chain"], record["step_mask"].bool()
        logps, means, stds, kl_stds = [], [], [], []

        def step(i: int, x_t: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            out = sde_step(v, chain[:, i].to(v.device), self.sigmas[i], self.sigmas[i + 1],
                           prev_sample=chain[:, i + 1].to(v.device), **self._sde_kwargs())
            logps.append(torch.where(mask[:, i].to(v.device), out.log_prob, torch.zeros_like(out.log_prob)))
            means.append(out.mean)
            stds.append(out.std)
            kl_stds.append(out.std_dev_t)
            return chain[:, i + 1].to(x_t.device)

        with torch.enable_grad():
            self._run(batch, step, chain[:, 0])
        return HeadLogProb(torch.stack(logps, 1), mask, torch.stack(means, 1), torch.stack(stds, 1), torch.stack(kl_stds, 1))
