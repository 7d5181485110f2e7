"""The GPU check: every code path that needs a GPU, run once on one node, measured beside the plan's prediction.

Run by ``bench/gpu_check.sh`` after an offline install (README "Run on a GPU node without internet"); stages:

1. ``cuda_tests``: pytest on every test file that holds a test skipped without CUDA
   (``skipif(not torch.cuda.is_available() ...)``); counts of passed / failed / skipped.
2. ``diffusion/<strategy>``: one iteration (rollout, reward, credit, update) of flat GRPO, BranchGRPO (tree) and
   pool-and-select (FP8 rollout copy) with the ``configs/diffusion/sd35m_pickscore.yaml`` recipe at one prompt per
   iteration, on a full-width SD3.5-Medium built from :mod:`diffusion_rl.architectures` with random weights (denoiser,
   CLIP-L, CLIP-G, T5-XXL, VAE; word-level tokenizers, bf16), 512 px. Measured: peak CUDA memory allocated during the
   iteration (``torch.cuda.max_memory_allocated``, the weights included) and seconds (synchronized wall clock), beside
   :mod:`diffusion_rl.plan`'s prediction for the same config on 1 GPU (DDP, gradient checkpointing on: memory
   ``memory_per_gpu(...)["peak"]``, seconds = FLOPs / (989 TFLOP/s x 40% MFU)); the measured MFU is
   FLOPs / (seconds x 989 TFLOP/s). The reward (JPEG size, PIL on the CPU) holds no GPU memory, as the plan assumes.
   ``--flux`` adds the same for FLUX.1-dev (12 B; 1 x 80 GB holds it only with T5 and the VAE beside it, so it is
   opt-in).
3. ``fp8``: the pool's rollout copy of that denoiser in FP8 (W8A8, row scales) with the real kernels
   (``torch._scaled_mm``, compute capability >= 9.0) and emulated (fake-quant in bf16): agreement of the velocity
   (relative L2 error of real vs emulated, and of each vs the bf16 copy, on the same inputs) and stage-1 rollout
   speed (candidates per second over the recipe's steps; ratios to the bf16 copy) -- the measured ratio the pool's
   cost model needs (``strategies.pool_cost`` counts a pool call as a policy call).
4. ``smolvla``: one GRPO iteration of LeRobot's SmolVLA (tabletop/reach_one, random weights) when ``lerobot`` is
   importable (``.venv-lerobot``; the wheelhouse does not carry the LeRobot stack), otherwise skipped, naming why. On
   a GPU the backbone is the project's tiny SmolVLM builder at SmolVLM2-500M's text width (960) and SmolVLA's 16 text
   layers, 512 px: its vision tower is one layer, so this is not the 450 M checkpoint (no weights or configs come from
   the hub here); ``params_b`` in the row says what ran.

``--dry`` (what ``DEVICE=cpu bench/gpu_check.sh`` passes, and what the test runs): the same code on the CPU at tiny
sizes (a shrunken SD3.5 architecture, 64 px, 4 steps; SmolVLA with a tiny backbone); every stage or measurement
that needs CUDA is reported as skipped with its reason. Output: ``OUT/gpu_check.json`` and ``OUT/gpu_check.md``.

    python bench/gpu_check.py [--out runs/gpu_check] [--dry] [--stages cuda_tests,diffusion,fp8,smolvla] [--flux]
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

torch = None  # imported by main() once the arguments are checked: a bad argument is answered at once

STAGES = ("cuda_tests", "diffusion", "fp8", "smolvla")
STRATEGIES = ("flat", "tree", "pool")
RECIPE = ROOT / "configs" / "diffusion" / "sd35m_pickscore.yaml"
PROMPTS = ["a photo of a cat on a red cup", "a robot arm picks up a blue cube", "a small dog next to a yellow star"]
CUDA_SKIP = re.compile(r"skipif\(\s*not\s+torch\.cuda\.is_available\(\)")


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


# ---- context ---------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Ctx:
    dry: bool  # tiny sizes on the CPU; CUDA stages skipped
    device: torch.device
    out: Path
    work: Path  # scratch: run dirs of the trainers
    steps: int | None  # sampler steps (None: the recipe's)
    plan: bool = True  # trace diffusion_rl.plan's prediction beside each measurement
    repeat: int = 1  # diffusion iterations per strategy; the last one is reported (2: a warm iteration)
    done: list = dataclasses.field(default_factory=list)  # the rows of the finished stages
    t0: float = dataclasses.field(default_factory=time.perf_counter)  # when the check started
    env: dict = dataclasses.field(default_factory=dict)  # device, torch, CUDA and Python versions

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)


def no_cuda_reason() -> str:
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return "dry mode (--dry / DEVICE=cpu): tiny sizes on the CPU"


def row(stage: str, status: str, reason: str = "", **metrics) -> dict:
    return {"stage": stage, "status": status, "reason": reason, **metrics}


# ---- 1. the CUDA tests -----------------------------------------------------------------------------------------------
def cuda_test_files(root: Path = ROOT) -> list[str]:
    """Test files (relative to ``root``) holding a test that skips without CUDA; tests/lerobot only where lerobot is."""
    out = []
    for p in sorted((root / "tests").rglob("test_*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith("tests/lerobot/") and not _has("lerobot"):
            continue
        if CUDA_SKIP.search(p.read_text()):
            out.append(rel)
    return out


def _has(mod: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False


def _junit_counts(path: Path) -> dict[str, int]:
    import xml.etree.ElementTree as ET

    c = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    failed = []
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {ch.tag for ch in case}
        if "failure" in tags or "error" in tags:
            c["failed" if "failure" in tags else "errors"] += 1
            failed.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" in tags:
            c["skipped"] += 1
        else:
            c["passed"] += 1
    c["failing"] = failed[:10]
    return c


def stage_cuda_tests(ctx: Ctx) -> list[dict]:
    files = cuda_test_files()
    if not files:
        return [row("cuda_tests", "failed", "no test file with a CUDA skip found under tests/")]
    t = time.perf_counter()
    xml = ctx.work / "cuda_tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *files]
    if not ctx.cuda:
        cmd.insert(-len(files), "--collect-only")  # the files import and collect; nothing runs
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    secs = time.perf_counter() - t
    if not xml.is_file():
        return [row("cuda_tests", "failed", f"pytest exited {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")]
    if not ctx.cuda:
        n = sum(1 for line in r.stdout.splitlines() if "::" in line)
        ok = r.returncode == 0
        return [row("cuda_tests", "skipped" if ok else "failed",
                    f"{no_cuda_reason()}; {n} tests in {len(files)} files collected" if ok
                    else f"collection failed (pytest exit {r.returncode}): {r.stdout.strip()[-300:]}",
                    files=files, collected=n, seconds=secs)]
    c = _junit_counts(xml)
    status = "ok" if r.returncode == 0 and c["failed"] == c["errors"] == 0 else "failed"
    return [row("cuda_tests", status, "" if status == "ok" else f"failing: {', '.join(c['failing'])}",
                files=files, seconds=secs, **{k: v for k, v in c.items() if k != "failing"})]


# ---- 2. diffusion strategies on a full-width architecture with random weights ---------------------------------------
def tiny_arch(name: str = "sd3.5-medium"):
    """``name``'s architecture shrunk to CPU size, same classes and wiring (one dual-attention + one plain MM-DiT
    block 32 wide, two one-layer CLIPs, a one-layer T5, a 16-channel 8x VAE 16 wide)."""
    from diffusion_rl.architectures import ARCHS

    a = ARCHS[name]
    if a.kind != "sd3":
        fail(f"--dry shrinks the SD3 architectures only, not {name}")
    # the widths the pipeline and the plan wire together stay: CLIP projections 768 + 1280 = the pooled 2048, T5 as
    # wide as the joint attention (4096, CLIP states are zero-padded to it); everything else is tiny
    clip = lambda h, proj: ("CLIPTextModelWithProjection", "CLIPTextConfig",  # noqa: E731
                            dict(vocab_size=128, hidden_size=h, intermediate_size=2 * h, num_hidden_layers=1,
                                 num_attention_heads=2, max_position_embeddings=77, projection_dim=proj,
                                 hidden_act="gelu"))
    t5 = ("T5EncoderModel", "T5Config", dict(vocab_size=128, d_model=4096, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                                              relative_attention_num_buckets=8, feed_forward_proj="gated-gelu"))
    vae = ("AutoencoderKL", dict(a.vae[1], block_out_channels=(16, 16, 16, 16), layers_per_block=1, norm_num_groups=8))
    return dataclasses.replace(
        a, name=f"{name} (shrunk for --dry)", full_depth=(1, 1), published_params=0.0,
        transformer=dict(a.transformer, num_attention_heads=2, attention_head_dim=16, caption_projection_dim=32,
                         pos_embed_max_size=16),
        text_encoders={"text_encoder": clip(16, 768), "text_encoder_2": clip(32, 1280), "text_encoder_3": t5}, vae=vae)


def random_modules(arch, denoiser: str, device: torch.device) -> tuple[torch.nn.Module, dict, torch.nn.Module]:
    """The denoiser (``diffusers.<denoiser>``), text encoders and VAE of ``arch`` with random weights (seed 0), built on
    ``device`` in bf16 from the architecture's configs (no hub): what the random SD3 / FLUX pipelines are made of."""
    import diffusers
    import transformers

    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            tr = getattr(diffusers, denoiser)(**arch.config())
            enc = {n: getattr(transformers, m)(getattr(transformers, c)(**kw))
                   for n, (m, c, kw) in arch.text_encoders.items()}
            vae = getattr(diffusers, arch.vae[0])(**arch.vae[1])
    finally:
        torch.set_default_dtype(prev)
    return tr, enc, vae


def random_sd3_pipeline(arch, max_len: int, device: torch.device):
    """A ``StableDiffusion3Pipeline`` of ``arch`` with random weights, built on ``device`` in bf16 (no hub): the
    denoiser, text encoders and VAE from the architecture's configs; word-level tokenizers (CLIP: 77 tokens, T5:
    ``max_len``), so the sequence lengths are the real ones."""
    from diffusers import FlowMatchEulerDiscreteScheduler, StableDiffusion3Pipeline

    from diffusion_rl.tiny_models import make_tokenizer

    words = " ".join(PROMPTS).split()
    tr, enc, vae = random_modules(arch, "SD3Transformer2DModel", device)
    return StableDiffusion3Pipeline(
        transformer=tr, scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0), vae=vae,
        text_encoder=enc["text_encoder"], tokenizer=make_tokenizer(words, 77),
        text_encoder_2=enc["text_encoder_2"], tokenizer_2=make_tokenizer(words, 77),
        text_encoder_3=enc["text_encoder_3"], tokenizer_3=make_tokenizer(words, max_len))


def strategy_config(ctx: Ctx, strategy: str, run_dir: Path, arch_name: str = "sd3.5-medium"):
    """The recipe (configs/diffusion/sd35m_pickscore.yaml) at one prompt per iteration, as flat / tree / pool; for
    FLUX.1-dev the same iteration with FLUX's model section (512 tokens of T5, guidance-distilled: no CFG)."""
    from diffusion_rl.config import DiffusionRLConfig
    from grpo.config import load_config

    over = [f"output_dir={run_dir}", "resume=false", "train.prompts_per_iter=1", "train.log_images=false",
            "reward.name=jpeg_compressibility", "prompts.source=list", f"prompts.prompts={json.dumps(PROMPTS)}",
            "prompts.num_eval=1", f"model.device={ctx.device}"]
    if ctx.dry:
        over += ["model.height=64", "model.width=64", "model.max_sequence_length=16", "model.lora.rank=4",
                 "branch.split_steps=[0, 1]", "model.decode_batch=0"]
    if arch_name.startswith("flux"):
        over += ["model.kind=flux", "model.path=black-forest-labs/FLUX.1-dev", "model.max_sequence_length=512",
                 "sampler.cfg_scale=1.0"]
    steps = ctx.steps or (4 if ctx.dry else None)
    if steps:
        over.append(f"sampler.num_steps={steps}")
    group = 4 if ctx.dry else 16
    if strategy == "tree":
        over += ["branch.enabled=true"]
    elif strategy == "flat":
        over += ["branch.enabled=false", f"grpo.group_size={group}"]
    elif strategy == "pool":
        over += ["branch.enabled=false", "pool.enabled=true", f"pool.pool_size={group}", "pool.train_size=4",
                 "grpo.group_size=4", "pool.quant.format=fp8", "pool.quant.backend=auto"]
    return load_config(DiffusionRLConfig, RECIPE, over)


def timed_step(ctx: Ctx, trainer) -> tuple[dict, float, float | None]:
    """One ``trainer.step()`` timed between device syncs: ``(stats, seconds, peak GiB or None on CPU)``."""
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    ctx.sync()
    t = time.perf_counter()
    stats = trainer.step()
    ctx.sync()
    secs = time.perf_counter() - t
    return stats, secs, torch.cuda.max_memory_allocated(ctx.device) / 2**30 if ctx.cuda else None


def _free(ctx: Ctx) -> None:
    """Release what the last stage held. After a CUDA fault (an illegal memory access) the context is broken and this
    raises too: printed, not raised, so that the failure stays the stage's row and the report is still written."""
    gc.collect()
    if ctx.cuda:
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            traceback.print_exc()


def stage_diffusion(ctx: Ctx, arch_name: str = "sd3.5-medium") -> tuple[list[dict], object | None]:
    """One iteration of each strategy; returns the rows and the adapter (reused by the FP8 stage)."""
    from diffusion_rl.adapters import build_adapter
    from diffusion_rl.architectures import ARCHS
    from diffusion_rl.plan import H100_BF16_TFLOPS, build_plan, iteration_flops, memory_per_gpu, seconds_per_iteration
    from diffusion_rl.trainer import DiffusionGRPOTrainer

    arch = tiny_arch(arch_name) if ctx.dry else ARCHS[arch_name]
    label = f"diffusion/{arch_name}"
    cfgs = {s: strategy_config(ctx, s, ctx.work / f"{arch_name}_{s}", arch_name) for s in STRATEGIES}
    t = time.perf_counter()
    plan = build_plan(cfgs["flat"], arch) if ctx.plan else None  # traces depend on the model section: one for the three
    plan_s = time.perf_counter() - t
    t = time.perf_counter()
    pipe = random_sd3_pipeline(arch, cfgs["flat"].model.max_sequence_length, ctx.device) if arch.kind == "sd3" \
        else random_flux_pipeline(arch, cfgs["flat"].model.max_sequence_length, ctx.device)
    adapter = build_adapter(cfgs["flat"].model, pipe=pipe)
    ctx.sync()
    build_s = time.perf_counter() - t
    n_params = sum(p.numel() for p in adapter.transformer.parameters())
    print(f"{label}: built {arch.name} with random weights in {build_s:.1f}s ({n_params / 1e9:.3f} B denoiser "
          f"parameters); plan traced in {plan_s:.1f}s", flush=True)
    rows = []
    for s in STRATEGIES:
        cfg = cfgs[s]
        base = dict(arch=arch.name, resolution=f"{cfg.model.height}x{cfg.model.width}", steps=cfg.sampler.num_steps,
                    nfe=strategy_nfe(cfg), flops=None, pred_peak_gib=None, pred_seconds=None)
        if plan is not None:
            f = iteration_flops(plan, cfg)
            base.update(flops=f["total"], pred_seconds=seconds_per_iteration(f["total"], 1, H100_BF16_TFLOPS, 0.4),
                        pred_peak_gib=memory_per_gpu(plan, cfg, 1, "ddp", cfg.model.gradient_checkpointing)["peak"]
                        / 2**30)
        name = f"{label}/{s}"
        if s == "pool" and not ctx.cuda:
            base["note"] = "FP8 rollout copy emulated (no CUDA)"
        try:
            tr = DiffusionGRPOTrainer(cfg, adapter=adapter, log=False)
            tr.adapter.encode_prompts(PROMPTS + [""])
            _free(ctx)
            first_s = None
            for i in range(ctx.repeat):  # the first iteration also pays CUDA's first-use costs (kernels, handles)
                stats, secs, peak = timed_step(ctx, tr)
                first_s = secs if i == 0 else first_s
            finite = bool(torch.isfinite(torch.tensor(stats["reward/mean"])))
            rows.append(row(name, "ok" if finite else "failed", "" if finite else "non-finite reward", **base,
                            seconds=secs, first_seconds=first_s, iterations=ctx.repeat, peak_gib=peak,
                            mfu=base["flops"] / (secs * H100_BF16_TFLOPS * 1e12) if plan is not None else None,
                            memory_reason=None if ctx.cuda else no_cuda_reason(),
                            reward_mean=float(stats["reward/mean"]), skipped_updates=stats.get("skipped_updates")))
            del tr
        except Exception as e:  # noqa: BLE001 - one stage failing is a row, the others still run
            rows.append(row(name, "failed", _one_line(e), **base))
            traceback.print_exc()
        _free(ctx)
        print(f"{name}: {rows[-1]['status']} {rows[-1].get('seconds', 0):.1f}s", flush=True)
        write_report(ctx, rows)  # a run cut short (a time limit, a CUDA fault) keeps what it measured
    return rows, adapter


def strategy_nfe(cfg) -> float:
    from diffusion_rl.strategies import strategy_cost

    return float(strategy_cost(cfg)["nfe"])


def random_flux_pipeline(arch, max_len: int, device: torch.device):
    """FLUX.1-dev with random weights (as :func:`random_sd3_pipeline`): CLIP-L, T5-XXL, the 12 B denoiser, bf16."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline

    from diffusion_rl.tiny_models import make_tokenizer

    words = " ".join(PROMPTS).split()
    tr, enc, vae = random_modules(arch, "FluxTransformer2DModel", device)
    return FluxPipeline(transformer=tr, scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0), vae=vae,
                        text_encoder=enc["text_encoder"], tokenizer=make_tokenizer(words, 77),
                        text_encoder_2=enc["text_encoder_2"], tokenizer_2=make_tokenizer(words, max_len))


def stage_flux(ctx: Ctx) -> list[dict]:
    """FLUX.1-dev: the three strategies as for SD3.5 (the SD3.5 recipe's iteration, FLUX's model section)."""
    if not ctx.cuda:
        return [row("diffusion/flux.1-dev", "skipped", f"{no_cuda_reason()}; FLUX is run only with --flux on a GPU")]
    rows, adapter = stage_diffusion(ctx, "flux.1-dev")
    del adapter
    _free(ctx)
    return rows


# ---- 3. FP8: real kernels vs emulation -------------------------------------------------------------------------------
def stage_fp8(ctx: Ctx, adapter) -> list[dict]:
    from diffusion_rl.pool_rollout import QuantizedAdapterView, candidate_noise, explore
    from diffusion_rl.quant import QuantConfig, make_rollout_copy
    from diffusion_rl.quant.backends import real_available
    from diffusion_rl.sampling import SamplerConfig

    if adapter is None:
        return [row("fp8", "failed", "the diffusion stage built no model")]
    real_ok, why = real_available("fp8", adapter.device)
    sc = SamplerConfig(num_steps=ctx.steps or (4 if ctx.dry else 20), eta=0.7, shift=3.0)
    R = 2 if ctx.dry else 8
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(R)]
    cond = adapter.encode_prompts(prompts)
    idx = list(range(R))
    x0, noise = candidate_noise(adapter.latent_shape, sc, 0, 0, idx, idx)
    copies = {"bf16": QuantConfig(format="bf16"),
              "fp8 emulated": QuantConfig(format="fp8", fp8_granularity="row", backend="emulated")}
    if real_ok:
        copies["fp8 real"] = QuantConfig(format="fp8", fp8_granularity="row", backend="real", strict=True)
    vel, speed = {}, {}
    sigma = torch.full((R,), 0.6)
    for name, qc in copies.items():
        q = make_rollout_copy(adapter.transformer, qc)
        view = QuantizedAdapterView(adapter, q)
        with torch.no_grad():
            # the same inputs for every copy; also the warm-up (kernels, workspaces) before the timed rollout
            vel[name] = view.velocity(x0.to(adapter.device), sigma.to(adapter.device), cond).float().cpu()
        ctx.sync()
        t = time.perf_counter()
        explore(view, cond, None, x0, noise, sc, 0)
        ctx.sync()
        speed[name] = R / (time.perf_counter() - t)
        del q, view
        _free(ctx)
    rel = lambda a, b: float((vel[a] - vel[b]).norm() / vel[b].norm())  # noqa: E731
    rows = [row("fp8/emulated", "ok", "", candidates_per_s=speed["fp8 emulated"],
                time_vs_bf16=speed["bf16"] / speed["fp8 emulated"], rel_err_vs_bf16=rel("fp8 emulated", "bf16"),
                candidates=R, steps=sc.num_steps, bf16_candidates_per_s=speed["bf16"])]
    if real_ok:
        rows.append(row("fp8/real", "ok", why, candidates_per_s=speed["fp8 real"],
                        time_vs_bf16=speed["bf16"] / speed["fp8 real"], rel_err_vs_bf16=rel("fp8 real", "bf16"),
                        rel_err_vs_emulated=rel("fp8 real", "fp8 emulated"),
                        speed_vs_emulated=speed["fp8 real"] / speed["fp8 emulated"], candidates=R, steps=sc.num_steps))
    else:
        rows.append(row("fp8/real", "skipped", why))
    return rows


# ---- 4. SmolVLA ------------------------------------------------------------------------------------------------------
def stage_smolvla(ctx: Ctx) -> list[dict]:
    if not _has("lerobot"):
        return [row("smolvla", "skipped", "lerobot is not importable here (the LeRobot stack is not in this "
                    "environment: .venv-lerobot on a machine with the registry, `make lerobot`)")]
    if not ctx.cuda and not ctx.dry:
        return [row("smolvla", "skipped", no_cuda_reason())]
    from grpo.config import load_config
    from vla_rl.config import VLARLConfig
    from vla_rl.trainer import VLARLTrainer

    run = ctx.work / "smolvla"
    if ctx.dry:
        tiny, size = {"hidden": 32, "layers": 2, "patch_size": 4}, 32
    else:  # SmolVLM2-500M's text width and SmolVLA's 16 text layers (vla_rl.plan.SMOLVLA), 512 px; random weights
        tiny, size = {"hidden": 960, "layers": 16, "patch_size": 16}, 512
    lr = {"vlm_model_name": "tiny", "tiny": tiny, "resize_imgs_with_padding": [size, size], "tokenizer_max_length": 48,
          "train_expert_only": True}
    over = [f"output_dir={run}", "resume=false", f"device={ctx.device}", "rl.iterations=1", "sft.steps=1",
            "sft.demos_per_task=2", "sft.batch_size=2", "rl.groups_per_task=2", "rl.minibatch_size=8",
            "rl.eval_episodes=2", f"policy.lerobot={json.dumps(lr)}",
            f"policy.image_size={size}",
            f"env.kwargs={json.dumps({'image_size': size, 'cameras': ['agentview', 'wrist']})}"]
    try:
        cfg = load_config(VLARLConfig, ROOT / "configs" / "vla" / "smolvla_reach_one_cpu.yaml", over)
        tr = VLARLTrainer(cfg)
        stats, secs, peak = timed_step(ctx, tr)
        n = sum(p.numel() for p in tr.policy.parameters())
        return [row("smolvla", "ok", "tiny backbone (dry)" if ctx.dry else "text 960 wide x 16 layers, 1-layer vision "
                    "tower, 512 px", seconds=secs, peak_gib=peak,
                    params_b=n / 1e9, reward_mean=float(stats.get("reward/mean", float("nan"))))]
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return [row("smolvla", "failed", _one_line(e))]


# ---- report ----------------------------------------------------------------------------------------------------------
def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def _fmt(v, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) >= 10 ** -digits or v == 0 else f"{v:.2e}"
    return str(v)


def write_report(ctx: Ctx, running: list[dict] = (), complete: bool = False) -> dict:
    """Write ``gpu_check.json`` and ``gpu_check.md`` (each replaced atomically) with the finished stages' rows and
    ``running``, the rows so far of the stage in progress; called after every stage and every diffusion strategy, so
    that a run stopped early (a time limit, a CUDA fault that ends the process) leaves what it measured."""
    report = {"dry": ctx.dry, "env": ctx.env, "seconds": time.perf_counter() - ctx.t0, "complete": complete,
              "rows": [*ctx.done, *running]}
    ctx.out.mkdir(parents=True, exist_ok=True)
    texts = {"gpu_check.json": json.dumps(report, indent=1, default=str), "gpu_check.md": markdown(report)}
    for name, text in texts.items():
        tmp = ctx.out / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, ctx.out / name)
    return report


def markdown(report: dict) -> str:
    env = report["env"]
    L = [f"# GPU check ({'DRY RUN on the CPU, tiny sizes' if report['dry'] else 'full size'})", "",
         f"device: {env['device']}; torch {env['torch']} (CUDA {env['cuda']}); python {env['python']}; "
         f"{report['seconds']:.0f} s in all", ""]
    if not report.get("complete", True):
        L += ["**Incomplete**: the run stopped before its last stage; these are the rows it finished.", ""]
    L += [
         "| stage | status | measured | predicted (--plan, 1 GPU, DDP) | notes |", "|---|---|---|---|---|"]
    for r in report["rows"]:
        s = r["stage"]
        meas, pred, notes = "", "", r.get("reason", "")
        if s.startswith("diffusion/") and "pred_seconds" in r:
            mem = f"{r['peak_gib']:.1f} GiB" if r.get("peak_gib") is not None else "memory: -"
            meas = f"{_fmt(r.get('seconds'))} s/iter, {mem}" if "seconds" in r else ""
            if (r.get("iterations") or 1) > 1:
                meas += f" (iteration {r['iterations']}; the first took {_fmt(r['first_seconds'])} s)"
            if r.get("mfu") is not None and not report["dry"]:
                meas += f", MFU {r['mfu']:.1%}"
            pred = (f"{_fmt(r['pred_seconds'])} s/iter (40% MFU of 989 TFLOP/s), {_fmt(r['pred_peak_gib'])} GiB; "
                    f"NFE {r['nfe']:.0f}, {r['flops'] / 1e12:.3g} TFLOP") if r["pred_seconds"] is not None \
                else f"not traced (--no-plan); NFE {r['nfe']:.0f}"
            notes = "; ".join(x for x in (notes, r.get("note", ""),
                                          f"{r['arch']} {r['resolution']}, {r['steps']} steps",
                                          f"memory not measured: {r['memory_reason']}" if r.get("memory_reason")
                                          else "")
                              if x)
        elif s.startswith("fp8/") and r["status"] == "ok":
            meas = f"{r['candidates_per_s']:.2f} cand/s ({r['time_vs_bf16']:.2f}x bf16 time), rel. err vs bf16 " \
                   f"{r['rel_err_vs_bf16']:.4f}"
            if "rel_err_vs_emulated" in r:
                meas += f", vs emulated {r['rel_err_vs_emulated']:.4f}; {r['speed_vs_emulated']:.2f}x emulated speed"
        elif s == "cuda_tests" and r["status"] != "skipped" and "passed" in r:
            meas = f"{r['passed']} passed, {r['failed']} failed, {r['skipped']} skipped, {r['errors']} errors"
        elif s == "smolvla" and r["status"] == "ok":
            meas = f"{_fmt(r['seconds'])} s/iter" + (f", {r['peak_gib']:.1f} GiB" if r.get("peak_gib") else "") + \
                   f", {r['params_b'] * 1e3:.1f} M params"
        L.append(f"| {s} | {r['status']} | {meas} | {pred} | {notes.replace('|', '/')} |")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    from grpo.cli import ArgumentParser  # argparse whose errors are one line (exit 2)

    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/gpu_check", help="folder for gpu_check.json and gpu_check.md")
    ap.add_argument("--dry", action="store_true", help="CPU dry mode: tiny sizes, CUDA stages skipped (DEVICE=cpu)")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated subset of {','.join(STAGES)}")
    ap.add_argument("--steps", type=int, default=None, help="sampler steps (default: the recipe's 20; --dry: 4)")
    ap.add_argument("--repeat", type=int, default=1, help="diffusion iterations per strategy, the last one reported "
                    "(2: time a warm iteration; the first's seconds are kept as first_seconds)")
    ap.add_argument("--no-plan", action="store_true", help="skip diffusion_rl.plan's prediction (its fake-tensor "
                    "traces take ~1 min of CPU)")
    ap.add_argument("--flux", action="store_true", help="also FLUX.1-dev (12 B) at full size (GPU only)")
    args = ap.parse_args(argv)
    dry = args.dry or os.environ.get("DEVICE", "") == "cpu"
    stages = [s for s in args.stages.split(",") if s]
    bad = [s for s in stages if s not in STAGES]
    if bad or not stages:
        fail(f"--stages {args.stages!r}: unknown {bad or 'empty'}; expected a comma-separated subset of "
             f"{','.join(STAGES)}")
    if args.steps is not None and args.steps < 1:
        fail(f"--steps {args.steps}: expected a positive number of sampler steps")
    if not 1 <= args.repeat <= 10:
        fail(f"--repeat {args.repeat}: expected 1 to 10 iterations per strategy")
    if not args.out.strip():  # (was: Path('') is the working directory: the report written there, exit 0)
        fail(f"--out {args.out!r} is empty (expected a folder for gpu_check.json and gpu_check.md)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        fail(f"--out {str(out)!r} is a file (expected a folder)")
    if out.is_symlink() and not out.exists():  # (was: mkdir's FileExistsError traceback)
        fail(f"--out {str(out)!r} is a symlink that leads nowhere (a loop or a missing target; expected a folder)")
    _import_torch()
    if not dry and not torch.cuda.is_available():
        fail("no CUDA device (torch.cuda.is_available() is False): run on a GPU node, or pass --dry for the CPU "
             "dry mode")
    device = torch.device("cpu" if dry else "cuda")
    env = {"device": torch.cuda.get_device_name() if not dry else f"cpu ({platform.processor() or platform.machine()})",
           "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        ctx = Ctx(dry, device, out, Path(work), args.steps, plan=not args.no_plan, repeat=args.repeat, env=env)
        adapter = None

        def stage(name: str, fn) -> None:  # one stage's rows, or one failed row; then the report so far
            try:
                ctx.done.extend(fn())
            except Exception as e:  # noqa: BLE001 - one stage failing is a row, the others still run
                traceback.print_exc()
                ctx.done.append(row(name, "failed", _one_line(e)))
            write_report(ctx)

        def diffusion() -> list[dict]:
            nonlocal adapter
            r, adapter = stage_diffusion(ctx) if "diffusion" in stages else ([], _adapter_only(ctx))
            return r

        if "cuda_tests" in stages:
            stage("cuda_tests", lambda: stage_cuda_tests(ctx))
        if "diffusion" in stages or "fp8" in stages:
            stage("diffusion", diffusion)
        if "fp8" in stages:
            stage("fp8", lambda: stage_fp8(ctx, adapter))
        adapter = None  # the SD3.5 model goes before FLUX is built
        _free(ctx)
        if args.flux:
            stage("diffusion/flux.1-dev", lambda: stage_flux(ctx))
        if "smolvla" in stages:
            stage("smolvla", lambda: stage_smolvla(ctx))
    report = write_report(ctx, complete=True)
    print(markdown(report))
    return 1 if any(r["status"] == "failed" for r in report["rows"]) else 0


def _import_torch() -> None:
    global torch
    import torch as t

    torch = t


def _adapter_only(ctx: Ctx):
    from diffusion_rl.adapters import build_adapter

    cfg = strategy_config(ctx, "flat", ctx.work / "fp8")
    arch = (tiny_arch() if ctx.dry
            else __import__("diffusion_rl.architectures", fromlist=["ARCHS"]).ARCHS["sd3.5-medium"])
    return build_adapter(cfg.model, pipe=random_sd3_pipeline(arch, cfg.model.max_sequence_length, ctx.device))


if __name__ == "__main__":
    raise SystemExit(main())
