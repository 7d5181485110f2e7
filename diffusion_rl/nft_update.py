"""The DiffusionNFT update of :class:`diffusion_rl.trainer.DiffusionGRPOTrainer` (``train.loss: nft``): the
trainer's ``update`` calls :func:`update_nft` in place of the clipped-PG update."""

from __future__ import annotations

import torch

from grpo.minibatch import Minibatches
from grpo.nft_loss import nft_loss, optimality_probability

from .adapters import cond_select
from .sampling import Rollout, guided_velocity, keyed_noise
from .trainer_protocol import DiffusionTrainerLike

STREAM_NFT = 11  # key stream of the DiffusionNFT re-noising draws (times and noise per final sample)


def update_nft(tr: DiffusionTrainerLike, ro: Rollout, prompts: list[str], adv_rows: torch.Tensor,
               keep_rows: torch.Tensor) -> dict[str, float]:
    """DiffusionNFT (:mod:`grpo.nft_loss`) on the final samples: ``x_t = (1 - t) x_0 + t eps``, ``t`` logit-normal,
    target ``eps - x_0``; ``r = optimality_probability(A)``; ``v_old`` is the velocity before this iteration's first
    update (one no-grad pass). The draws are keyed by (seed, iteration, global row), like the rollout noise."""
    tc, g, sc = tr.cfg.train, tr.cfg.grpo, tr.cfg.sampler
    rows = ro.final_rows
    idx = torch.nonzero(keep_rows[rows]).flatten()
    n_local = len(idx)
    # every pass (re-noising time j) weighs this rank's rows; the mean over the chunk's times and global rows
    batches = Minibatches(tr.upd, lambda j: (float(n_local),), lambda j: loss_at(j).loss, size=lambda j: n_local)
    if batches.rows_anywhere(n_local) == 0:
        return {"backward": 0, "nfe_train": 0}
    if n_local == 0:  # no rows here: stand-in rows that run the other ranks' passes with weight 0 (FSDP), or none
        idx = torch.zeros(batches.stand_in_rows, dtype=torch.long, device="cpu")
    m = len(idx)  # rows computed here (n_local, or the stand-in's)
    T = tc.nft_timesteps
    dev = tr.adapter.device
    cond = cond_select(tr.adapter.encode_prompts(prompts), ro.final_prompt_idx[idx]) if m else None
    uncond = tr.uncond(m) if m else None
    keys = rows[idx].tolist()
    x0 = ro.final[idx].detach().to(dev).float()
    t_all = torch.sigmoid(keyed_noise((T,), tr.cfg.seed, tr.iteration, STREAM_NFT, keys)) if m else None
    eps_all = keyed_noise((T, *x0.shape[1:]), tr.cfg.seed, tr.iteration, STREAM_NFT + 1, keys) if m else None
    r = optimality_probability(adv_rows[rows[idx]], g.adv_clip or 5.0).to(dev) if m else None
    nfe_mult = 2 if sc.cfg_scale != 1.0 else 1
    n_chunks = min(tc.updates_per_iter, T)
    chunks = [list(range(i * T // n_chunks, (i + 1) * T // n_chunks)) for i in range(n_chunks)]

    def noised(j):
        t = t_all[:, j].to(dev)
        eps = eps_all[:, j].to(dev)
        shape = (-1,) + (1,) * (x0.dim() - 1)
        return (1 - t.view(shape)) * x0 + t.view(shape) * eps, t, eps - x0

    def loss_at(j):
        xt, t, target = noised(j)
        v = guided_velocity(tr.adapter, xt, t, cond, uncond, sc.cfg_scale)
        return nft_loss(v, v_old[j], target, r, tc.nft_beta)

    nfe, backward = 0, 0
    v_old = {}
    if m:
        with torch.no_grad():
            for j in range(T):
                xt, t, _ = noised(j)
                v_old[j] = guided_velocity(tr.adapter, xt, t, cond, uncond, sc.cfg_scale).detach()
                nfe += n_local * nfe_mult
    stats: dict[str, list[float]] = {k: [] for k in ("loss", "positive", "negative", "grad_norm")}
    tr.adapter.train(True)
    for epoch in range(tc.inner_epochs):
        for step in batches.steps(chunks, epoch):
            for mb in step:
                lo = loss_at(mb.item)
                mb.backward(lo.loss)
                nfe, backward = nfe + n_local * nfe_mult, backward + n_local
                stats["loss"].append(float(lo.loss.detach()))
                stats["positive"].append(float(lo.positive.detach().mean()))
                stats["negative"].append(float(lo.negative.detach().mean()))
            tr.note_step(step.apply(), stats["grad_norm"])
    tr.adapter.train(False)
    tr.ema_update()
    out = {f"loss/nft_{k}" if k != "grad_norm" else k: sum(v) / max(1, len(v)) for k, v in stats.items()}
    backward, nfe = batches.sum_over_ranks([backward, nfe])
    out.update({"backward": backward, "nfe_train": nfe})
    return out
