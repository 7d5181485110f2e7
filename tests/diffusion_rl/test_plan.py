"""--dry-run --plan: full-size architectures on the meta device / fake tensors, no weights; parameter counts against the
published sizes; the depth extrapolation against a full-depth trace; the FLOP/memory tracer against hand counts."""

import re
import time

import pytest
import torch

from diffusion_rl.architectures import ARCHS, arch_for, build_meta_transformer, count_params
from diffusion_rl.cli import main
from diffusion_rl.plan import PeakMemory, trace_denoiser, trace_extrapolated
from diffusion_rl.trainer import DiffusionRLConfig

# the denoiser counts of the configs in code (diffusers classes), and the published sizes they must match
COUNTS = {"sd3.5-medium": 2_243_171_520, "sd3.5-large": 8_056_627_520, "flux.1-dev": 11_901_408_320,
          "wan2.1-t2v-1.3b": 1_418_996_800,
          "qwen-image": 20_430_401_088, "wan2.2-t2v-a14b": 14_288_491_584, "wan2.2-ti2v-5b": 4_999_787_712,
          "flux.1-kontext-dev": 11_901_408_320}
RECIPES = {"sd35m_pickscore": ("sd3.5-medium", 0.12), "sd35l_pickscore": ("sd3.5-large", 0.01),
           "flux_hps": ("flux.1-dev", 0.02),
           "wan_video": ("wan2.1-t2v-1.3b", 0.10), "qwen_image_pickscore": ("qwen-image", 0.03),
           "wan22_a14b_video": ("wan2.2-t2v-a14b", 0.03), "wan22_ti2v5b_video": ("wan2.2-ti2v-5b", 0.01),
           "flux_kontext_edit": ("flux.1-kontext-dev", 0.01)}


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_plan_on_every_full_size_recipe(recipe, capsys):
    name, tol = RECIPES[recipe]
    t0 = time.process_time()  # CPU time of this process: the promise holds on a loaded box too
    # the plan reads no prompt: a recipe whose prompt file is absent still plans (issue 36)
    assert main(["train", f"configs/diffusion/{recipe}.yaml", "prompts.file=/nonexistent/prompts.txt", "--dry-run",
                 "--plan"]) == 0
    took = time.process_time() - t0
    out = capsys.readouterr().out
    arch = ARCHS[name]
    n = count_params(build_meta_transformer(arch))
    assert n == COUNTS[name]
    assert abs(n / 1e9 - arch.published_params) <= tol * arch.published_params, (n, arch.published_params)
    assert re.search(rf"transformer +{n / 1e9:.3f} B   published {arch.published_params:g} B", out)
    for row in ("ddp         1   on", "ddp         8  off", "fsdp        8   on"):
        assert row in out
    assert "s/iter on 8 GPU(s) at 989 TFLOP/s x 40% MFU" in out
    # every rollout mode's cost per precision and its projected GPU cost (issue 35)
    assert "cost by rollout mode" in out and re.search(r"tree x pool \d+->\d+ +\d+ +\d+ +\d+ +\d+", out)
    assert re.search(r"lookahead@1 \d+->\d+ \+prune +\d+ +[1-9]\d* +\d+ +\d+", out)  # its previews in lowp
    if arch.kind == "flux":
        assert "published   698 s/iter" in out and "BranchGRPO-Mix" in out
    if arch.experts == 2:  # Wan 2.2 A14B: both experts held, one LoRA each
        assert re.search(rf"transformer_2 +{n / 1e9:.3f} B", out)
    assert took < 60, took


def test_depth_extrapolation_matches_full_depth_trace():
    """Every block of a type is the same computation, so a linear fit in the block counts is exact: check it at a
    small resolution where tracing all 30 Wan blocks is quick."""
    cfg = DiffusionRLConfig()
    cfg.model.kind, cfg.model.height, cfg.model.width, cfg.model.num_frames = "wan", 64, 64, 5
    cfg.model.max_sequence_length = 32
    arch = ARCHS["wan2.1-t2v-1.3b"]
    full = trace_denoiser(arch, cfg.model, arch.full_depth, "train_gc")
    ext, _ = trace_extrapolated(arch, cfg.model, "train_gc", "flow_grpo", 0.7)
    assert ext.flops == pytest.approx(full.flops, rel=1e-6)
    assert ext.peak == pytest.approx(full.peak, rel=0.02)


def test_peak_memory_and_flops_of_a_known_graph():
    """PeakMemory on real tensors: at most two [256, 1024] fp32 results live at once; FLOPs of a matmul: 2 m n k."""
    from torch.utils.flop_counter import FlopCounterMode

    x, w = torch.randn(256, 512), torch.randn(512, 1024)
    mem, fl = PeakMemory(), FlopCounterMode(display=False)
    mem.ignore([x, w])
    with mem, fl:
        y = torch.relu(x @ w)
        z = y * 2
    assert mem.peak == 2 * 256 * 1024 * 4  # x W is freed once relu has read it
    assert fl.get_total_flops() == 2 * 256 * 512 * 1024  # the matmul's; relu and the scaling count none
    del y, z
    assert mem.live == 0


def test_plan_bad_input(capsys):
    assert main(["train", "configs/diffusion/flux_hps.yaml", "--dry-run", "--plan", "--gpus", "eight"]) == 2
    assert "--gpus='eight': expected positive integers" in capsys.readouterr().err
    assert main(["train", "configs/diffusion/tiny_sd3_flat.yaml", "--dry-run", "--plan"]) == 2
    assert "names no known full-size architecture; pass --arch" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown architecture"):
        arch_for(None, "sd4")


def test_decode_batch_chunks_the_decode_and_the_plan_counts_it():
    from diffusion_rl.adapters import LoraSettings, ModelConfig, build_adapter
    from diffusion_rl.plan import Plan, Trace, memory_per_gpu

    lat = torch.randn(5, 4, 16, 16)
    whole = build_adapter(ModelConfig(kind="sd3", lora=LoraSettings(enabled=False))).decode(lat)
    chunked = build_adapter(ModelConfig(kind="sd3", decode_batch=2, lora=LoraSettings(enabled=False))).decode(lat)
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=0)  # GEMM blocking differs by batch: last bits
    with pytest.raises(ValueError, match="decode_batch must be >= 0"):
        ModelConfig(decode_batch=-1)

    cfg = DiffusionRLConfig()
    cfg.model.kind, cfg.model.height, cfg.model.width = "sd3", 512, 512
    cfg.grpo.group_size, cfg.train.prompts_per_iter = 8, 2
    one = Trace(0.0, 1.0)
    plan = Plan(ARCHS["sd3.5-medium"], {"transformer": 10, "vae": 1}, 1, 1, 1,
                {"rollout": one, "train": one, "train_gc": one}, Trace(0.0, 2.0 ** 30))
    assert memory_per_gpu(plan, cfg, 1, "ddp", True)["decode_transient"] == 16 * 2.0 ** 30  # 16 samples at once
    cfg.model.decode_batch = 4
    assert memory_per_gpu(plan, cfg, 1, "ddp", True)["decode_transient"] == 4 * 2.0 ** 30
