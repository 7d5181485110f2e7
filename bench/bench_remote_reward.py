"""Wall clock of scoring through a reward server, with and without overlapping it with the rollout (rewards.remote,
``reward.overlap``), on the demo config (configs/diffusion/shapes_branch.yaml, shortened: no mid-run evaluation, 8
evaluation prompts, ``--iterations`` iterations).

The reward (the shapes verifier, as in the demo) runs in its own process, ``diffusion-rl serve-reward``, which adds a
stand-in latency: ``fixed`` (``--delay-s``: every request waits that long, like network or queueing time) or
``per item`` (``--delay-per-item-s``: scoring time per image, one batch at a time, like a reward model's
throughput). Each latency is run serially (``reward.overlap=1``: roll out everything, then score) and overlapped
(``reward.overlap=K``: the rollout in K parts, each scored while the next rolls out), plus the reward in process
as the floor. Printed per arm, medians over the iterations (metrics.jsonl): the rollout seconds, the wait for rewards
after the rollout, their sum per iteration (what overlap changes; the update after it is the same computation in
every arm) with its ratio to the serial arm of the same latency, and the whole iteration (the update included, so
it carries the noise of other jobs on shared cores). Last line: whether the served reward trained the same LoRA
weights as the reward in process, bit for bit. Results and
the command: docs/RESULTS.md (Rewards served over the network).

    OMP_NUM_THREADS=1 python bench/bench_remote_reward.py [--iterations 4] [--overlap 2] [--delay-s 1.0]
        [--delay-per-item-s 0.1]
    python bench/bench_remote_reward.py --smoke      # tiny_sd3_branch, 1 iteration, short latencies (the test)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_server(name: str, kwargs: str, *delay: str) -> tuple[subprocess.Popen, str]:
    import os

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "diffusion_rl.cli", "serve-reward", name, "--kwargs", kwargs,
                             "--port", "0", *delay], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if " at http://" not in line:
        proc.kill()
        raise SystemExit(f"serve-reward did not start: {line!r}")
    return proc, line.split(" at ")[1].split()[0]


def run(config: str, over: list[str], out: Path) -> tuple[dict, list[dict]]:
    from diffusion_rl.config import DiffusionRLConfig
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from grpo.config import load_config
    from grpo.metrics import read_jsonl

    cfg = load_config(DiffusionRLConfig, str(ROOT / config), over + [f"output_dir={out}", "resume=false"])
    tr = DiffusionGRPOTrainer(cfg)
    res = tr.train(progress=False)
    if res["error"] is not None:
        raise SystemExit(f"run failed: {res['error']}")
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "time/iter_s" in r]
    return tr.adapter.trainable_state_dict(), rows


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--overlap", type=int, default=2, help="reward.overlap of the overlapped arms (parts per rollout)")
    ap.add_argument("--delay-s", type=float, default=1.0, help="the fixed latency per request")
    ap.add_argument("--delay-per-item-s", type=float, default=0.1, help="the scoring time per item")
    ap.add_argument("--smoke", action="store_true", help="tiny_sd3_branch, 1 iteration, short latencies")
    args = ap.parse_args(argv)
    if not (1 <= args.iterations <= 100_000 and 1 <= args.overlap <= 16 and 0 <= args.delay_s <= 3600
            and 0 <= args.delay_per_item_s <= 3600):  # (a nan fails every comparison)
        ap.error(f"--iterations {args.iterations}, --overlap {args.overlap}, --delay-s {args.delay_s}, "
                 f"--delay-per-item-s {args.delay_per_item_s}: expected --iterations in 1..100000, --overlap in 1..16 "
                 "(as reward.overlap) and delays in [0, 3600] s")
    if args.smoke:
        config, kwargs = "configs/diffusion/tiny_sd3_branch.yaml", "{}"
        base = ["train.iterations=1", "sampler.num_steps=6", "branch.split_steps=[1,3]", "branch.branch=[2]",
                "prompts.num_eval=2", "train.eval_steps=2", "train.log_images=false", "model.tiny.with_vae=false"]
        args.delay_s, args.delay_per_item_s, args.overlap = 0.05, 0.005, 2
    else:
        config, kwargs = "configs/diffusion/shapes_branch.yaml", '{"shape_width": 0.0}'
        base = [f"train.iterations={args.iterations}", "train.eval_every=0", "prompts.num_eval=8",
                "train.log_images=false", "train.save_every=1000"]
    tmp = Path(tempfile.mkdtemp(prefix="bench_remote_"))
    arms = [("none (in process)", None, 1)]
    latencies = (("fixed", "--delay-s", args.delay_s), ("per item", "--delay-per-item-s", args.delay_per_item_s))
    for lat, flag, val in latencies:
        label = f"{val:g} s per request" if lat == "fixed" else f"{val:g} s per item"
        arms += [(label, (flag, str(val)), 1), (label, (flag, str(val)), args.overlap)]
    results, weights = [], {}
    for i, (label, delay, k) in enumerate(arms):
        over = [*base, f"reward.overlap={k}"]
        proc = None
        if delay is None:
            over += ["reward.name=shapes_verifier", f"reward.kwargs={kwargs}"] if not args.smoke else \
                ["reward.name=shapes_verifier"]
        else:
            proc, url = start_server("shapes_verifier", kwargs, *delay)
            over += [f"reward.name={url}", "reward.kwargs={}"]
        try:
            w, rows = run(config, over, tmp / f"arm{i}")
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
        med = {k2: statistics.median(r[k2] for r in rows) for k2 in ("time/iter_s", "time/rollout_s", "time/reward_s")}
        rw = statistics.median(r["time/rollout_s"] + r["time/reward_s"] for r in rows)
        results.append((label, k, med["time/rollout_s"], med["time/reward_s"], rw, med["time/iter_s"]))
        weights[(label, k)] = w
    n = len(rows)
    print(f"reward served over HTTP vs in process, {config} ({n} iteration(s) per arm, median per iteration)")
    print(f"{'server latency':<22} {'overlap':>7} {'rollout s':>9} {'reward wait s':>13} {'rollout+wait s':>14} "
          f"{'vs serial':>9} {'s/iter':>7}")
    serial = {}
    for label, k, roll, wait, rw, it in results:
        if k == 1:
            serial[label] = rw
        ratio = f"{rw / serial[label]:.2f}" if label != "none (in process)" else ""
        print(f"{label:<22} {k:>7} {roll:>9.2f} {wait:>13.2f} {rw:>14.2f} {ratio:>9} {it:>7.2f}")
    import torch

    served = next((lbl, 1) for lbl, _, k in arms[1:] if k == 1)
    a, b = weights[("none (in process)", 1)], weights[served]
    same = a.keys() == b.keys() and all(torch.equal(a[x], b[x]) for x in a)
    print(f"served (overlap 1) == in process (overlap 1), final LoRA weights bit for bit: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
