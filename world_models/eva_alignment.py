"""EVA alignment's world-model side: the condition table, the executability reward and the reports.

RL post-training of the video world model itself with the executability reward runs through the diffusion
frontend (``diffusion_rl.align_world_model.align_world_model``: the world model as a ``DiffusionAdapter``, trained by
``DiffusionGRPOTrainer``); what it needs from here:

* :class:`ConditionTable` -- a "prompt" is a conditioning key ``"wm:<i>"`` naming row ``i`` of a table of (context
  frames, action chunk, true future) taken from simulator trajectories;
* :class:`EVAVideoReward` -- the reward;
* :func:`calibrate_on_pretrained` and :func:`alignment_report` -- EVA's ``P0`` and the before/after numbers.

The reward (:class:`EVAVideoReward`) prepends the context frames, decodes the whole clip into actions with
the inverse-dynamics model and scores their executability (``rewards.eva``); it also reports the frame error
against the real simulator's frames for the same actions (``frame_mse``, a diagnostic, not rewarded), so
a run shows the executability reward rising *and* whether fidelity to the simulator holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rewards.base import RewardOutput
from rewards.eva import EVAConfig, calibrate_p0, eva_reward_from_penalty, executability_penalty

from .idm import InverseDynamicsModel
from .video_wm import VideoWorldModel


@dataclass
class ConditionTable:
    """Rows of (context ``[N, Tc, 3, H, W]``, actions ``[N, K, A]``, true future ``[N, K, 3, H, W]``)."""

    context: torch.Tensor
    actions: torch.Tensor
    future: torch.Tensor

    def keys(self) -> list[str]:
        return [f"wm:{i}" for i in range(self.context.shape[0])]

    def index(self, key: str) -> int:
        if not key.startswith("wm:") or not key[3:].isdigit() or int(key[3:]) >= self.context.shape[0]:
            raise ValueError(f"world-model condition {key!r} is not one of wm:0..wm:{self.context.shape[0] - 1}")
        return int(key[3:])


class EVAVideoReward:
    """Executability of (context + predicted) clips; batch.prompts are the condition keys."""

    def __init__(self, idm: InverseDynamicsModel, table: ConditionTable, cfg: EVAConfig):
        self.idm, self.table, self.cfg = idm.eval(), table, cfg

    @torch.no_grad()
    def __call__(self, batch):
        idx = torch.tensor([self.table.index(p) for p in batch.prompts], device="cpu")  # the table lives in CPU RAM
        delta = batch.images  # the adapter's raw latents [B, 3, K, H, W] (decode is identity, see below)
        ctx = self.table.context[idx].to(delta.device)
        future = (ctx[:, -1:] + delta.float().permute(0, 2, 1, 3, 4) / 2).clamp(0, 1)
        clip = torch.cat([ctx, future], dim=1)
        pen, _ = executability_penalty(self.idm.decode_video(clip), self.cfg)  # on the IDM's device
        pen = pen.cpu()  # rewards go back to the CPU, where the trainer gathers them
        total = eva_reward_from_penalty(pen, self.cfg.p0, self.cfg.gamma)
        mse = ((future.cpu() - self.table.future[idx]) ** 2).mean(dim=(1, 2, 3, 4))
        return RewardOutput(total=total, components={"eva": total}, details={"eva_penalty": pen, "frame_mse": mse})


@torch.no_grad()
def calibrate_on_pretrained(wm: VideoWorldModel, idm: InverseDynamicsModel, table: ConditionTable, eva: EVAConfig,
                            seed: int = 0) -> EVAConfig:
    """``P0 = 1 + median penalty`` of the pretrained world model's own predictions on the table (EVA Eq. 7)."""
    frames = wm.sample_frames(table.context, table.actions, generator=torch.Generator().manual_seed(seed)).cpu()
    pen, _ = executability_penalty(idm.decode_video(torch.cat([table.context, frames], dim=1)).cpu(), eva)
    return EVAConfig(**{**eva.__dict__, "p0": calibrate_p0(pen)})


@torch.no_grad()
def alignment_report(wm: VideoWorldModel, idm: InverseDynamicsModel, table: ConditionTable, eva: EVAConfig,
                     seed: int = 0) -> dict[str, float]:
    """Deterministic (ODE) predictions of ``wm`` on every row of ``table``: mean EVA reward, median penalty,
    smoothness of the IDM-decoded actions (mean |acceleration| and |jerk| per step, in action units) and
    the frame MSE against the simulator's frames for the same actions (fidelity must not drop)."""
    frames = wm.sample_frames(table.context, table.actions, generator=torch.Generator().manual_seed(seed)).cpu()
    acts = idm.decode_video(torch.cat([table.context, frames], dim=1)).cpu()
    pen, _ = executability_penalty(acts, eva)
    acc = acts[:, 1:] - acts[:, :-1]
    jerk = acc[:, 1:] - acc[:, :-1]
    return {"eva_reward": float(eva_reward_from_penalty(pen, eva.p0, eva.gamma).mean()),
            "eva_penalty_median": float(pen.median()), "idm_abs_acc": float(acc.abs().mean()),
            "idm_abs_jerk": float(jerk.abs().mean()) if jerk.numel() else 0.0,
            "frame_mse": float(((frames - table.future) ** 2).mean())}
