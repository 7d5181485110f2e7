"""Low-precision exploration (Sol-RL, issue 4): bf16 vs FP8 vs NVFP4 rollout copies, side by side, in one run.

Model: the shipped colors-and-shapes demo denoiser (``builtin:shapes_sd3``, a pixel-space SD3 MM-DiT, 32x32) in bf16,
so rewards are meaningful; rewards are real: the programmatic shapes verifier and JPEG compressibility (PIL).

1. Reward fidelity: the same seeds (same initial noise, same SDE noise) sampled by the bf16 policy and by each
   quantized copy; Spearman rank correlation of the rewards (what pool selection relies on: the *ranking*).
2. Per-layer relative error of each quantized copy: weights ``||W_hat - W|| / ||W||`` and outputs
   ``||f_q(x) - f(x)|| / ||f(x)||`` on the layer's real inputs (captured with hooks during one denoiser call).
3. Candidates per second per precision (stage-1 pool sampling, no log-probs).
4. Reward vs wall clock: plain flat GRPO (N samples per prompt) vs pool-and-select (K candidates in NVFP4, N
   regenerated in bf16 and trained on), same N, same iterations, eval reward (ODE samples, fixed prompts).

On a CPU the FP8/NVFP4 paths are *emulated* (fake-quant in bf16 plus the quantization of activations): they are
SLOWER than bf16 here, and the pool-and-select wall clock carries that cost. The speed-up of Sol-RL needs the real
kernels (FP8 on Hopper, NVFP4 on Blackwell); only the fidelity numbers transfer from this run.

    python bench/bench_quant.py [--samples 96] [--steps 10] [--iterations 10] [--prompts 4] [--pool 12] [--train 4]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

from diffusion_rl.adapters import LoraSettings, ModelConfig, build_adapter  # noqa: E402
from diffusion_rl.config import DiffusionRLConfig, RewardConfig  # noqa: E402
from diffusion_rl.pool_rollout import PoolConfig, QuantizedAdapterView, candidate_noise, explore  # noqa: E402
from diffusion_rl.prompts import PromptConfig  # noqa: E402
from diffusion_rl.quant import QuantConfig, QuantLinear, make_rollout_copy  # noqa: E402
from diffusion_rl.sampling import SamplerConfig  # noqa: E402
from diffusion_rl.trainer import DiffusionGRPOTrainer  # noqa: E402
from grpo.train_step import GRPOConfig  # noqa: E402
from rewards.base import RewardBatch  # noqa: E402
from rewards.jpeg import jpeg_size_kb  # noqa: E402
from rewards.shapes import ShapesVerifier, sample_prompts  # noqa: E402

FORMATS = {"bf16": QuantConfig(format="bf16"),
           "fp8 (row, W8A8)": QuantConfig(format="fp8", fp8_granularity="row"),
           "fp8 (tensor, W8A8)": QuantConfig(format="fp8", fp8_granularity="tensor"),
           "nvfp4 (W4A4)": QuantConfig(format="nvfp4"),
           "nvfp4 (W4A16)": QuantConfig(format="nvfp4", quantize_activations=False)}


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a.numpy(), b.numpy()).statistic)


def model_cfg() -> ModelConfig:
    return ModelConfig(kind="sd3", path="builtin:shapes_sd3", dtype="bf16", height=32, width=32, max_sequence_length=1,
                       lora=LoraSettings(enabled=True, rank=8, alpha=16))


def sample_all(adapter, model, prompts, sc, seed, chunk=24):
    """Final samples of one candidate per prompt (global index i), keyed noise as the pool rollout."""
    cond = adapter.encode_prompts(prompts)
    out = []
    for s in range(0, len(prompts), chunk):
        idx = list(range(s, min(s + chunk, len(prompts))))
        x0, noise = candidate_noise(adapter.latent_shape, sc, seed, 0, idx, idx)
        out.append(explore(model, {k: v[idx] for k, v in cond.items()}, None, x0, noise, sc, 0))
    return torch.cat(out)


def layer_errors(adapter, copies: dict, prompts, sc, seed) -> dict[str, dict[str, tuple[float, float]]]:
    """{format: {layer: (weight rel err, output rel err)}} on inputs captured from one bf16 denoiser call."""
    ref = copies["bf16"]
    inputs: dict[str, torch.Tensor] = {}

    def grab(name):
        def hook(mod, args, out):
            inputs.setdefault(name, args[0].detach())  # returns None: the output is left alone
        return hook

    hooks = [m.register_forward_hook(grab(n)) for n, m in ref.named_modules() if n in ref.rollout_quant_report]
    idx = list(range(8))
    x0, _ = candidate_noise(adapter.latent_shape, sc, seed, 0, idx, idx)
    cond = adapter.encode_prompts(prompts[:8])
    with torch.no_grad():
        QuantizedAdapterView(adapter, ref).velocity(x0, torch.full((8,), 0.5), cond)
    for h in hooks:
        h.remove()
    res = {}
    for fmt, q in copies.items():
        if fmt == "bf16":
            continue
        res[fmt] = {}
        for n, m in q.named_modules():
            if not isinstance(m, QuantLinear):
                continue
            r = ref.get_submodule(n)
            w = r.weight.float()
            we = float((m.dequantized_weight(torch.float32) - w).norm() / w.norm())
            with torch.no_grad():
                y, yq = r(inputs[n]).float(), m(inputs[n]).float()
            res[fmt][n] = (we, float((yq - y).norm() / y.norm()))
    return res


def run_training(kind: str, iters: int, n: int, k: int, steps: int, seed: int, prompts: int, budget_s: float = 0.0
                 ) -> list[tuple[float, float, float, float]]:
    """[(wall seconds, eval reward, mean train reward, cumulative NFE)] after each iteration: ``iters`` iterations,
    or more until ``budget_s`` seconds of training wall clock are spent (capped at 6x ``iters``)."""
    cfg = DiffusionRLConfig(seed=seed, output_dir=f"/tmp/bench_quant_{kind}", resume=False, model=model_cfg(),
                            sampler=SamplerConfig(num_steps=steps, eta=0.8, same_init_noise=False,
                                                  timestep_fraction=0.5),
                            grpo=GRPOConfig(group_size=n, clip_low=0.2, kl_coef=0.0, adv_clip=5.0),
                            reward=RewardConfig(name="shapes_verifier"),
                            prompts=PromptConfig(source="shapes", num_eval=16))
    cfg.train.iterations, cfg.train.prompts_per_iter, cfg.train.lr = iters, prompts, 1e-3
    cfg.train.eval_steps, cfg.train.log_images = steps, False
    if kind == "grpo":
        tr = DiffusionGRPOTrainer(cfg, log=False)
    else:
        cfg.pool = PoolConfig(enabled=True, pool_size=k, train_size=n, quant=QuantConfig(format="nvfp4"), chunk=32)
        tr = DiffusionGRPOTrainer(cfg, log=False)
    curve = [(0.0, tr.evaluate(), float("nan"), 0.0)]
    wall, nfe = 0.0, 0.0
    while len(curve) <= iters or (wall < budget_s and len(curve) <= 6 * iters):
        t = time.perf_counter()
        s = tr.step()
        wall += time.perf_counter() - t  # rollout (pool + regeneration) + update; evaluation excluded
        nfe += s["cost/nfe_rollout"] + s["cost/nfe_train"]
        curve.append((wall, tr.evaluate(), s["reward/mean"], nfe))
    return curve


def main(argv=None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=96, help="seeds for the reward correlation")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--prompts", type=int, default=4, help="prompts per training iteration")
    ap.add_argument("--pool", type=int, default=12, help="K candidates per prompt")
    ap.add_argument("--train", type=int, default=4, help="N trained samples per prompt")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if min(args.samples, args.steps, args.iterations, args.prompts) < 1 or not 2 <= args.train <= args.pool:
        ap.error(f"--samples {args.samples}, --steps {args.steps}, --iterations {args.iterations}, --prompts "
                 f"{args.prompts}, --train {args.train}, --pool {args.pool}: expected the first four >= 1 and 2 <= "
                 "--train <= --pool")
    if args.samples > 100_000:  # (was: 1e9 seeds to score started, after the model loaded)
        ap.error(f"--samples {args.samples}: expected at most 100000 seeds for the reward correlation")
    if not 0 <= args.seed < 2**32:
        ap.error(f"--seed {args.seed}: expected an integer in [0, 2**32 - 1]")
    t_start = time.perf_counter()
    import random

    print("bench_quant: device cpu, OMP_NUM_THREADS", os.environ["OMP_NUM_THREADS"], "| FP8/NVFP4 are EMULATED here "
          "(fake-quant in bf16): expect them to be SLOWER than bf16 on this machine; the real kernels need a GPU "
          "(FP8: compute capability >= 9.0, NVFP4: >= 10.0).")
    adapter = build_adapter(model_cfg())
    prompts = sample_prompts(args.samples, random.Random(args.seed))
    sc = SamplerConfig(num_steps=args.steps, eta=0.8, same_init_noise=False)
    copies = {f: make_rollout_copy(adapter.transformer, c) for f, c in FORMATS.items()}
    rep = copies["nvfp4 (W4A4)"].rollout_quant_report
    nq = sum(not r.startswith("skipped") for r in rep.values())
    print(f"quantized linears: {nq} of {len(rep)} (skipped: embedders, norm/modulation, final proj_out)")

    verifier = ShapesVerifier()

    def rewards(lat):
        im = adapter.decode(lat)
        return verifier(RewardBatch(images=im, prompts=prompts)).total.float(), -jpeg_size_kb(im)

    # 1 + 3: fidelity and throughput ---------------------------------------------------------------------------------
    ref_lat = None
    rows = []
    for fmt, q in copies.items():
        model = QuantizedAdapterView(adapter, q)
        sample_all(adapter, model, prompts[:4], sc, args.seed)  # warm-up
        dt = float("inf")
        for _ in range(2):  # best of 2: the machine is shared, the minimum is the least disturbed pass
            t = time.perf_counter()
            lat = sample_all(adapter, model, prompts, sc, args.seed)
            dt = min(dt, time.perf_counter() - t)
        rs, rj = rewards(lat)
        if ref_lat is None:
            ref_lat, ref_s, ref_j, ref_dt = lat, rs, rj, dt
        rows.append((fmt, args.samples / dt, dt / ref_dt, spearman(rs, ref_s), spearman(rj, ref_j),
                     float(rs.mean()), float((lat - ref_lat).norm() / ref_lat.norm())))
    print(f"\n1+3. same {args.samples} seeds, {args.steps} SDE steps; Spearman vs the bf16 rollout copy; candidates/s")
    print(f"{'format':20s} {'cand/s':>8s} {'time x bf16':>11s} {'rho shapes':>10s} {'rho jpeg':>9s} "
          f"{'shapes mean':>11s} {'latent rel err':>14s}")
    for fmt, cps, slow, rs_, rj_, m, le in rows:
        print(f"{fmt:20s} {cps:8.1f} {slow:11.2f} {rs_:10.3f} {rj_:9.3f} {m:11.3f} {le:14.4f}")
    print("NOTE: on this CPU the quantized formats run emulated and are slower than bf16 (time x bf16 > 1); "
          "the candidates/s ranking is inverted on FP8/FP4 hardware.")

    # 2: per-layer errors ----------------------------------------------------------------------------------------------
    errs = layer_errors(adapter, copies, prompts, sc, args.seed)
    print("\n2. per-layer relative error (weights | outputs on real inputs), mean and worst layer")
    for fmt, d in errs.items():
        we = torch.tensor([v[0] for v in d.values()])
        oe = torch.tensor([v[1] for v in d.values()])
        worst = max(d, key=lambda n: d[n][1])
        print(f"{fmt:20s} weights mean {float(we.mean()):.4f} max {float(we.max()):.4f} | outputs mean "
              f"{float(oe.mean()):.4f} max {float(oe.max()):.4f} ({worst})")
    d = errs["nvfp4 (W4A4)"]
    print("   nvfp4 (W4A4) by layer:", ", ".join(f"{n.replace('transformer_blocks.', 'b')}={v[1]:.3f}"
                                             for n, v in list(d.items())[:12]), "...")

    # 4: reward vs wall clock ------------------------------------------------------------------------------------------
    print(f"\n4. reward vs wall clock: plain GRPO (N={args.train}/prompt, bf16) vs pool-and-select (K={args.pool} "
          f"NVFP4-emulated candidates/prompt, N={args.train} regenerated in bf16), {args.iterations} iterations, "
          f"{args.prompts} prompts/iteration, eval = shapes verifier on 16 fixed prompts (ODE); NFE counts every "
          "denoiser call (pool calls are NVFP4, the rest bf16)")
    budget = 0.0
    for kind in ("pool", "grpo"):
        curve = run_training(kind, args.iterations, args.train, args.pool, args.steps, args.seed, args.prompts, budget)
        budget = curve[-1][0]
        every = max(1, (len(curve) - 1) // 4)
        print("pool+select:" if kind == "pool" else "plain GRPO (run on to the same wall clock):")
        for it, (w, e, r, nfe) in enumerate(curve):
            if it % every == 0 or it == len(curve) - 1:
                print(f"   iter {it:3d}  wall {w:6.1f}s  NFE {nfe:7.0f}  eval reward {e:.3f}" +
                      (f"  train-batch reward {r:.3f}" if r == r else ""))
    print("NOTE: pool+select wall clock includes the emulated NVFP4 pool (slower than bf16 on CPU); its train reward "
          "is the selected (contrastive) subset's, not comparable to plain GRPO's mean.")
    print(f"\ntotal {time.perf_counter() - t_start:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
