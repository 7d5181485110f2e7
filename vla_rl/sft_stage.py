"""The SFT stage of :class:`vla_rl.trainer.VLARLTrainer`: the demos (``sft.demo_path``, or collected into
``output_dir/demos.hdf5``) and the supervised warm-up on them (:func:`vla_rl.sft.train_sft`) with its progress bar,
log and record in the trainer (``sft_record``)."""

from __future__ import annotations

import time

import numpy as np
from tqdm.auto import tqdm

from .sft import train_sft
from .trainer_protocol import VLATrainerLike


def load_demos(tr: VLATrainerLike):
    """The SFT demos: ``sft.demo_path``'s, or ``sft.demos_per_task`` per task collected into ``output_dir``."""
    from .demos import collect_demos, load_demo_file

    if tr.cfg.sft.demo_path:
        return load_demo_file(tr.cfg.sft.demo_path, tr.cfg.policy.cameras, tr.cfg.sft.demos_per_task)
    path = tr.out / "demos.hdf5"
    return collect_demos(tr.cfg.env.tasks, tr.cfg.sft.demos_per_task, path, tr.cfg.env.kwargs,
                         tr.cfg.policy.cameras, tr.cfg.sft.demo_seed_offset, tr.cfg.env.max_episode_steps)


def run_sft_stage(tr: VLATrainerLike) -> None:
    """Behaviour cloning on the demos; records ``{"demos", "demo_steps", "final_loss", "seconds"}`` as
    ``tr.sft_record``."""
    t0 = time.time()
    demos = load_demos(tr)
    bar = tqdm(total=tr.cfg.sft.steps, desc="sft", disable=tr.quiet, leave=False)

    def prog(step: int, loss: float) -> None:
        bar.update(1)
        if (step + 1) % tr.cfg.sft.log_every == 0:
            bar.set_postfix(loss=f"{loss:.4f}")
            if tr.logger:
                tr.logger.log(step + 1, {"sft/loss": loss})

    losses = train_sft(tr.policy, demos, tr.cfg.sft, tr.cfg.seed, prog,
                       fit_normalization=not tr.cfg.sft.base_policy)
    bar.close()
    tr.sft_done = True
    rec = tr.sft_record = {"demos": len(demos), "demo_steps": int(sum(len(d.actions) for d in demos)),
                           "final_loss": float(np.mean(losses[-50:])) if losses else float("nan"),
                           "seconds": round(time.time() - t0, 1)}
    tr.report(f"sft: {len(demos)} demos, {rec['demo_steps']} steps, loss {rec['final_loss']:.4f}, {rec['seconds']}s")
