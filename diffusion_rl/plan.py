"""``diffusion-rl train CFG --dry-run --plan``: memory and cost of a full-size recipe, computed on fake tensors.

Nothing is loaded and no weights are allocated. The plan

1. builds every component of the recipe's architecture (:mod:`diffusion_rl.architectures`, configs in code) on the
   ``meta`` device and counts its parameters (denoiser, LoRA, each text encoder, VAE);
2. traces the denoiser at full width under ``FakeTensorMode`` (shapes and dtypes only; the CPU fake device makes
   ``scaled_dot_product_attention`` take its fused, flash-style kernel, O(S) memory, as on a GPU), with the
   recipe's LoRA in fp32 on bf16 weights, one row, three passes: the rollout forward (no grad), and forward +
   fp32 SDE log-prob (grpo.flow_sde.sde_step with the stored x_next) + backward with and without gradient
   checkpointing. ``torch.utils.flop_counter.FlopCounterMode`` counts the FLOPs; :class:`PeakMemory` follows
   every storage the traced ops create (freed when the last reference dies) and keeps the peak. Each pass is
   traced at a few depths (1-2 blocks of each block type) and extrapolated linearly in the block counts, which is
   exact for stacks of identical blocks (``extrapolation`` in the output; :func:`trace_denoiser` traces any
   depth directly, e.g. the full one, to check it);
3. combines them with the recipe's iteration (rollout NFE, trained rows, micro-batch = the rows of one record,
   CFG doubling, KL reference passes, VAE decodes of the final samples) into per-GPU memory for DDP and FSDP on
   1 and N GPUs of a stated size, FLOPs per iteration for flat GRPO and each BranchGRPO mode, and seconds per
   iteration at a stated sustained throughput (default H100 SXM bf16 dense 989 TFLOP/s at 40% MFU).

Memory model per GPU (bytes): denoiser weights bf16 (FSDP: 1/N, plus the root's non-block weights and two
all-gathered blocks); LoRA weights fp32 + gradients fp32 + AdamW moments 2 x fp32 (+ EMA fp32), sharded 1/N under
FSDP; text encoders and VAE bf16, replicated (the trainer keeps them on the device); the rollout's stored latents
(fp32, two per denoiser row); then the larger of the phases' transient peaks: rollout forward (rows of one
denoiser call), training forward+backward (rows of one record), VAE decode (all final samples at once, as
``Trainer.score`` does, or ``model.decode_batch`` at a time). The reward model is not included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from grpo.fake_trace import GiB, PeakMemory, Trace, register_cpu_flash_flops, to_fake

from .architectures import Arch, arch_for, build_meta, build_meta_transformer, count_params

H100_BF16_TFLOPS = 989.0  # H100 SXM dense bf16 tensor-core peak (NVIDIA datasheet)
# BranchGRPO README (Li et al. 2025, github.com/Fredreic1849/BranchGRPO), FLUX.1-dev, 16 leaves, 20 steps, as published
ANCHORS_S_PER_ITER = {"DanceGRPO (flat)": 698.0, "BranchGRPO": 493.0, "BranchGRPO + pruning": 314.0,
                      "BranchGRPO-Mix": 148.0}


# ---- the traced unit -------------------------------------------------------------------------------------------
@dataclass
class Shapes:
    """Token geometry of one row for an architecture at the recipe's resolution."""

    latent: tuple[int, ...]  # the adapter's latent shape [C, (f,) h, w]
    cond: dict[str, tuple[int, ...]]  # conditioning tensors of one row


def shapes_for(arch: Arch, mc) -> Shapes:
    L, s = mc.max_sequence_length, arch.latent_scale
    h, w = mc.height // s, mc.width // s
    if arch.kind in ("wan", "wan22"):
        f = (mc.num_frames - 1) // 4 + 1
        return Shapes((arch.transformer["in_channels"], f, h, w), {"prompt_embeds": (L, 4096)})
    if arch.kind == "sd3":  # CLIP-L + CLIP-G (77 tokens, padded to 4096) then T5 tokens
        return Shapes((16, h, w), {"prompt_embeds": (77 + L, 4096), "pooled": (2048,)})
    if arch.kind == "qwenimage":  # Qwen2.5-VL states, zero-padded to max_sequence_length
        return Shapes((16, h, w), {"prompt_embeds": (L, 3584)})
    if arch.kind == "flux_kontext":  # the reference image's latents at the output size join the sequence
        return Shapes((16, h, w), {"prompt_embeds": (L, 4096), "pooled": (768,), "image_latents": (16, h, w)})
    return Shapes((16, h, w), {"prompt_embeds": (L, 4096), "pooled": (768,)})


def add_lora(transformer: torch.nn.Module, kind: str, lora) -> None:
    """The trainer's LoRA (DiffusionAdapter.add_lora): peft on the attention projections, weights in fp32."""
    from peft import LoraConfig

    from .families import DEFAULT_LORA_TARGETS

    transformer.requires_grad_(False)
    with torch.device("meta"):
        transformer.add_adapter(LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                           init_lora_weights=True,
                                           target_modules=list(lora.targets) or DEFAULT_LORA_TARGETS[kind]))
    for p in transformer.parameters():
        if p.requires_grad:
            p.data = p.data.float()


def _shell_adapter(arch: Arch, transformer, mc):
    """An adapter of the recipe's family around ``transformer`` without a pipeline: only ``velocity`` is used."""
    from .adapters import adapter_class

    ad = object.__new__(adapter_class(arch.kind))
    ad.transformer, ad.dtype, ad.device, ad.cfg = transformer, torch.bfloat16, torch.device("cpu"), mc
    if arch.kind == "wan22":  # one expert is traced: every denoiser call runs exactly one of them
        ad.boundary, ad.expand = None, bool(arch.pipeline_config.get("expand_timesteps", False))
    return ad


def trace_denoiser(arch: Arch, mc, counts: tuple[int, ...] | None, mode: str, sde: str = "flow_grpo",
                   eta: float = 0.7, rows: int = 1) -> Trace:
    """One pass of the denoiser at full width, depth ``counts``, under fake tensors. ``mode``: ``rollout`` (no grad,
    forward + SDE step), ``train`` / ``train_gc`` (forward, fp32 log-prob of the stored transition, backward of
    ``-(A log p)``; ``_gc``: with gradient checkpointing). FLOPs and memory are traced in two separate runs: the
    FLOP counter's module hooks keep the recomputed activations of checkpointed blocks alive, inflating the peak."""
    return Trace(_trace_once(arch, mc, counts, mode, sde, eta, rows, "flops"),
                 _trace_once(arch, mc, counts, mode, sde, eta, rows, "memory"))


def _trace_once(arch, mc, counts, mode, sde, eta, rows, what) -> float:
    import contextlib

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from grpo.flow_sde import sde_step

    register_cpu_flash_flops()
    t = build_meta_transformer(arch, counts)
    for m in t.modules():  # Qwen-Image caches its RoPE tables (functools.lru_cache): never across fake modes
        f = getattr(type(m), "_compute_video_freqs", None)
        if f is not None and hasattr(f, "cache_clear"):
            f.cache_clear()
    add_lora(t, arch.kind, mc.lora)
    if mode == "train_gc":
        t.enable_gradient_checkpointing()
    t.train(mode != "rollout")
    fm = FakeTensorMode()
    held = to_fake(t, fm, torch.device("cpu"))
    ad = _shell_adapter(arch, t, mc)
    sh = shapes_for(arch, mc)
    mem = PeakMemory()
    flops = FlopCounterMode(display=False)
    with fm:
        x = torch.randn(rows, *sh.latent)
        x_next = torch.randn(rows, *sh.latent)
        cond = {k: torch.randn(rows, *s, dtype=torch.bfloat16) for k, s in sh.cond.items()}
        sigma = torch.full((rows,), 0.7)
        mem.ignore([*held, x, x_next, sigma, *cond.values()])
        with (mem if what == "memory" else flops), (torch.no_grad() if mode == "rollout" else contextlib.nullcontext()):
            v = ad.velocity(x, sigma, cond)
            if mode == "rollout":
                out = sde_step(v, x, 0.7, 0.65, kind=sde, eta=eta, noise=torch.randn_like(x))
            else:
                out = sde_step(v, x, 0.7, 0.65, kind=sde, eta=eta, prev_sample=x_next)
                (-(out.log_prob * torch.ones_like(out.log_prob)).mean()).backward()
            del v, out
    return float(mem.peak) if what == "memory" else float(flops.get_total_flops())


def trace_extrapolated(arch: Arch, mc, mode: str, sde: str, eta: float) -> tuple[Trace, dict]:
    """:func:`trace_denoiser` at depth 1 of every block type and with one more block of each type, extrapolated
    linearly to ``arch.full_depth`` (``f(full) = f(base) + sum_i (f(base + e_i) - f(base)) (full_i - 1)``)."""
    k = len(arch.full_depth)
    base = (1,) * k
    b = trace_denoiser(arch, mc, base, mode, sde, eta)
    flops, peak, per_block = b.flops, b.peak, []
    for i in range(k):
        c = tuple(2 if j == i else 1 for j in range(k))
        ti = trace_denoiser(arch, mc, c, mode, sde, eta)
        extra = arch.full_depth[i] - 1
        flops += (ti.flops - b.flops) * extra
        peak += (ti.peak - b.peak) * extra
        per_block.append({"flops": ti.flops - b.flops, "peak": ti.peak - b.peak})
    return Trace(flops, peak), {"base": {"flops": b.flops, "peak": b.peak}, "per_block": per_block}


def trace_vae_decode(arch: Arch, mc) -> Trace:
    """FLOPs and transient peak of decoding one final sample, traced at the recipe's size."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    register_cpu_flash_flops()

    def one(latent):
        vae = build_meta(arch.vae)
        fm = FakeTensorMode()
        held = to_fake(vae, fm, torch.device("cpu"))
        mem = PeakMemory()
        flops = FlopCounterMode(display=False)
        with fm:
            z = torch.randn(1, *latent, dtype=torch.bfloat16)
            if arch.kind == "qwenimage":  # its causal 3D VAE decodes an image as one frame: [B, C, 1, h, w]
                z = z[:, :, None]
            mem.ignore([*held, z])
            with mem, torch.no_grad():
                vae.decode(z, return_dict=False)
            with flops, torch.no_grad():
                vae.decode(z, return_dict=False)
        return Trace(float(flops.get_total_flops()), float(mem.peak))

    # at the true size: Wan's chunked causal decoder's peak is not linear in frames
    return one(shapes_for(arch, mc).latent)


# ---- the iteration -------------------------------------------------------------------------------------------------
def _tree_keep(cfg, tree):
    from .branch import tree_credit

    if cfg.branch.width_prune == "none" and not cfg.branch.depth_window:
        return None
    credit = tree_credit(tree, torch.arange(tree.num_leaves, dtype=torch.float32, device="cpu")[None], cfg.branch,
                         torch.zeros(1, len(tree), device="cpu"))
    return credit.keep


def iteration_counts(cfg, world: int) -> dict:
    """Rollout NFE, trained rows, micro-batches of the recipe's iteration (the trainer's own cost accounting,
    :func:`diffusion_rl.strategies.strategy_cost`, plus the per-call row counts on one of ``world`` ranks)."""
    from .strategies import strategy_cost

    sc, P = cfg.sampler, cfg.train.prompts_per_iter
    tree = cfg.branch.make_tree(sc.num_steps) if cfg.branch.enabled else None
    cost = strategy_cost(cfg)
    cfg_mult = 2 if sc.cfg_scale != 1.0 else 1
    if tree is None:
        rows_call = math.ceil(P * cfg.grpo.group_size / world)
        train_rows = rows_call
        final_local = rows_call
    else:
        trees = math.ceil(P / world)
        keep = _tree_keep(cfg, tree)
        mask = sc.sde_mask(0, force=tuple(tree.split_steps))
        active = [[n for n in tree.nodes if n.start <= s < n.end] for s in range(sc.num_steps)]
        rows_call = trees * max(len(a) for a in active)
        train_rows = trees * max((sum(1 for n in a if n.depth > 0 and (keep is None or keep[n.id])) for s, a in
                                  enumerate(active) if mask[s]), default=0)
        final_local = trees * tree.num_leaves
        if cfg.branch.lookahead_candidates and not cfg.pool.enabled:  # the previews: one batch of every candidate
            rows_call = max(rows_call, trees * cfg.branch.lookahead_candidates)
    return {"nfe": cost["nfe"], "nfe_policy": cost["nfe_policy"], "nfe_lowp": cost["nfe_lowp"],
            "backward": cost["backward"], "final": cost["final_samples"], "cfg_mult": cfg_mult,
            "rows_call": rows_call * cfg_mult, "train_rows": max(1, train_rows) * cfg_mult, "final_local": final_local,
            "nfe_rows_local": math.ceil(cost["nfe"] / cfg_mult / world)}


@dataclass
class Plan:
    arch: Arch
    params: dict[str, int]
    lora_params: int
    largest_block: int
    root_params: int
    traces: dict[str, Trace]
    vae: Trace
    extrapolation: dict = field(default_factory=dict)


def build_plan(cfg, arch_name: str | Arch | None = None) -> Plan:
    """Parameter counts and the three traced passes (plus the VAE decode) for ``cfg``'s recipe. ``arch_name``: a
    name of :data:`~diffusion_rl.architectures.ARCHS`, an :class:`Arch` itself (``bench/gpu_check.py`` plans a
    shrunken one in its CPU dry mode), or ``None`` (found from ``model.path``)."""
    arch = arch_name if isinstance(arch_name, Arch) else arch_for(cfg.model.path, arch_name)
    if arch.kind != cfg.model.kind:
        raise ValueError(f"architecture {arch.name} is a {arch.kind} model, the recipe has model.kind={cfg.model.kind}")
    t = build_meta_transformer(arch)
    params = {"transformer": count_params(t)}
    if arch.experts == 2:  # Wan 2.2 A14B: the low-noise expert, same architecture, held beside the first
        params["transformer_2"] = params["transformer"]
    blocks = [b for name in ("transformer_blocks", "single_transformer_blocks", "blocks")
              for b in getattr(t, name, [])]
    largest = max(count_params(b) for b in blocks)
    root = (params["transformer"] - sum(count_params(b) for b in blocks)) * arch.experts
    add_lora(t, arch.kind, cfg.model.lora)
    lora = count_params(t, trainable=True) * arch.experts  # one LoRA per expert
    for name, spec in arch.text_encoders.items():
        if name == "text_encoder_3" and cfg.model.drop_t5:
            continue
        params[name] = count_params(build_meta(spec))
    params["vae"] = count_params(build_meta(arch.vae))
    sc = cfg.sampler
    traces, extra = {}, {}
    for mode in ("rollout", "train", "train_gc"):
        traces[mode], extra[mode] = trace_extrapolated(arch, cfg.model, mode, sc.sde, sc.eta)
    return Plan(arch, params, lora, largest, root, traces, trace_vae_decode(arch, cfg.model), extra)


def iteration_flops(plan: Plan, cfg, gc: bool | None = None) -> dict[str, float]:
    """FLOPs of one iteration over all ranks: rollout forwards, training passes (x inner epochs; checkpointing
    recomputes the forward), KL reference forwards, VAE decodes. The quantized copy's rollout calls (pool, tree x
    pool) are counted as bf16-equivalent FLOPs: their count divided by the format's throughput ratio
    (``pool.speedup()``: ``pool.lowp_speedup`` or the published default), so seconds at the bf16 rate come out right."""
    c = iteration_counts(cfg, 1)
    gc = cfg.model.gradient_checkpointing if gc is None else gc
    tr = plan.traces["train_gc" if gc else "train"].flops
    fwd = plan.traces["rollout"].flops
    epochs = cfg.train.inner_epochs
    lowp = c["nfe_lowp"] / cfg.pool.speedup()[0] if c["nfe_lowp"] else 0.0
    out = {"rollout": (c["nfe_policy"] + lowp) * fwd, "train": c["backward"] * c["cfg_mult"] * tr * epochs,
           "kl_reference": c["backward"] * c["cfg_mult"] * fwd * epochs if cfg.grpo.kl_coef > 0 else 0.0,
           "vae_decode": c["final"] * plan.vae.flops}
    out["total"] = sum(out.values())
    return out


def memory_per_gpu(plan: Plan, cfg, world: int, strategy: str, gc: bool) -> dict[str, float]:
    """Bytes per GPU (see the module docstring for the model)."""
    c = iteration_counts(cfg, world)
    n_t = plan.params["transformer"] + plan.params.get("transformer_2", 0)
    shard = world if strategy == "fsdp" and world > 1 else 1
    weights = 2 * (n_t / shard + (plan.root_params + 2 * plan.largest_block if shard > 1 else 0))
    per_lora = 16 + (4 if cfg.train.ema_decay > 0 else 0)
    lora = per_lora * plan.lora_params / shard
    frozen = 2 * sum(v for k, v in plan.params.items() if k not in ("transformer", "transformer_2"))
    lat = 4 * math.prod(shapes_for(plan.arch, cfg.model).latent)
    buffers = lat * (c["nfe_rows_local"] + c["final_local"])
    grad_lora_row = 4 * plan.lora_params  # LoRA gradients are inside the traced peak once, not per row
    tr = plan.traces["train_gc" if gc else "train"].peak
    act = max(0.0, tr - grad_lora_row) * c["train_rows"] + grad_lora_row / shard
    roll = plan.traces["rollout"].peak * c["rows_call"]
    dec = plan.vae.peak * (min(c["final_local"], cfg.model.decode_batch) if cfg.model.decode_batch
                           else c["final_local"])
    static = weights + lora + frozen + buffers
    return {"weights": weights, "lora_optim": lora, "text_vae": frozen, "rollout_buffers": buffers,
            "activations": act, "rollout_transient": roll, "decode_transient": dec,
            "peak": static + max(act, roll, dec)}


def seconds_per_iteration(flops: float, gpus: int, peak_tflops: float, mfu: float) -> float:
    return flops / (gpus * peak_tflops * 1e12 * mfu)


# ---- the anchors' setting (BranchGRPO README) -----------------------------------------------------------------------
def anchor_modes(cfg) -> dict[str, object]:
    """FLUX at 16 leaves and 20 steps in the four settings the BranchGRPO README times, as configs of this trainer:
    flat DanceGRPO (16 samples per prompt, timestep fraction 0.6); BranchGRPO (splits at steps 0, 3, 6, 9, factor 2,
    16 leaves); + pruning (width: top-1 per parent, depth window 2); -Mix (+ an SDE window of 4 steps)."""
    import copy

    base = copy.deepcopy(cfg)
    base.sampler.num_steps = 20
    base.sampler.cfg_scale = 1.0
    base.sampler.mix_window = 0
    base.train.inner_epochs = 1
    flat = copy.deepcopy(base)
    flat.branch.enabled = False
    flat.grpo.group_size = 16
    flat.sampler.timestep_fraction = 0.6
    flat.sampler.sde = "dance_grpo"
    tree = copy.deepcopy(base)
    tree.branch.enabled = True
    tree.branch.split_steps, tree.branch.branch = [0, 3, 6, 9], [2]
    tree.branch.width_prune, tree.branch.depth_window = "none", 0
    tree.sampler.timestep_fraction = 1.0
    pruned = copy.deepcopy(tree)
    pruned.branch.width_prune, pruned.branch.prune_k, pruned.branch.depth_window = "topk_per_parent", 1, 2
    mix = copy.deepcopy(pruned)
    mix.sampler.mix_window = 4
    return {"DanceGRPO (flat)": flat, "BranchGRPO": tree, "BranchGRPO + pruning": pruned, "BranchGRPO-Mix": mix}


def format_plan(plan: Plan, cfg, gpus: tuple[int, ...] = (1, 8), gpu_mem_gb: float = 80.0,
                peak_tflops: float = H100_BF16_TFLOPS, mfu: float = 0.4) -> str:
    a = plan.arch
    L = []
    L.append(f"plan: {a.name} ({a.kind}) at {cfg.model.height}x{cfg.model.width}"
             + (f"x{cfg.model.num_frames} frames" if a.kind in ("wan", "wan22") else "")
             + f", bf16 weights, LoRA r={cfg.model.lora.rank} fp32, fake-tensor trace (no weights loaded)")
    L.append("parameters (meta device):")
    for k, v in plan.params.items():
        pub = f"   published {a.published_params:g} B ({a.published_source})" if k == "transformer" else \
            ("   (the second expert, same architecture)" if k == "transformer_2" else "")
        L.append(f"  {k:16s} {v / 1e9:8.3f} B{pub}")
    L.append(f"  {'LoRA (trainable)':16s} {plan.lora_params / 1e6:8.1f} M   largest block "
             f"{plan.largest_block / 1e6:.1f} M, non-block {plan.root_params / 1e6:.1f} M")
    tr = plan.traces
    L.append(f"per-row trace (extrapolated from {a.block_names} depth 1-2 to {a.full_depth}): forward "
             f"{tr['rollout'].flops / 1e12:.2f} TFLOP, train step {tr['train'].flops / 1e12:.2f} TFLOP "
             f"(checkpointed {tr['train_gc'].flops / 1e12:.2f}); activations {tr['train'].peak / GiB:.2f} GiB "
             f"(checkpointed {tr['train_gc'].peak / GiB:.2f}); VAE decode {plan.vae.flops / 1e12:.2f} TFLOP, "
             f"{plan.vae.peak / GiB:.2f} GiB")
    c1 = iteration_counts(cfg, 1)
    L.append(f"iteration: NFE {c1['nfe']:.0f}, backward rows {c1['backward']:.0f}, final samples {c1['final']}, "
             f"CFG x{c1['cfg_mult']}, inner epochs {cfg.train.inner_epochs}")
    if c1["nfe_lowp"]:
        sp, src = cfg.pool.speedup()
        L.append(f"  per precision: {c1['nfe_policy']:.0f} full-precision calls + {c1['nfe_lowp']:.0f} "
                 f"{cfg.pool.quant.format} calls at {sp:g}x the bf16 throughput ({src})")
    L.append(f"memory per GPU (GiB) on {gpu_mem_gb:g} GB GPUs; reward model not included:")
    L.append(f"  {'strategy':8s} {'GPUs':>4s} {'ckpt':>4s} {'weights':>8s} {'LoRA+opt':>8s} {'text+VAE':>8s} "
             f"{'buffers':>8s} {'act':>8s} {'rollout':>8s} {'decode':>8s} {'peak':>8s}  fits")
    for n in gpus:
        for strat in (("ddp",) if n == 1 else ("ddp", "fsdp")):
            for gc in (True, False):
                m = memory_per_gpu(plan, cfg, n, strat, gc)
                fits = "yes" if m["peak"] <= gpu_mem_gb * 1e9 else "NO"
                L.append(f"  {strat:8s} {n:4d} {'on' if gc else 'off':>4s} " + " ".join(
                    f"{m[k] / GiB:8.2f}"
                    for k in ("weights", "lora_optim", "text_vae", "rollout_buffers", "activations",
                                                  "rollout_transient", "decode_transient", "peak")) + f"  {fits}")
    f = iteration_flops(plan, cfg)
    rate = f"{peak_tflops:g} TFLOP/s x {mfu:.0%} MFU"
    L.append(f"FLOPs per iteration (this recipe): {f['total'] / 1e15:.1f} PFLOP (rollout {f['rollout'] / 1e15:.1f}, "
             f"train {f['train'] / 1e15:.1f}, KL ref {f['kl_reference'] / 1e15:.1f}, decode "
             f"{f['vae_decode'] / 1e15:.2f}); "
             + ", ".join(f"{seconds_per_iteration(f['total'], n, peak_tflops, mfu):.0f} s/iter on {n} GPU(s)"
                         for n in gpus) + f" at {rate}")
    L.extend(format_mode_costs(plan, cfg, max(gpus), peak_tflops, mfu))
    if a.kind == "flux":
        L.append(f"anchors: FLUX 16 leaves, 20 steps, {cfg.train.prompts_per_iter} prompts/iter, {max(gpus)} GPUs at "
                 f"{rate}; published s/iter from the BranchGRPO README (hardware and batch as there):")
        modes = anchor_modes(cfg)
        base = None
        for name, mc in modes.items():
            fm = iteration_flops(plan, mc)
            s = seconds_per_iteration(fm["total"], max(gpus), peak_tflops, mfu)
            base = base or s
            pub = ANCHORS_S_PER_ITER[name]
            L.append(f"  {name:22s} {fm['total'] / 1e15:8.1f} PFLOP  predicted {s:7.0f} s/iter ({s / base:.2f}x "
                     f"flat)   published {pub:5.0f} s/iter ({pub / ANCHORS_S_PER_ITER['DanceGRPO (flat)']:.2f}x flat)")
    return "\n".join(L)


def cost_modes(cfg) -> dict[str, object]:
    """The recipe's iteration as each rollout mode, same sampler, prompts and trained samples per prompt ``G``
    (the recipe's group size, or its tree's leaves): flat GRPO (G samples); BranchGRPO (the recipe's ``branch:``
    tree, or splits at steps 0, T/5, 2T/5, 3T/5 with factor 2: 16 leaves); + pruning (top-1 leaf per last-split
    parent, depth window 2); pool-and-select (``pool.pool_size`` candidates -> G, default 4G); tree x pool (the tree
    grown in low precision, half its leaves regenerated; no width / depth pruning); lookahead@1 + pruning (the pruned
    tree, its first split chosen from ``branch.lookahead_candidates`` previews, default twice the factor). Low
    precision:
    ``pool.quant.format`` (nvfp4 unless the recipe has a pool)."""
    import copy

    base = copy.deepcopy(cfg)
    T = base.sampler.num_steps
    base.branch.lookahead_candidates = 0
    if not base.branch.enabled:
        base.branch.split_steps, base.branch.branch = sorted({0, T // 5, 2 * T // 5, 3 * T // 5}), [2]
        base.branch.width_prune, base.branch.depth_window = "none", 0
    tree = base.branch.make_tree(T)
    G = tree.num_leaves if cfg.branch.enabled else cfg.grpo.group_size
    if not cfg.pool.enabled:
        base.pool.quant.format = "nvfp4"
        base.pool.pool_size = 4 * G
    flat = copy.deepcopy(base)
    flat.branch.enabled, flat.pool.enabled, flat.grpo.group_size = False, False, G
    tr = copy.deepcopy(base)
    tr.branch.enabled, tr.pool.enabled = True, False
    tr.branch.width_prune, tr.branch.depth_window = "none", 0
    pr = copy.deepcopy(tr)
    pr.branch.width_prune, pr.branch.prune_k, pr.branch.depth_window = "topk_per_parent", 1, 2
    pool = copy.deepcopy(flat)
    pool.pool.enabled, pool.pool.train_size = True, G
    pool.pool.pool_size = max(pool.pool.pool_size, G)
    tp = copy.deepcopy(tr)
    tp.pool.enabled, tp.pool.pool_size, tp.pool.train_size = True, tree.num_leaves, max(1, tree.num_leaves // 2)
    la = copy.deepcopy(pr)
    k = tree.branch[0]
    la.branch.lookahead_candidates = cfg.branch.lookahead_candidates or 2 * k
    return {"flat GRPO": flat, "BranchGRPO": tr, "BranchGRPO + pruning": pr,
            f"pool {pool.pool.pool_size}->{G}": pool,
            f"tree x pool {tree.num_leaves}->{tp.pool.train_size}": tp,
            f"lookahead@1 {la.branch.lookahead_candidates}->{k} +prune": la}


def format_mode_costs(plan: Plan, cfg, gpus: int, peak_tflops: float, mfu: float) -> list[str]:
    """One row per rollout mode (:func:`cost_modes`): NFE per precision, backward rows, projected GPU cost in
    full-precision forward passes (:func:`diffusion_rl.strategies.projected_gpu_units`) and s/iter on ``gpus`` GPUs."""
    from .strategies import train_row_forwards

    modes = cost_modes(cfg)
    q = next(m for m in modes.values() if m.pool.enabled).pool
    sp, src = q.speedup()
    L = [f"cost by rollout mode (this recipe's sampler and prompts; low precision {q.quant.format} at {sp:g}x bf16 "
         f"throughput: {src}); units = full-precision forward passes, a trained row "
         f"= {train_row_forwards(cfg):g}:",
         f"  {'mode':24s} {'NFE bf16':>9s} {'NFE lowp':>9s} {'backward':>9s} {'units':>9s} {'x flat':>7s} "
         f"{'s/iter':>8s} on {gpus} GPU(s)"]
    base = None
    for name, mc in modes.items():
        c = iteration_counts(mc, 1)
        from .strategies import strategy_cost

        units = strategy_cost(mc)["gpu_units"]
        base = base or units
        s = seconds_per_iteration(iteration_flops(plan, mc)["total"], gpus, peak_tflops, mfu)
        L.append(f"  {name:24s} {c['nfe_policy']:9.0f} {c['nfe_lowp']:9.0f} {c['backward']:9.0f} {units:9.0f} "
                 f"{units / base:7.2f} {s:8.0f}")
    return L


# GiB, PeakMemory and Trace are grpo.fake_trace's, kept importable from here (the tests and benches read them)
__all__ = ["GiB", "PeakMemory", "Trace", "build_plan", "cost_modes", "format_mode_costs", "format_plan",
           "memory_per_gpu", "iteration_flops",
           "trace_denoiser", "trace_extrapolated", "trace_vae_decode"]
