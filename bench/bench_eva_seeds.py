"""EVA alignment over seeds (issue 25): executability up, fidelity to the simulator not worse.

The claim (EVA): RL post-training of a video world model with an executability reward (the inverse-dynamics-decoded
actions of its predicted clip are smooth and within the embodiment's limits) makes its predictions more executable
without costing fidelity. Per seed ``s``, from scratch (so the seed covers the data, the world model and the RL):

1. data: the config's SANS-style simulator mix (``world_models.data.collect_sans``; default
   ``configs/world_models/loop_reach.yaml``, the 3-ball reach), training episodes seeded ``s`` and held-out
   episodes seeded ``s + 1`` from disjoint initial states, as ``vla-rl loop`` collects them;
2. models: the video world model (the config's ``models.wm``, ``models.wm_steps`` Adam steps) and the IDM
   (``models.idm_steps``), both seeded ``s``, as ``world_models.fit.fit_models`` trains them (the success head and
   the state model play no part in EVA and are not trained);
3. rows: (context, action chunk, true future) windows of the held-out episodes (stride 4), shuffled with seed ``s``:
   16 training rows (the GRPO "prompts") and 32 held-out rows the alignment never sees;
4. ``P0`` calibrated on the training rows (``calibrate_on_pretrained``, EVA Eq. 7), EVA config as
   ``bench/bench_world_models.py`` (dt 1, jerk weight 0.5, v_max 1);
5. EVA alignment with the shipped defaults (``diffusion_rl.align_world_model.align_world_model``: Flow-GRPO SDE
   eta 0.3, flow KL 0.03 to the LoRA-disabled reference, lr 1e-3), 40 iterations x 4 rows x 8 rollouts, ``seed=s``;
6. ``alignment_report`` before and after on both row sets: mean EVA reward of the deterministic (ODE)
   predictions, median penalty, |jerk| of the IDM-decoded actions, frame MSE against the simulator's frames.

Reported: per seed before -> after, mean +- SE over seeds (SE = sample std / sqrt(n)) and the paired difference
after - before for each metric.

    python bench/bench_eva_seeds.py [--seeds 5] [--out /tmp/bench_eva_seeds]   # a few minutes per seed on 2 cores
    python bench/bench_eva_seeds.py --small --out /tmp/x                        # seconds: the test's mode

Each seed's reports are written to ``<out>/eva_seed<s>/reports.json`` with the settings that produced them;
``--reuse`` takes a seed's reports from there when the settings are the same (so an interrupted run of 5 seeds can
print the table of its finished seeds) and reruns the seed otherwise.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402  (after the sys.path lines above)
from claims_toy import fmt  # noqa: E402

CONFIG = "configs/world_models/loop_reach.yaml"
TINY_WM = ('{"image_size": 32, "context_frames": 2, "chunk": 2, "action_dim": 4, "sampling_steps": 2, "layers": 1, '
           '"ffn_dim": 32}')
SMALL_DATA = ["data.horizon=8", "data.train={success: 2, near: 1, failure: 1, random: 1}",
              "data.test={success: 2, near: 1, failure: 1}", f"models.wm={TINY_WM}", "models.wm_steps=3",
              "models.idm_steps=3"]
METRICS = [("eva_reward", "EVA reward"), ("eva_penalty_median", "median penalty"),
           ("idm_abs_jerk", "IDM mean abs jerk"),
           ("frame_mse", "frame MSE")]


def run_seed(seed: int, config: str, overrides: list[str], out: Path, iterations: int, rows: tuple[int, int],
             align: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """One seed of the module docstring; returns ``{"train"|"heldout": {"before"|"after": alignment_report}}``."""
    from diffusion_rl.align_world_model import align_world_model
    from grpo.config import load_config
    from rewards.eva import EmbodimentLimits, EVAConfig
    from vla_rl.wm_loop import WorldLoopConfig
    from world_models.data import collect_sans
    from world_models.eva_alignment import (
        ConditionTable,
        alignment_report,
        calibrate_on_pretrained,
    )
    from world_models.fit import WM_CAMERA
    from world_models.idm import InverseDynamicsModel, train_idm
    from world_models.video_wm import VideoWorldModel, train_world_model
    from world_models.windows import WindowSet, wm_windows

    cfg = load_config(WorldLoopConfig, str(ROOT / config), overrides)
    d, m = cfg.data, cfg.models
    t0 = time.time()
    train = collect_sans(d.task, d.train, d.horizon, d.image_size, seed, d.train_seed_offset, d.noise, WM_CAMERA,
                         near_progress=d.near_progress)
    test = collect_sans(d.task, d.test, d.horizon, d.image_size, seed + 1, d.test_seed_offset, d.noise, WM_CAMERA,
                        near_progress=d.near_progress)
    torch.manual_seed(seed)
    wm = VideoWorldModel(copy.deepcopy(m.wm))
    train_world_model(wm, WindowSet(train, m.wm.context_frames, m.wm.chunk, text_dim=m.wm.text_dim), m.wm_steps,
                      m.wm_batch, m.wm_lr, seed)
    idm = InverseDynamicsModel(copy.deepcopy(m.idm))
    train_idm(idm, train.videos, train.actions, m.idm_steps, batch=64, lr=2e-3, seed=seed)
    t_fit = time.time() - t0
    w = wm_windows(test, m.wm.context_frames, m.wm.chunk, stride=4)
    n_train, n_held = rows
    if w.context.shape[0] < n_train + n_held:
        raise ValueError(f"the held-out episodes give {w.context.shape[0]} windows, fewer than the {n_train} + "
                         f"{n_held} rows")
    pick = torch.randperm(w.context.shape[0], generator=torch.Generator().manual_seed(seed))
    tables = {name: ConditionTable(w.context[idx], w.actions[idx], w.future[idx])
              for name, idx in (("train", pick[:n_train]), ("heldout", pick[n_train:n_train + n_held]))}
    eva = calibrate_on_pretrained(wm, idm, tables["train"],
                                  EVAConfig(dt=1.0, w_jerk=0.5, limits=EmbodimentLimits(v_max=1.0)))
    res = {name: {"before": alignment_report(wm, idm, t, eva)} for name, t in tables.items()}
    ta = time.time()
    align_world_model(wm, idm, tables["train"], eva, str(out / f"eva_seed{seed}"),
                      [f"seed={seed}", f"train.iterations={iterations}", *align])
    for name, t in tables.items():
        res[name]["after"] = alignment_report(wm, idm, t, eva)
    r, h = res["train"], res["heldout"]
    print(f"  seed {seed}: P0 {eva.p0:.3f}; EVA reward {r['before']['eva_reward']:.4f} -> "
          f"{r['after']['eva_reward']:.4f} (held-out {h['before']['eva_reward']:.4f} -> "
          f"{h['after']['eva_reward']:.4f}), frame MSE {r['before']['frame_mse']:.5f} -> {r['after']['frame_mse']:.5f} "
          f"(held-out {h['before']['frame_mse']:.5f} -> {h['after']['frame_mse']:.5f}); fit {t_fit:.0f}s, alignment "
          f"{time.time() - ta:.0f}s", flush=True)
    return res


def run_or_reuse(seed: int, config: str, overrides: list[str], out: Path, iterations: int, rows: tuple[int, int],
                 align: list[str], reuse: bool) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`run_seed`, or its recorded reports in ``<out>/eva_seed<seed>/reports.json`` when ``reuse`` and the
    recorded settings equal these; writes that file after a run."""
    settings = {"seed": seed, "config": config, "overrides": overrides, "iterations": iterations, "rows": list(rows),
                "align": align}
    path = out / f"eva_seed{seed}" / "reports.json"
    if reuse and path.is_file():
        rec = json.loads(path.read_text())
        if rec.get("settings") == settings:
            print(f"  seed {seed}: reused {path}", flush=True)
            return rec["reports"]
    res = run_seed(seed, config, overrides, out, iterations, rows, align)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": settings, "reports": res}, indent=1))
    return res


def report(res: dict[int, dict]) -> None:
    """Mean +- SE before / after and the paired after - before, per row set and metric; then per seed."""
    seeds = sorted(res)
    print(f"\nmean +- SE over {len(seeds)} seeds {seeds}; paired = after - before on the same world model")
    print("| rows | metric | before | after | after - before (paired) | seeds where it rose |")
    print("|---|---|---|---|---|---|")
    for rows in ("train", "heldout"):
        for k, name in METRICS:
            b = [res[s][rows]["before"][k] for s in seeds]
            a = [res[s][rows]["after"][k] for s in seeds]
            digits = 5 if k == "frame_mse" else 4
            print(f"| {rows} | {name} | {fmt(b, digits)} | {fmt(a, digits)} | "
                  f"{fmt([y - x for x, y in zip(b, a)], digits)} | {sum(y > x for x, y in zip(b, a))} of {len(seeds)} "
                  "|")
    print("\nper seed, before -> after")
    print("| seed | EVA reward | held-out EVA reward | frame MSE | held-out frame MSE |")
    print("|---|---|---|---|---|")
    def cell(r: dict, rows: str, k: str, dg: int) -> str:
        return f"{r[rows]['before'][k]:.{dg}f} -> {r[rows]['after'][k]:.{dg}f}"

    for s in seeds:
        print(f"| {s} | {cell(res[s], 'train', 'eva_reward', 4)} | {cell(res[s], 'heldout', 'eva_reward', 4)} | "
              f"{cell(res[s], 'train', 'frame_mse', 5)} | {cell(res[s], 'heldout', 'frame_mse', 5)} |")


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="seconds-long smoke mode (the test's)")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5; 2 with --small)")
    ap.add_argument("--iterations", type=int, default=40, help="EVA alignment iterations (default 40)")
    ap.add_argument("--config", default=CONFIG, help="a vla-rl loop config: its data and models sections")
    ap.add_argument("--out", default="/tmp/bench_eva_seeds", help="where the alignment runs write")
    ap.add_argument("--reuse", action="store_true",
                    help="take a seed's reports from a finished run with the same settings")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.iterations < 1:
        print(f"error: need --seeds >= 1 and --iterations >= 1, got {args.seeds} and {args.iterations}",
              file=sys.stderr)
        return 2
    from arm_runs import too_many_seeds

    if too_many_seeds(args.seeds, "one run per seed"):  # (was: 1e9 seeds started, one run each)
        return 2
    if not (ROOT / args.config).is_file():
        print(f"error: --config {args.config}: no such file under {ROOT}", file=sys.stderr)
        return 2
    from arm_runs import bad_out

    if bad_out(args.out):  # (was: a symlink loop's traceback, or a file there failing the first run)
        return 2
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from grpo.preflight import quiet_third_party_warnings

    quiet_third_party_warnings()
    if args.small:
        seeds, iterations, overrides, rows = range(min(args.seeds, 2)), min(args.iterations, 2), SMALL_DATA, (4, 4)
        align = ["train.prompts_per_iter=2", "grpo.group_size=4"]
    else:
        seeds, iterations, overrides, rows = range(args.seeds), args.iterations, [], (16, 32)
        align = ["train.prompts_per_iter=4", "grpo.group_size=8"]
    print(f"EVA alignment over seeds: {args.config} {' '.join(overrides)}, seeds {list(seeds)}, {iterations} "
          f"iterations ({' '.join(align)}), rows {rows[0]} training + {rows[1]} held-out")
    t0 = time.time()
    try:
        res = {s: run_or_reuse(s, args.config, overrides, Path(args.out).resolve(), iterations, rows, align, args.reuse)
               for s in seeds}
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report(res)
    print(f"\ntotal {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
