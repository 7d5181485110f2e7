"""EVA alignment: RL post-training of the video world model itself with the executability reward, through this
frontend's trainer (:class:`~diffusion_rl.trainer.DiffusionGRPOTrainer`) rather than a loop of its own.

The world model (``world_models.video_wm.VideoWorldModel``) is exposed as a
:class:`~diffusion_rl.adapters.DiffusionAdapter`:

* a "prompt" is a conditioning key ``"wm:<i>"`` naming row ``i`` of a ``world_models.eva_alignment.ConditionTable``
  of (context frames, action chunk) pairs taken from simulator trajectories; ``encode_prompts`` looks the rows up
  (and caches them like text);
* latents are the world model's ``x = 2 (future - last_context)`` of shape ``[3, K, H, W]``, and ``velocity``
  is :meth:`VideoWorldModel.velocity`; ``decode`` returns the latents (the reward composes the frames);
* LoRA goes on the Wan transformer's attention projections, the reference is the adapter disabled.

The reward is ``world_models.eva_alignment.EVAVideoReward`` (executability of the IDM-decoded clip, ``rewards.eva``);
``calibrate_on_pretrained`` / ``alignment_report`` there give EVA's ``P0`` and the before/after numbers.
"""

from __future__ import annotations

import types

import torch

from grpo.config import load_config
from rewards.eva import EVAConfig
from world_models.eva_alignment import ConditionTable, EVAVideoReward
from world_models.idm import InverseDynamicsModel
from world_models.video_wm import VideoWorldModel

from .adapters import DiffusionAdapter, LoraSettings, ModelConfig
from .config import DiffusionRLConfig
from .trainer import DiffusionGRPOTrainer


def make_world_model_adapter(wm: VideoWorldModel, table: ConditionTable, lora_rank: int = 4, lora_alpha: float = 8.0):
    """A :class:`~diffusion_rl.adapters.DiffusionAdapter` over the world model (module docstring)."""
    class WorldModelAdapter(DiffusionAdapter):
        kind = "wan"

        def __init__(self) -> None:
            wm.requires_grad_(False).eval()
            # the adapter keeps the world model where it is (the trainer's tensors follow adapter.device)
            cfg = ModelConfig(kind="wan", lora=LoraSettings(rank=lora_rank, alpha=lora_alpha), device=str(wm.device))
            super().__init__(types.SimpleNamespace(transformer=wm.transformer), cfg)
            self.wm, self.table = wm, table

        def _encode(self, prompts: list[str]) -> dict[str, torch.Tensor]:
            idx = torch.tensor([self.table.index(p) for p in prompts], device="cpu")  # the table lives in CPU RAM
            dev = self.wm.device
            return {"context": self.table.context[idx].to(dev) * 2 - 1,
                    "actions": self.table.actions[idx].to(dev).float(),
                    "row": idx.to(dev).float()}

        @property
        def latent_shape(self) -> tuple[int, ...]:
            c = self.wm.cfg
            return (3, c.chunk, c.image_size, c.image_size)

        def velocity(self, latents, sigma, cond):
            return self.wm.velocity(latents, sigma, cond["context"], cond["actions"]).float()

        def decode(self, latents):
            return latents  # the change from the context; EVAVideoReward composes the frames with the context

    adapter = WorldModelAdapter()
    adapter.add_lora()
    return adapter


def align_world_model(wm: VideoWorldModel, idm: InverseDynamicsModel, table: ConditionTable, eva: EVAConfig,
                      output_dir: str, overrides: list[str] | None = None, progress: bool = False) -> dict:
    """GRPO (flat or BranchGRPO, per ``overrides``) on the world model with the EVA reward.

    ``eva.p0`` should be calibrated first (``world_models.eva_alignment.calibrate_on_pretrained``). Returns the
    trainer's summary.

    Defaults (``overrides`` go after them and win): Flow-GRPO SDE steps with ``eta = 0.3`` (the SDE std is
    ``eta * sqrt(sigma / (1 - sigma)) * sqrt(dt)`` per step; at the world model's 4 sampling steps, eta 0.7
    makes the rollouts so noisy that the update drifts away from the ODE predictions it is judged on) and a
    KL to the LoRA-disabled reference, ``grpo.kl_coef = 0.03`` (``kl_type = flow_exact``, the exact KL the 0.03 was
    tuned with: ``||mu_theta - mu_ref||^2 / (2 std^2)`` per SDE step), at ``train.lr = 1e-3``.
    What these defaults and the alternatives did on reach: docs/RESULTS.md#world-model-parts-and-eva.
    """
    base = [f"output_dir={output_dir}", "prompts.source=list", f"prompts.prompts={table.keys()}",
            f"prompts.num_eval={min(8, len(table.keys()))}", f"sampler.num_steps={wm.cfg.sampling_steps}",
            "sampler.sde=flow_grpo", "sampler.eta=0.3", "grpo.kl_coef=0.03", "grpo.kl_type=flow_exact", "train.lr=1e-3",
            "train.log_images=false", "resume=false"]
    cfg = load_config(DiffusionRLConfig, None, base + list(overrides or []))
    trainer = DiffusionGRPOTrainer(cfg, reward_fn=EVAVideoReward(idm, table, eva),
                                   adapter=make_world_model_adapter(wm, table))
    return trainer.train(progress=progress)
