"""The progress encoder read two ways on the same failures: SRPO's progress value (distance of the last frame's time to
go to the batch's success centres, DBSCAN + min-max + sigmoid per task: what the RL reward uses) against the encoder's
own reading, minus the last frame's time to go ``-r(o_last)`` (its goal fixed at 0, comparable across tasks without
any per-task normalization), and two readouts against the episode's start: ``-r(o_last) / r(o_0)`` (-ratio: the share
of the start's time to go still left) and ``r(o_0) - r(o_last)`` (delta: the time to go covered). Spearman of each
with the simulator's progress, per task and pooled, per seed; and, for ``-r(o_last)`` and SRPO's value, within each
group (the mean over the groups with >= 3 failures not all tied, as the bench: the order GRPO's advantages use).
For time-to-go encoders (``model.head: time_to_go``).

    python bench/diag_progress_readout.py --split val RUN [RUN ...]

RUN: a ``bench/bench_progress.py --encoders progress --progress-pooling last --tasks reach_one,reach,push --groups 6
--group-size 6 --seeds 3`` output directory (its ``progress_seed{s}_without_{family}.safetensors``, or ``_without_none``
for ``--held-out none``); the failures are re-collected exactly as that bench collects them (same states, same policy
noise seed), so the SRPO column reproduces the bench's."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    p = ArgumentParser(prog="diag_progress_readout.py", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench_progress.py output directories")
    p.add_argument("--split", choices=("val", "test"), default="val", help="the states the runs were scored on")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (as the runs)")
    p.add_argument("--tasks", default="reach_one,reach,push", help="comma-separated tasks (as the runs)")
    p.add_argument("--groups", type=int, default=6, help="groups per task (as the runs)")
    p.add_argument("--group-size", type=int, default=6, help="policy episodes per group (as the runs)")
    a = p.parse_args(argv)
    a.tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    if not a.tasks:  # (was: exit 0 with an empty readout)
        p.error(f"--tasks {a.tasks!r}: expected at least one task (comma-separated, as the runs)")
    if min(a.seeds, a.groups) < 1 or a.group_size < 2:
        p.error("--seeds and --groups must be >= 1, --group-size >= 2")
    for r in a.runs:
        if not Path(r).is_dir():
            p.error(f"{r!r}: not a directory (expected a bench_progress.py --out directory)")
    spec = importlib.util.spec_from_file_location("bench_progress", Path(__file__).parent / "bench_progress.py")
    bp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bp)
    import vla_rl
    from rewards.srpo import SRPOConfig
    from vla_rl.policy import SmallVLA, policy_config_from_dict
    from world_models.progress_encoder import load_progress_encoder

    torch.set_num_threads(1)
    meta = json.loads((Path(vla_rl.__file__).parent / "assets/tabletop_base/config.json").read_text())["policy"]
    meta["flow"]["eta"] = 0.7
    policy = SmallVLA.from_pretrained("builtin:tabletop_base", policy_config_from_dict(meta)).eval()
    def frame_size(r: str) -> int:  # the run's --progress-frame-size (its encoder's own view; 32 before it existed)
        f = Path(r) / "results.json"
        return int(json.loads(f.read_text())["args"].get("progress_frame_size", 32)) if f.is_file() else 32

    sizes = {r: frame_size(r) for r in a.runs}
    cfgs = {s: SRPOConfig(num_frames=6, frame_size=s, pooling="last", reference="task") for s in set(sizes.values())}
    bad = [t for t in a.tasks if t not in bp.TASKS]
    if bad:
        p.error(f"unknown task(s) {bad}; expected some of {', '.join(bp.TASKS)}")
    states = [bp.SPLITS[a.split] + g for g in range(a.groups)]
    res = {r: {"raw": [], "srpo": [], "ratio": [], "delta": [], "raw_group": [], "srpo_group": []} for r in a.runs}

    def within_groups(x: np.ndarray, prog: np.ndarray, groups: np.ndarray) -> list[float]:
        vals = [bp.spearman(x[groups == g], prog[groups == g]) for g in np.unique(groups)]
        return [v for v in vals if np.isfinite(v)]

    for seed in range(a.seeds):
        pooled = {r: ([], [], [], [], []) for r in a.runs}
        grouped = {r: ([], []) for r in a.runs}  # per group: -r(last), SRPO (within-group Spearman values)
        for task in a.tasks:
            # the same episodes (the policy sees its 32-px cameras) with frames at each run's encoder size
            eps_at = {s: bp.rollouts(policy, task, states, a.group_size, seed, s) for s in cfgs}
            eps = eps_at[sizes[a.runs[0]]]
            fail = np.array([not e["success"] for e in eps])
            prog = np.array([e["progress"] for e in eps])
            groups = np.array([e["group"] for e in eps])
            for r in a.runs:
                eps, cfg = eps_at[sizes[r]], cfgs[sizes[r]]
                f = Path(r) / f"progress_seed{seed}_without_{bp.FAMILY[task]}.safetensors"
                f = f if f.is_file() else Path(r) / f"progress_seed{seed}_without_none.safetensors"
                if not f.is_file():
                    p.error(f"{r!r}: no progress encoder for seed {seed} and task {task} ({f.name})")
                enc = load_progress_encoder(f, "encoder")
                with torch.no_grad():
                    ends = np.array([enc.encode_frames(torch.as_tensor(e["video"][[0, -1]]).permute(0, 3, 1, 2)[None])
                                     [0, :, 0].numpy() for e in eps])
                first, last = ends[:, 0], ends[:, 1]
                ratio = last / np.maximum(first, 1e-3)  # the share of the start's time to go still left
                val = bp.score(enc, eps, cfg)
                lo, hi = (last[~fail].min(), last[~fail].max()) if (~fail).any() else (np.nan, np.nan)
                pooled[r][0].extend(-last[fail])
                pooled[r][1].extend(val[fail])
                pooled[r][2].extend(prog[fail])
                pooled[r][3].extend(-ratio[fail])
                pooled[r][4].extend((first - last)[fail])
                grouped[r][0].extend(within_groups(-last[fail], prog[fail], groups[fail]))
                grouped[r][1].extend(within_groups(val[fail], prog[fail], groups[fail]))
                print(f"seed {seed} {task} {r}: -r(last) {bp.spearman(-last[fail], prog[fail]):+.2f}, "
                      f"SRPO {bp.spearman(val[fail], prog[fail]):+.2f}, "
                      f"-ratio {bp.spearman(-ratio[fail], prog[fail]):+.2f}, "
                      f"delta {bp.spearman((first - last)[fail], prog[fail]):+.2f}; r(last) of the failures "
                      f"{np.quantile(last[fail], 0.1):.2f}-{np.quantile(last[fail], 0.9):.2f} (10-90 %), of the "
                      f"{int((~fail).sum())} success references {lo:.2f}-{hi:.2f}",
                      flush=True)
        for r in a.runs:
            raw, val, prog, rat, dl = pooled[r]
            res[r]["raw"].append(bp.spearman(raw, prog))
            res[r]["srpo"].append(bp.spearman(val, prog))
            res[r]["ratio"].append(bp.spearman(rat, prog))
            res[r]["delta"].append(bp.spearman(dl, prog))
            res[r]["raw_group"].append(float(np.mean(grouped[r][0])) if grouped[r][0] else float("nan"))
            res[r]["srpo_group"].append(float(np.mean(grouped[r][1])) if grouped[r][1] else float("nan"))
            print(f"seed {seed} all failures {r}: -r(last) {res[r]['raw'][-1]:+.2f}, SRPO {res[r]['srpo'][-1]:+.2f}, "
                  f"-ratio {res[r]['ratio'][-1]:+.2f}, delta {res[r]['delta'][-1]:+.2f}; within group (mean over "
                  f"{len(grouped[r][0])} groups): -r(last) {res[r]['raw_group'][-1]:+.2f}, SRPO "
                  f"{res[r]['srpo_group'][-1]:+.2f}", flush=True)
    for r in a.runs:
        print(f"{r} all failures: -r(last) {bp._ms(res[r]['raw'])}, SRPO {bp._ms(res[r]['srpo'])}, "
              f"-ratio {bp._ms(res[r]['ratio'])}, delta {bp._ms(res[r]['delta'])}; within group: -r(last) "
              f"{bp._ms(res[r]['raw_group'])}, SRPO {bp._ms(res[r]['srpo_group'])}")
    return res


if __name__ == "__main__":
    main()
