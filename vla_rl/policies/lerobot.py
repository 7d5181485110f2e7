"""LeRobot's flow-matching VLAs (SmolVLA; pi0 / pi0.5 in the pi environment, ``make lerobot-pi``) as trainable
vla-rl policies.

:class:`LeRobotVLA` implements :class:`vla_rl.policies.base.TrainablePolicy` around a LeRobot ``PreTrainedPolicy``
and its pre/post-processor pipelines (LeRobot's factory, ``make_pre_post_processors``), so the VLA trainer drives it
exactly like the built-in :class:`vla_rl.policy.SmallVLA`: SFT through LeRobot's own flow-matching ``forward``,
GRPO through SDE log-probs of the denoising chain, deployment through ``select_action`` / ``predict_action_chunk``.

The stochastic denoising chain (no LeRobot model code is copied). LeRobot's ``sample_actions`` integrates
``x <- x + dt * v_theta(x, t)`` from ``t = 1`` (noise) to 0 with ``dt = -1 / T``: the rectified-flow convention of
:mod:`grpo.flow_sde`. While it runs, the model's ``denoise_step`` is wrapped; at step ``i`` with LeRobot's own
``x_t``::

    v      = denoise_step(..., x_t, t_i)                         (the policy's velocity, [B, K, A_max])
    x_next ~ N(mu(x_t, v), std_i^2)   via grpo.flow_sde.chain_step  (stochastic where step_mask[i], else the ODE step)
    return (x_next - x_t) / dt                                     (LeRobot's Euler update then lands on x_next)

The record keeps the chain ``[B, T + 1, K, A_max]`` (``chain[:, 0]`` is the initial noise, ``chain[:, i + 1]`` the
sampled ``x_next`` of step ``i``) and the step mask. Recomputation (:meth:`LeRobotVLA.chunk_log_prob`) replays
``sample_actions`` from ``chain[:, 0]`` with gradients, returning ``(chain[:, i+1] - x_t) / dt`` at every step, so
LeRobot's ``x_t`` at every step is computed by the same float operations from the same numbers as in the rollout,
and ``log N(chain[:, i+1]; mu(x_t, v), std_i^2)`` equals the rollout's log-prob bit for bit under unchanged weights
(ratio exactly 1). Flow-GRPO / ``noise_mode`` / ``eta`` as in :mod:`vla_rl.action_head`. With ``train_expert_only``
(LeRobot's default) the VLM is frozen and the RL gradient reaches the action expert and projections.

Batches: vla-rl's LeRobot-style keys (``observation.images.<camera>`` uint8 ``[B, H, W, 3]`` or float
``[B, 3, H, W]`` in [0, 1], ``observation.state`` ``[B, D]``, ``task`` ``list[str]``, for SFT ``action`` ``[B, K, A]``)
go through LeRobot's preprocessor (tokenizer, state normalization, device) and the sampled chunk through its
postprocessor (un-normalization). The state normalization fitted by SFT (:meth:`set_state_normalization`) is held in
buffers (so trainer checkpoints carry it) and handed to LeRobot's processors as ``dataset_stats``; a policy loaded
from a LeRobot checkpoint keeps that checkpoint's processors and statistics.

Saving (:meth:`save_pretrained`) writes LeRobot's layout -- ``config.json`` + ``model.safetensors`` (the policy's
``save_pretrained``), ``policy_preprocessor.json`` / ``policy_postprocessor.json`` + their state files -- plus
``vla_rl_policy.json`` (cameras, chunking, the flow SDE settings). ``lerobot``'s own ``from_pretrained`` and
``make_pre_post_processors(cfg, pretrained_path=...)`` load it and produce the same actions.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
from collections import deque
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from grpo.flow_sde import chain_step, flow_sigmas, sde_step

from ..action_head import Generators, HeadLogProb, HeadSample, _randint, _randn
from ..policy import IMAGE_PREFIX, STATE_KEY, PolicyConfig

LEROBOT_TYPES = ("smolvla", "pi0", "pi05")
META_FILE = "vla_rl_policy.json"


def require_lerobot() -> None:
    import importlib.util

    if importlib.util.find_spec("lerobot") is None:
        raise ImportError("policy.kind=lerobot needs lerobot 0.4.4 and its torchvision: `make lerobot` builds the "
                          ".venv-lerobot environment (README, 'LeRobot'); run vla-rl from there")


def lerobot_classes(kind: str):
    """``(ConfigClass, PolicyClass)`` of LeRobot's ``smolvla`` / ``pi0`` / ``pi05``."""
    require_lerobot()
    if kind == "smolvla":
        from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig as C
        from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy as P
    elif kind == "pi0":
        from lerobot.policies.pi0.configuration_pi0 import PI0Config as C
        from lerobot.policies.pi0.modeling_pi0 import PI0Policy as P
    elif kind == "pi05":
        from lerobot.policies.pi05.configuration_pi05 import PI05Config as C
        from lerobot.policies.pi05.modeling_pi05 import PI05Policy as P
    else:
        raise ValueError(f"policy.type={kind!r}; LeRobot flow-matching policies are {LEROBOT_TYPES}")
    if kind in ("pi0", "pi05"):
        require_openpi_transformers(kind)
        from .lerobot_tiny_pi import install

        install()  # the tiny_vlm / tiny_expert variant names (only they are affected)
    return C, P


def require_openpi_transformers(kind: str) -> None:
    """lerobot 0.4.4 builds pi0 / pi0.5 only with openpi's patched transformers 4.53.3 (its model ``__init__``
    imports ``transformers.models.siglip.check`` and refuses any other version): one line naming the environment
    that has it (``make lerobot-pi``) instead of LeRobot's error deep inside the model."""
    import importlib.util

    import transformers

    if importlib.util.find_spec("transformers.models.siglip.check") is None:
        raise ValueError(f"policy.type={kind!r} needs openpi's patched transformers 4.53.3 (lerobot 0.4.4 checks for "
                         f"it; this environment has transformers {transformers.__version__}): `make lerobot-pi` builds "
                         ".venv-lerobot-pi; run .venv-lerobot-pi/bin/vla-rl (docs/LEROBOT.md)")


def steps_field(lcfg) -> str:
    """The name of a LeRobot config's denoising-step count: SmolVLA's ``num_steps``, pi0 / pi0.5's
    ``num_inference_steps``."""
    return "num_steps" if hasattr(lcfg, "num_steps") else "num_inference_steps"


def vla_features(cfg: PolicyConfig) -> dict[str, Any]:
    """vla-rl's side of a LeRobot config: ``input_features`` (``observation.images.<camera>`` ``(3, H, W)``,
    ``observation.state`` ``(state_dim,)``), ``output_features`` (``action`` ``(action_dim,)``) and the
    ``normalization_mapping`` (images as they are, env actions already in [-1, 1], the state standardized with SFT's
    statistics)."""
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature

    h = w = cfg.image_size
    inputs = {IMAGE_PREFIX + c: PolicyFeature(FeatureType.VISUAL, (3, h, w))
              for c in cfg.cameras} if cfg.use_images else {}
    inputs[STATE_KEY] = PolicyFeature(FeatureType.STATE, (cfg.state_dim,))
    return {"input_features": inputs,
            "output_features": {"action": PolicyFeature(FeatureType.ACTION, (cfg.action_dim,))},
            "normalization_mapping": {"VISUAL": NormalizationMode.IDENTITY, "STATE": NormalizationMode.MEAN_STD,
                                      "ACTION": NormalizationMode.IDENTITY}}


def features_differ(lcfg, cfg: PolicyConfig) -> bool:
    """Whether a LeRobot config's cameras / state / action differ from vla-rl's ``policy.*`` (a pretrained checkpoint
    from another robot, e.g. pi0_base's ``base_0_rgb`` and 32-dim state)."""
    mine = vla_features(cfg)

    def shapes(feats) -> dict:
        return {k: tuple(v.shape) for k, v in feats.items()}

    return (shapes(lcfg.input_features) != shapes(mine["input_features"])
            or shapes(lcfg.output_features) != shapes(mine["output_features"]))


def lerobot_config(cfg: PolicyConfig, overrides: dict[str, Any] | None = None):
    """A fresh LeRobot config of ``cfg.type`` with vla-rl's features (:func:`vla_features`), chunking and
    ``num_steps``; ``overrides`` (``policy.lerobot``) set any other field (e.g. ``vlm_model_name``)."""
    require_lerobot()
    C, _ = lerobot_classes(cfg.type)
    kw: dict[str, Any] = dict(**vla_features(cfg),
                              chunk_size=cfg.chunk_size, n_action_steps=cfg.n_action_steps,
                              num_steps=cfg.flow.num_steps,
                              num_inference_steps=cfg.flow.num_steps, device="cpu", push_to_hub=False)
    fields = {f.name for f in __import__("dataclasses").fields(C)}
    for k, v in (overrides or {}).items():
        if k not in fields:
            raise ValueError(f"policy.lerobot.{k} is not a field of LeRobot's {C.__name__}; fields: {sorted(fields)}")
        kw[k] = tuple(v) if isinstance(v, list) else v
    if cfg.type == "pi05" and kw.get("max_state_dim", 32) != 32:
        # lerobot 0.4.4's pi0.5 pads the state to max_state_dim before writing it into the prompt, but its saved
        # processor (Pi05PrepareStateTokenizerProcessorStep) does not store the value: reloaded, it pads to 32
        raise ValueError(f"policy.lerobot.max_state_dim={kw['max_state_dim']}: lerobot 0.4.4 reloads a pi0.5's "
                         "processor with 32 (it does not save the value), so a saved pi05 would tokenize another "
                         "prompt; leave it 32")
    return C(**{k: v for k, v in kw.items() if k in fields})


def _checkpoint_tokenizer(path: Path) -> str | None:
    """The tokenizer a checkpoint's saved preprocessor names (its ``tokenizer_processor`` step), if any."""
    f = path / "policy_preprocessor.json"
    if not f.is_file():
        return None
    for step in json.loads(f.read_text()).get("steps", []):
        name = (step.get("config") or {}).get("tokenizer_name")
        if name:
            return str(name)
    return None


def _as_float_images(batch: dict, cameras: list[str]) -> dict:
    """Camera tensors as float ``[B, 3, H, W]`` in [0, 1] (rollouts keep them uint8 ``[B, H, W, 3]``)."""
    out = dict(batch)
    for c in cameras:
        k = IMAGE_PREFIX + c
        if k in out:
            x = out[k]
            if x.dim() == 4 and x.shape[-1] == 3 and x.shape[1] != 3:
                x = x.permute(0, 3, 1, 2)
            out[k] = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
    return out


class LeRobotVLA(nn.Module):
    """A LeRobot flow-matching policy behind vla-rl's :class:`~vla_rl.policies.base.TrainablePolicy` (module
    docstring)."""

    kind = "lerobot"

    def __init__(self, cfg: PolicyConfig, policy: nn.Module, processors: tuple[Any, Any] | None = None):
        super().__init__()
        if cfg.head != "flow":
            raise ValueError(f"policy.kind=lerobot drives LeRobot's flow-matching policies; policy.head={cfg.head!r} "
                             "must be 'flow'")
        self.cfg = cfg
        self.policy = policy  # the LeRobot PreTrainedPolicy (a submodule: parameters, state_dict, .to())
        self.register_buffer("state_mean", torch.zeros(cfg.state_dim))
        self.register_buffer("state_std", torch.ones(cfg.state_dim))
        self._fixed_processors = processors  # a loaded checkpoint's own pipelines (their statistics are kept)
        self._processors: tuple[Any, Any] | None = None
        self._stats_seen: torch.Tensor | None = None
        self.num_steps = int(getattr(policy.config, steps_field(policy.config)))
        self.tokenizer_dir: str | None = None  # a tiny pi policy's local tokenizer (vla_rl.policies.lerobot_tiny_pi)
        self.sigmas = flow_sigmas(self.num_steps)
        self._queue: deque[torch.Tensor] = deque()

    # ---- construction / persistence -------------------------------------------------------------
    @classmethod
    def build(cls, cfg: PolicyConfig, overrides: dict[str, Any] | None = None) -> "LeRobotVLA":
        """A randomly initialized LeRobot policy of ``cfg.type`` (VLM weights per ``load_vlm_weights``)."""
        lcfg = lerobot_config(cfg, overrides)
        _, P = lerobot_classes(cfg.type)
        return cls(cfg, P(lcfg))

    def vocabulary(self) -> None:
        """None: LeRobot's tokenizer is part of its preprocessor, saved with the checkpoint's processors."""
        return None

    def set_vocabulary(self, words: list[str]) -> None:
        """Nothing to restore (:meth:`vocabulary`)."""

    def save_pretrained(self, path: str | Path) -> Path:
        """LeRobot's layout (module docstring) + ``vla_rl_policy.json``."""
        from grpo.config import config_to_dict

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.policy.save_pretrained(path)
        pre, post = self.processors()
        pre.save_pretrained(path)
        post.save_pretrained(path)
        (path / META_FILE).write_text(json.dumps({"policy": config_to_dict(self.cfg)}, indent=1))
        return path

    @classmethod
    def from_pretrained(cls, path: str | Path, cfg: PolicyConfig | None = None) -> "LeRobotVLA":
        """A LeRobot checkpoint directory (``config.json`` with its ``type``, ``model.safetensors``, processors).

        ``cfg`` (vla-rl's ``policy.*``) gives cameras / flow settings; without it they come from
        ``vla_rl_policy.json`` when present, else from the checkpoint's LeRobot config (its image features)."""
        require_lerobot()
        from lerobot.policies.factory import make_pre_post_processors

        from ..policy import policy_config_from_dict

        path = Path(path)
        conf = path / "config.json"
        if not conf.is_file() or not (path / "model.safetensors").is_file():
            raise FileNotFoundError(f"no LeRobot policy at {path} (expected config.json + model.safetensors)")
        ltype = json.loads(conf.read_text()).get("type")
        _, P = lerobot_classes(ltype)
        policy = P.from_pretrained(str(path))
        if cfg is None:
            meta = path / META_FILE
            if meta.is_file():
                cfg = policy_config_from_dict(json.loads(meta.read_text())["policy"])
            else:
                lc = policy.config
                cams = [k[len(IMAGE_PREFIX):] for k in lc.image_features]
                cfg = PolicyConfig(kind="lerobot", type=ltype, cameras=cams or ["agentview"], use_images=bool(cams),
                                   chunk_size=lc.chunk_size, n_action_steps=lc.n_action_steps,
                                   state_dim=lc.robot_state_feature.shape[0], action_dim=lc.action_feature.shape[0])
                cfg.flow.num_steps = int(getattr(lc, steps_field(lc)))
        cfg = copy.deepcopy(cfg)
        cfg.kind, cfg.type = "lerobot", ltype
        policy.config.n_action_steps = cfg.n_action_steps
        setattr(policy.config, steps_field(policy.config), cfg.flow.num_steps)
        procs, tokenizer = None, _checkpoint_tokenizer(path)
        if features_differ(policy.config, cfg):
            # another robot's checkpoint: this env's cameras / state / action replace its features, as LeRobot's
            # make_policy(cfg, ds_meta) does when it fine-tunes a pretrained policy on a dataset (the weights do not
            # depend on them: images are resized to the model's resolution, state and action padded to its max
            # dims); its processors' statistics are for its own robot, so vla-rl's are built (SFT fits the state's)
            for k, v in vla_features(cfg).items():
                setattr(policy.config, k, v)
        elif (path / "policy_preprocessor.json").is_file():
            procs = make_pre_post_processors(policy.config, pretrained_path=str(path))
        out = cls(cfg, policy, procs)
        if procs is None and tokenizer is not None and Path(tokenizer).name == "tiny_tokenizer":
            out.tokenizer_dir = str(Path(tokenizer).parent)  # a toy pi checkpoint's local tokenizer (lerobot_tiny_pi)
        return out

    # ---- processors ----------------------------------------------------------------------------
    def set_state_normalization(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """SFT's state statistics (kept in buffers; LeRobot's preprocessor standardizes with them)."""
        self.state_mean.copy_(mean.float())
        self.state_std.copy_(std.float().clamp(min=1e-3))

    def processors(self) -> tuple[Any, Any]:
        """LeRobot's ``(preprocessor, postprocessor)``: the checkpoint's own, or built by LeRobot's factory with the
        buffers' state statistics (rebuilt when they change, e.g. after SFT or a resumed checkpoint)."""
        if self._fixed_processors is not None:
            return self._fixed_processors
        stats = torch.cat([self.state_mean, self.state_std]).detach().cpu()
        if self._processors is None or not torch.equal(stats, self._stats_seen):
            from lerobot.policies.factory import make_pre_post_processors

            lcfg = copy.copy(self.policy.config)
            lcfg.device = str(self.state_mean.device)
            d = self.cfg.state_dim
            ctx = contextlib.nullcontext()
            if self.tokenizer_dir is not None:  # a tiny pi0 / pi0.5: its local tokenizer, not the hub's PaliGemma one
                from .lerobot_tiny_pi import local_tokenizer

                ctx = local_tokenizer(self.tokenizer_dir)
            with ctx:
                self._processors = make_pre_post_processors(
                    lcfg, dataset_stats={STATE_KEY: {"mean": stats[:d].clone(), "std": stats[d:].clone()}})
            self._stats_seen = stats
        return self._processors

    def _pre(self, batch: dict) -> dict:
        pre, _ = self.processors()
        b = _as_float_images({k: v for k, v in batch.items() if k != "action_is_pad"}, self.cfg.cameras)
        out = pre(b)
        if "action_is_pad" in batch:
            out["actions_id_pad"] = batch["action_is_pad"].to(self.state_mean.device)  # (the key SmolVLA reads)
        return out

    def _post(self, actions: torch.Tensor) -> torch.Tensor:
        _, post = self.processors()
        return post(actions).to(actions.device)

    # ---- deployment (LeRobot's interface) ------------------------------------------------------
    def set_mixed_precision(self, mode: str) -> None:
        if mode != "fp32":
            raise ValueError(f"dist.mixed_precision={mode!r}: LeRobot policies run in their own dtype here; use fp32")

    def reset(self) -> None:
        self._queue.clear()
        self.policy.reset()

    @torch.no_grad()
    def predict_action_chunk(self, batch: dict, stochastic: bool = False, generator: Generators = None) -> torch.Tensor:
        return self.sample_chunk(batch, stochastic, generator).actions

    @torch.no_grad()
    def select_action(self, batch: dict, stochastic: bool = False, generator: Generators = None) -> torch.Tensor:
        if not self._queue:
            chunk = self.predict_action_chunk(batch, stochastic, generator)
            self._queue.extend(chunk[:, : self.cfg.n_action_steps].transpose(0, 1))
        return self._queue.popleft()

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """SFT: LeRobot's own flow-matching loss on a preprocessed batch."""
        loss, info = self.policy.forward(self._pre(batch))
        return loss, {"loss": float(loss.detach())}

    @property
    def tokens_per_chunk(self) -> int:
        return self.num_steps

    # ---- the SDE chain through LeRobot's denoise_step ------------------------------------------
    def _sde_kwargs(self) -> dict:
        f = self.cfg.flow
        return dict(kind=f.sde_kind, eta=f.eta, sigma_max=float(self.sigmas[1]),
                    reduce=f.logprob_reduce)

    def _run(self, batch: dict, noise: torch.Tensor,
             step_fn: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        """LeRobot's chunk sampling from ``noise`` with ``denoise_step`` wrapped; ``step_fn(i, x_t, v) -> x_next``."""
        model = self.policy.model
        orig = model.denoise_step
        sig = inspect.signature(orig)
        count = {"i": 0}

        def wrapped(*args, **kwargs):
            x_t = sig.bind(*args, **kwargs).arguments["x_t"]
            i = count["i"]
            v = orig(*args, **kwargs)
            x_next = step_fn(i, x_t, v)
            count["i"] += 1
            dt = -1.0 / self.num_steps  # LeRobot's Euler step size
            return ((x_next - x_t.float()) / dt).to(v.dtype)

        model.denoise_step = wrapped
        try:
            self.policy.reset()
            self._sample_from(self._pre(batch), noise)
        finally:
            del model.denoise_step  # back to the class's method
        if count["i"] != self.num_steps:
            raise RuntimeError(f"LeRobot ran {count['i']} denoising steps, expected {self.num_steps}")

    def _sample_from(self, pre: dict, noise: torch.Tensor) -> torch.Tensor:
        """LeRobot's own chunk sampling from ``noise`` on a preprocessed batch, with autograd as the caller has it
        (SmolVLA's ``_get_action_chunk``; pi0 / pi0.5: their ``predict_action_chunk`` body -- image and state
        preparation, then ``model.sample_actions`` -- which LeRobot wraps in ``no_grad`` and ``eval()``)."""
        p = self.policy
        if self.cfg.type == "smolvla":
            return p._get_action_chunk(pre, noise=noise)
        from lerobot.utils.constants import (
            OBS_LANGUAGE_ATTENTION_MASK,
            OBS_LANGUAGE_TOKENS,
        )

        images, img_masks = p._preprocess_images(pre)
        lang = (pre[OBS_LANGUAGE_TOKENS], pre[OBS_LANGUAGE_ATTENTION_MASK])
        sample = inspect.unwrap(type(p.model).sample_actions)  # LeRobot decorates it with no_grad
        if self.cfg.type == "pi0":
            return sample(p.model, images, img_masks, *lang, p.prepare_state(pre), noise=noise)
        return sample(p.model, images, img_masks, *lang, noise=noise)  # pi0.5: the state is in the prompt

    def _noise_shape(self, b: int) -> tuple[int, int, int]:
        lc = self.policy.config
        return (b, int(lc.chunk_size), int(lc.max_action_dim))

    @torch.no_grad()
    def sample_chunk(self, batch: dict, stochastic: bool = True, generator: Generators = None) -> HeadSample:
        """A chunk ``[B, K, A]`` (post-processed), its record and per-step log-probs ``[B, T]`` (module docstring)."""
        dev = self.state_mean.device
        first = next(v for v in batch.values() if isinstance(v, torch.Tensor))
        b = first.shape[0]
        noise = _randn(self._noise_shape(b), generator, dev)
        j = _randint(self.num_steps, b, generator, dev) if self.cfg.flow.noise_mode == "one" else None
        chain, logps, masks = [noise.clone()], [], []

        def step(i: int, x_t: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            m = torch.full((b,), stochastic and self.cfg.flow.eta > 0, dtype=torch.bool, device=dev)
            if j is not None:
                m &= j == i
            # one step of the flow-SDE chain (LeRobot owns the loop): SDE rows where m, ODE rows elsewhere
            out = chain_step(v.float(), x_t.float(), self.sigmas[i], self.sigmas[i + 1], sde=m,
                             noise=_randn(tuple(x_t.shape), generator, dev), **self._sde_kwargs())
            chain.append(out.prev_sample.clone())
            logps.append(out.log_prob)
            masks.append(m)
            return out.prev_sample

        self._run(batch, noise, step)
        actions = self._post(chain[-1][..., : self.cfg.action_dim])
        mask = torch.stack(masks, 1)
        return HeadSample(actions=actions, record={"chain": torch.stack(chain, 1), "step_mask": mask},
                          logp=torch.stack(logps, 1), step_mask=mask)

    def chunk_log_prob(self, batch: dict, record: dict[str, torch.Tensor]) -> HeadLogProb:
        """Log-probs ``[B, T]`` of the stored chain under the current weights (with gradients; module docstring)."""
        chain, mask = record["chain"], record["step_mask"].bool()
        logps, means, stds, kl_stds = [], [], [], []

        def step(i: int, x_t: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            target = chain[:, i + 1].to(x_t.device)
            out = sde_step(v.float(), x_t.float(), self.sigmas[i], self.sigmas[i + 1], prev_sample=target,
                           **self._sde_kwargs())
            logps.append(torch.where(mask[:, i], out.log_prob, torch.zeros_like(out.log_prob)))
            means.append(out.mean)
            sd = torch.as_tensor(out.std, device=x_t.device).float()
            stds.append(sd.reshape(-1, 1, 1).expand(x_t.shape[0], 1, 1) if sd.numel() in (1, x_t.shape[0]) else sd)
            # Flow-GRPO's KL scale (grpo.loss.flow_kl_scale)
            kd = torch.as_tensor(out.std_dev_t, device=x_t.device).float()
            kl_stds.append(kd.reshape(-1, 1, 1).expand(x_t.shape[0], 1, 1) if kd.numel() in (1, x_t.shape[0]) else kd)
            return target

        with torch.enable_grad():
            self._run(batch, chain[:, 0], step)
        return HeadLogProb(torch.stack(logps, 1), mask, torch.stack(means, 1), torch.stack(stds, 1),
                           torch.stack(kl_stds, 1))
