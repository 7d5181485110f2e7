"""World-VLA-Loop over seeds (issue 25): does real-simulator success rise through RL inside the learned world model?

The claim (World-VLA-Loop): a VLA post-trained with RL only inside a learned world model, whose data grows with the
policy's own failures and near-successes, gets better on the real robot cycle over cycle. Here the real robot is the
simulator and the loop is ``vla-rl loop`` (``vla_rl.wm_loop.run_loop``) on the ``make demo-wm`` config. Per seed
``s`` one fresh process runs

    vla-rl loop configs/world_models/loop_reach_one.yaml seed=s vla.seed=s output_dir=<out>/loop_seed<s>

(``seed`` seeds the SANS data, the world model / state model / IDM and the world-model env; ``vla.seed`` the SFT
and, as ``vla.seed + c``, cycle ``c``'s GRPO) and the bench reads its ``history.json``: real-simulator success on
the config's 64 held-out initial states (``vla.rl.eval_seed_offset + i``, the same states for every seed;
deterministic policy, flow noise seeded ``seed``) after SFT (cycle 0) and after each cycle.

Control (``--control``, on by default): the same GRPO updates in the real simulator. From the loop's own SFT policy
(``<loop>/sft/policy``, so the same start), ``cycles`` trainer runs of ``rl_iterations`` GRPO iterations each, chained
like the loop's cycles (fresh optimizer per cycle, ``seed = vla.seed + c``, same groups, lr, epochs, reward), on
``env.tasks = [data.task]`` instead of ``wm/<task>``, each checkpoint judged by the same real-simulator evaluation
as the loop's. No world model, no data collection: the loop's gain over SFT is to be read against it.

Reported: per cycle mean +- SE over seeds (SE = sample std / sqrt(n)) of real success, loop and control; the gain
cycle 0 -> last per seed and its mean +- SE; the paired loop - control difference at the last cycle; wall per run.

    python bench/bench_wm_loop_seeds.py [--seeds 3] [--jobs 2] [--out /tmp/bench_wm_loop_seeds]   # ~10 min per loop run
    python bench/bench_wm_loop_seeds.py --small --out /tmp/x                                       # seconds: the test's

``--reuse`` keeps a seed's finished loop run (its ``history.json``) when the run's recorded config equals the one this
command would run (a key the recorded run predates counts at its default; ``resume`` is not compared: it changes no
number), and reruns it otherwise; a kept loop run also keeps its seed's finished control (``control.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from claims_toy import fmt, mean_se  # noqa: E402  (after the sys.path lines above)

CONFIG = "configs/world_models/loop_reach_one.yaml"
TINY_WM = ('{"image_size": 32, "context_frames": 2, "chunk": 2, "action_dim": 4, "sampling_steps": 2, "layers": 1, '
           '"ffn_dim": 32}')
# the test's mode: the shipped config shrunk to seconds (2 cycles of 1 GRPO iteration, tiny models and data)
SMALL = ["cycles=2", "rl_iterations=1", "real_eval_episodes=4", "rollouts_per_cycle=2", "data.horizon=6",
         "data.train={success: 2, near: 1, failure: 1, random: 1}", "data.test={success: 1, near: 1}",
         "data.start_pool=4",
         f"models.wm={TINY_WM}", "models.wm_steps=3", "models.wm_finetune_steps=2", "models.idm_steps=3",
         "models.state_steps=3", "models.success_steps=3", "vla.env.max_episode_steps=12", "vla.policy.chunk_size=2",
         "vla.policy.n_action_steps=2", "vla.policy.flow.num_steps=2", "vla.sft.demos_per_task=1", "vla.sft.steps=3",
         "vla.rl.groups_per_task=1", "vla.rl.eval_episodes=2", "vla.grpo.group_size=2"]


def seed_overrides(seed: int, run_dir: Path) -> list[str]:
    """The loop command's per-seed keys: data/models/world-model env (``seed``) and SFT/GRPO (``vla.seed``)."""
    return [f"seed={seed}", f"vla.seed={seed}", f"output_dir={run_dir}"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def _same_config(run_dir: Path, config: str, overrides: list[str]) -> bool:
    """Whether the finished run in ``run_dir`` recorded exactly the config this command would run."""
    from grpo.config import ConfigError, build_config, config_to_dict, load_config
    from vla_rl.wm_loop import WorldLoopConfig

    info, hist = run_dir / "run_info.json", run_dir / "history.json"
    if not (info.is_file() and hist.is_file()):
        return False

    def plain(cfg: WorldLoopConfig) -> dict:  # JSON types, without the run-control key ``resume``
        return {k: v for k, v in json.loads(json.dumps(config_to_dict(cfg))).items() if k != "resume"}

    recorded = json.loads(info.read_text()).get("config")
    try:
        had = plain(build_config(WorldLoopConfig, {k: v for k, v in (recorded or {}).items() if k != "resume"}))
    except ConfigError:  # a key this code no longer has, or a bad value: not the same config
        return False
    return had == plain(load_config(WorldLoopConfig, str(ROOT / config), overrides))


def _recorded_wall(run_dir: Path) -> float:
    """A finished run's wall clock: from ``run_info.json``'s start to ``history.json``'s last write."""
    from datetime import datetime, timezone

    stamp = json.loads((run_dir / "run_info.json").read_text())["started"]  # grpo.runinfo: "YYYY-MM-DD HH:MM:SS <zone>"
    when = datetime.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")
    started = (when.replace(tzinfo=timezone.utc) if stamp[20:] in ("UTC", "GMT") else when.astimezone()).timestamp()
    return (run_dir / "history.json").stat().st_mtime - started


def run_loop_seed(seed: int, out: Path, config: str, extra: list[str], reuse: bool) -> dict:
    """One ``vla-rl loop`` process for ``seed``; returns ``{"success": [per cycle], "wall_s", "reused"}``."""
    run_dir = out / f"loop_seed{seed}"
    over = [*extra, *seed_overrides(seed, run_dir)]
    reused = reuse and _same_config(run_dir, config, over)
    t = time.time()
    if not reused:
        cmd = [sys.executable, "-m", "vla_rl.cli", "loop", config, *over]
        res = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError(f"loop seed {seed} failed (exit {res.returncode}): "
                               f"{res.stderr.strip().splitlines()[-1:]}")
        (run_dir / "loop.log").write_text(res.stdout + res.stderr)
    hist = json.loads((run_dir / "history.json").read_text())
    wall = _recorded_wall(run_dir) if reused else time.time() - t
    succ = [float(h["real_success"]) for h in hist]
    print(f"  loop seed {seed}: real success {' '.join(f'{x:.3f}' for x in succ)}, "
          f"{'reused run, wall' if reused else 'wall'} {wall:.0f}s", flush=True)
    return {"success": succ, "wall_s": wall, "reused": reused,
            "wm_success": [(h["wm_success_before_rl"], h["wm_success_after_rl"]) for h in hist[1:]]}


def real_sim_control(seed: int, out: Path, config: str, extra: list[str]) -> dict:
    """The control of the module docstring, in this process: the loop's SFT policy trained by the same chained GRPO
    runs in the real simulator; returns ``{"success": [per cycle], "wall_s"}``."""
    import torch

    from grpo.config import load_config
    from grpo.device import resolve_device
    from vla_rl.policy import SmallVLA
    from vla_rl.rollout import EnvPool, evaluate
    from vla_rl.trainer import VLARLTrainer
    from vla_rl.wm_loop import WorldLoopConfig, _vla_cfg

    torch.set_num_threads(1)
    loop_dir = out / f"loop_seed{seed}"
    ctrl = out / f"control_seed{seed}"
    cfg = load_config(WorldLoopConfig, str(ROOT / config), [*extra, *seed_overrides(seed, loop_dir)])
    d = cfg.data
    env_kwargs = dict(cfg.vla.env.kwargs, image_size=d.image_size)
    pool = EnvPool(env_kwargs, cfg.vla.env.video_camera)
    eval_seeds = cfg.vla.rl.heldout_seeds(cfg.real_eval_episodes)
    device = cfg.vla.device if cfg.vla.device != "auto" else str(resolve_device(cfg.device))  # the loop's choice

    def real_success(policy) -> float:  # exactly the loop's evaluation
        return evaluate(policy, pool, [d.task], eval_seeds, cfg.vla.env.max_episode_steps, seed=cfg.seed).success_rate

    t = time.time()
    policy_dir = loop_dir / "sft" / "policy"
    succ = [real_success(SmallVLA.from_pretrained(policy_dir))]
    for c in range(1, cfg.cycles + 1):
        cdir = ctrl / f"cycle_{c}"
        vcfg = _vla_cfg(cfg, output_dir=str(cdir / "vla"), resume=False, seed=cfg.vla.seed + c, device=device,
                        **{"env.tasks": [d.task], "env.kwargs": env_kwargs, "sft.init_policy": str(policy_dir),
                           "rl.iterations": cfg.rl_iterations, "rl.eval_every": 0, "rl.num_videos": 0})
        summary = VLARLTrainer(vcfg, quiet=True).train()
        policy_dir = cdir / "vla" / "policy"
        succ.append(real_success(summary["policy"]))
    wall = time.time() - t
    (ctrl / "control.json").write_text(json.dumps({"success": succ, "wall_s": wall}))
    return {"success": succ, "wall_s": wall}


def run_control_seed(seed: int, out: Path, config: str, extra: list[str], reuse: bool = False) -> dict:
    """:func:`real_sim_control` in a fresh process (``--control-of``), so that two run at once on two cores; with
    ``reuse`` (its loop run was kept) a finished ``control.json`` is read instead."""
    path = out / f"control_seed{seed}" / "control.json"
    if reuse and path.is_file():
        rec = json.loads(path.read_text())
        print(f"  control seed {seed}: real success {' '.join(f'{x:.3f}' for x in rec['success'])}, "
              f"reused run, wall {rec['wall_s']:.0f}s", flush=True)
        return rec
    cmd = [sys.executable, str(Path(__file__).resolve()), "--control-of", str(seed), "--out", str(out), "--config",
           config,
           *(["--small"] if extra == SMALL else [])]
    res = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"control seed {seed} failed (exit {res.returncode}): "
                           f"{res.stderr.strip().splitlines()[-1:]}")
    rec = json.loads((out / f"control_seed{seed}" / "control.json").read_text())
    print(f"  control seed {seed}: real success {' '.join(f'{x:.3f}' for x in rec['success'])}, "
          f"wall {rec['wall_s']:.0f}s", flush=True)
    return rec


def report(loops: dict[int, dict], controls: dict[int, dict], rl_iterations: int) -> None:
    """The tables: per cycle mean +- SE, per seed, gain, paired loop - control."""
    seeds = sorted(loops)
    n_cyc = len(loops[seeds[0]]["success"])
    print(f"\nreal-simulator success per cycle, mean +- SE over {len(seeds)} seeds {seeds} "
          f"(cycle c = after c x {rl_iterations} GRPO iterations)")
    print("| cycle | GRPO updates | loop (inside the world model) |"
          + (" control (real simulator) |" if controls else ""))
    print("|---|---|---|" + ("---|" if controls else ""))
    for c in range(n_cyc):
        row = f"| {c} | {c * rl_iterations} | {fmt([loops[s]['success'][c] for s in seeds])} |"
        if controls:
            row += f" {fmt([controls[s]['success'][c] for s in seeds])} |"
        print(row)
    print("\nper seed")
    print("| seed | loop, cycles 0.." + str(n_cyc - 1) + " | loop wall s |"
          + (" control | control wall s |" if controls else ""))
    print("|---|---|---|" + ("---|---|" if controls else ""))
    for s in seeds:
        row = f"| {s} | {' '.join(f'{x:.3f}' for x in loops[s]['success'])} | {loops[s]['wall_s']:.0f} |"
        if controls:
            row += f" {' '.join(f'{x:.3f}' for x in controls[s]['success'])} | {controls[s]['wall_s']:.0f} |"
        print(row)
    gain = [loops[s]["success"][-1] - loops[s]["success"][0] for s in seeds]
    print(f"\nloop gain cycle 0 -> {n_cyc - 1}, paired over seeds: {fmt(gain)} (rose in {sum(g > 0 for g in gain)} of "
          f"{len(seeds)})")
    if controls:
        cg = [controls[s]["success"][-1] - controls[s]["success"][0] for s in seeds]
        d = [loops[s]["success"][-1] - controls[s]["success"][-1] for s in seeds]
        print(f"control gain cycle 0 -> {n_cyc - 1}, paired over seeds: {fmt(cg)} (rose in {sum(g > 0 for g in cg)} of "
              f"{len(seeds)})")
        print(f"loop - control at cycle {n_cyc - 1}, paired over seeds: {fmt(d)}")
        for s in seeds:
            if abs(loops[s]["success"][0] - controls[s]["success"][0]) > 1e-9:
                print(f"warning: seed {s}: the control's cycle 0 ({controls[s]['success'][0]:.3f}) differs from the "
                      f"loop's ({loops[s]['success'][0]:.3f}): not the same start")
    m, se = mean_se([loops[s]["wall_s"] for s in seeds])
    print(f"loop wall per run {m:.0f} +- {se:.0f} s")


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="seconds-long smoke mode (the test's)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3; 2 with --small)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (one core each)")
    ap.add_argument("--config", default=CONFIG, help="a vla-rl loop config (default: the make demo-wm loop)")
    ap.add_argument("--out", default="/tmp/bench_wm_loop_seeds", help="where the runs write")
    ap.add_argument("--no-control", dest="control", action="store_false", help="skip the real-simulator control")
    ap.add_argument("--reuse", action="store_true", help="keep finished loop runs whose recorded config matches")
    ap.add_argument("--control-of", type=int, default=None, help=argparse.SUPPRESS)  # one control run (subprocess)
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        print(f"error: need --seeds >= 1 and --jobs >= 1, got {args.seeds} and {args.jobs}", file=sys.stderr)
        return 2
    if args.control_of is not None and args.control_of < 0:  # (was: a traceback from the seed's overrides)
        print(f"error: --control-of {args.control_of}: expected a seed >= 0", file=sys.stderr)
        return 2
    from arm_runs import too_many_seeds

    if too_many_seeds(args.seeds, "one run per seed"):  # (was: 1e9 seeds started, one run each)
        return 2
    if not (ROOT / args.config).is_file():
        print(f"error: --config {args.config}: no such file under {ROOT}", file=sys.stderr)
        return 2
    extra = SMALL if args.small else []
    from grpo.config import ConfigError, load_config
    from vla_rl.wm_loop import WorldLoopConfig

    try:  # (was: a config of another command started the runs, each failing, then exit 1)
        load_config(WorldLoopConfig, str(ROOT / args.config), extra)
    except ConfigError as e:
        print(f"error: --config: {e}", file=sys.stderr)
        return 2
    from arm_runs import bad_out

    if bad_out(args.out):  # (was: a symlink loop's traceback, or a file there failing the first run)
        return 2
    out = Path(args.out).resolve()
    if args.control_of is not None:
        real_sim_control(args.control_of, out, args.config, extra)
        return 0
    seeds = list(range(min(args.seeds, 2) if args.small else args.seeds))
    print(f"World-VLA-Loop over seeds: {args.config} {' '.join(extra)}, seeds {seeds}, {args.jobs} at once, "
          f"control {'on' if args.control else 'off'}")
    t0 = time.time()
    try:
        def one_seed(s: int) -> tuple[dict, dict | None]:  # the control needs the loop's SFT policy: after its loop
            loop = run_loop_seed(s, out, args.config, extra, args.reuse)
            return loop, run_control_seed(s, out, args.config, extra, loop["reused"]) if args.control else None

        with ThreadPoolExecutor(args.jobs) as ex:
            done = dict(zip(seeds, ex.map(one_seed, seeds)))
        loops = {s: done[s][0] for s in seeds}
        controls = {s: done[s][1] for s in seeds} if args.control else {}
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    from grpo.config import load_config
    from vla_rl.wm_loop import WorldLoopConfig

    report(loops, controls, load_config(WorldLoopConfig, str(ROOT / args.config), extra).rl_iterations)
    print(f"\ntotal {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
