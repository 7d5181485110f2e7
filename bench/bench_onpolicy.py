"""The on-policy gap of the shipped CPU recipes, and the injected faults the check catches (issue 27.1).

Each recipe runs its first RL iteration(s) as shipped, except for the lengths: fewer iterations, no mid-run
evaluation, and for the VLA recipes a short SFT. It prints ``onpolicy/max_abs_dlogp``, ``mean_abs_dlogp`` and
``max_ratio_dev`` per iteration (the first minibatch before the first optimizer step, against the rollout's stored
log-probs). Then the faults are injected on tiny_sd3_flat: dropout in the training forward, a bf16 rollout with an
fp32 recompute, and a batch-composition-dependent kernel with a sub-batch update. Results are in
docs/RESULTS.md (On-policy self-check).

    OMP_NUM_THREADS=1 python bench/bench_onpolicy.py [--only NAME]
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DIFFUSION = {  # recipe -> overrides (lengths only)
    "tiny_sd3_flat": ["train.iterations=2"],
    "tiny_sd3_branch": ["train.iterations=2"],
    "shapes_flat": ["train.iterations=2", "train.eval_every=0", "prompts.num_eval=4"],
    "shapes_branch": ["train.iterations=2", "train.eval_every=0", "prompts.num_eval=4"],
    "shapes_pool_fp8": ["train.iterations=2", "train.eval_every=0", "prompts.num_eval=4"],
}
VLA = {
    "tabletop_reach": ["rl.iterations=2", "sft.steps=200", "rl.eval_episodes=2", "rl.num_videos=0", "rl.eval_every=0"],
    "tabletop_reach_one": ["rl.iterations=2", "rl.eval_episodes=2", "rl.num_videos=0", "rl.eval_every=0"],
}


def gaps(out: Path) -> list[dict]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: r[k] for k in r if k.startswith("onpolicy/")} | {"iteration": r["step"]} for r in rows
            if any(k.startswith("onpolicy/") for k in r)]


def run_diffusion(name: str, over: list[str], inject=None, tol: float = 1e-4) -> list[dict]:
    from diffusion_rl.config import DiffusionRLConfig
    from diffusion_rl.trainer import DiffusionGRPOTrainer
    from grpo.config import load_config

    out = Path(tempfile.mkdtemp()) / name
    cfg = load_config(DiffusionRLConfig, str(ROOT / f"configs/diffusion/{name}.yaml"),
                      over + [f"output_dir={out}", "resume=false", "train.log_images=false",
                              f"train.onpolicy_tol={tol}"])
    tr = DiffusionGRPOTrainer(cfg)
    if inject is not None:
        inject(tr)
    tr.train(progress=False)
    return gaps(out)


def run_vla(name: str, over: list[str]) -> list[dict]:
    from grpo.config import load_config
    from vla_rl.trainer import VLARLConfig, VLARLTrainer

    out = Path(tempfile.mkdtemp()) / name
    cfg = load_config(VLARLConfig, str(ROOT / f"configs/vla/{name}.yaml"), over + [f"output_dir={out}", "resume=false"])
    VLARLTrainer(cfg, quiet=True).train()
    return gaps(out)


def _out(o):
    return o[0] if isinstance(o, tuple) else o.sample


def dropout(tr):
    tr.adapter.transformer.register_forward_hook(lambda m, i, o: (F.dropout(_out(o), 0.1, m.training),))


def bf16_rollout(tr):
    t = tr.adapter.transformer
    orig = t.forward

    def fwd(*a, **k):
        with torch.autocast("cpu", torch.bfloat16) if not torch.is_grad_enabled() else contextlib.nullcontext():
            return orig(*a, **k)
    t.forward = fwd


def batch_dependent(tr):
    tr.adapter.transformer.register_forward_hook(lambda m, i, o: (_out(o) + 1e-3 * _out(o).mean(0, keepdim=True),))
    credit = tr.credit

    def drop_half(*a):
        adv, keep = credit(*a)
        keep = keep.clone()
        keep[::2] = False
        return adv, keep
    tr.credit = drop_half


def fmt(name: str, g: list[dict], seconds: float) -> str:
    if not g:
        return f"| {name} | (no update ran) | | | {seconds:.0f} |"
    mx = max(x["onpolicy/max_abs_dlogp"] for x in g)
    mean = max(x["onpolicy/mean_abs_dlogp"] for x in g)
    rd = max(x["onpolicy/max_ratio_dev"] for x in g)
    return f"| {name} | {mx:.3g} | {mean:.3g} | {rd:.3g} | {seconds:.0f} |"


def main() -> None:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser()
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    if args.only is not None and args.only not in {**DIFFUSION, **VLA}:  # (was: an empty table, exit 0)
        ap.error(f"--only {args.only!r}: expected one of {', '.join([*DIFFUSION, *VLA])}")
    torch.set_num_threads(1)
    print("| recipe | max abs dlogp | mean abs dlogp | max ratio - 1 | seconds |\n|---|---|---|---|---|")
    for name, over in DIFFUSION.items():
        if args.only and args.only != name:
            continue
        t = time.time()
        print(fmt(name, run_diffusion(name, over), time.time() - t), flush=True)
    for name, over in VLA.items():
        if args.only and args.only != name:
            continue
        t = time.time()
        print(fmt(name, run_vla(name, over), time.time() - t), flush=True)
    if args.only:
        return
    print("\n| injected fault (tiny_sd3_flat) | tol | max abs dlogp | mean abs dlogp | max ratio - 1 | caught |\n"
          "|---|---|---|---|---|---|")
    for label, inj, tol in (("dropout p=0.1 in the training forward", dropout, 1e-4),
                            ("bf16 rollout, fp32 recompute", bf16_rollout, 1e-4),
                            ("batch-composition-dependent kernel, sub-batch update", batch_dependent, 1e-7)):
        g = run_diffusion("tiny_sd3_flat", ["train.iterations=1"], inj, tol)
        mx = max(x["onpolicy/max_abs_dlogp"] for x in g)
        print(f"| {label} | {tol:g} | {mx:.3g} | {max(x['onpolicy/mean_abs_dlogp'] for x in g):.3g} | "
              f"{max(x['onpolicy/max_ratio_dev'] for x in g):.3g} | {'yes' if mx > tol else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
