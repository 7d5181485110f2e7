"""The diffusion trainer keeps every tensor that meets the model on the model's device (``model.device``).

No GPU here: inside :func:`tests.strict_device.strict_device` a tensor created without saying where lands on
``meta``, so one that would sit on the CPU next to a CUDA model fails here too. The trainer is built outside
the block (and the prompts encoded: the tokenizers are third-party and build CPU tensors); one full iteration
(rollout, real reward, credit, update) and an evaluation run inside it, for each rollout mode.
"""

import pytest
import torch

from diffusion_rl.trainer import DiffusionGRPOTrainer
from tests.strict_device import strict_device

from .test_trainer import small_cfg

MODES = {
    "flat+cfg+kl+ema": lambda c: (setattr(c.sampler, "cfg_scale", 2.0), setattr(c.grpo, "kl_coef", 0.01),
                                  setattr(c.train, "ema_decay", 0.9)),
    "branch+prune": lambda c: (setattr(c.branch, "enabled", True), setattr(c.branch, "split_steps", [1, 3]),
                               setattr(c.branch, "branch", [2]), setattr(c.grpo, "group_size", 4),
                               setattr(c.branch, "width_prune", "topk_per_parent")),
    "mix": lambda c: (setattr(c.branch, "enabled", True), setattr(c.branch, "split_steps", [1, 3]),
                      setattr(c.branch, "branch", [2]), setattr(c.grpo, "group_size", 4),
                      setattr(c.sampler, "mix_window", 2)),
    "nft": lambda c: setattr(c.train, "loss", "nft"),
    "pool-fp8": lambda c: (setattr(c.pool, "enabled", True), setattr(c.pool, "pool_size", 6),
                           setattr(c.pool, "train_size", 2), setattr(c.grpo, "group_size", 2),
                           setattr(c.pool.quant, "format", "fp8")),
    # tree x pool: trees grown by the quantized copy, the best / worst leaves' pruned tree regenerated and trained
    "treepool-fp8": lambda c: (setattr(c.branch, "enabled", True), setattr(c.branch, "split_steps", [1, 3]),
                               setattr(c.branch, "branch", [2]), setattr(c.grpo, "group_size", 4),
                               setattr(c.pool, "enabled", True), setattr(c.pool, "pool_size", 4),
                               setattr(c.pool, "train_size", 2),
                               setattr(c.pool.quant, "format", "fp8")),
    # lookahead@1: the first split's 4 candidates previewed to a leaf by the quantized copy, best and worst kept
    "lookahead-fp8": lambda c: (setattr(c.branch, "enabled", True), setattr(c.branch, "split_steps", [1, 3]),
                                setattr(c.branch, "branch", [2]), setattr(c.grpo, "group_size", 4),
                                setattr(c.branch, "lookahead_candidates", 4), setattr(c.pool.quant, "format", "fp8")),
}


def _trainer(tmp_path, mode: str, device: str = "cpu") -> DiffusionGRPOTrainer:
    cfg = small_cfg(tmp_path)
    cfg.model.device = device
    cfg.reward.name = "jpeg_compressibility"  # a real reward (PIL's JPEG encoder) on the decoded images
    MODES[mode](cfg)
    tr = DiffusionGRPOTrainer(cfg)
    tr.adapter.encode_prompts(cfg.prompts.prompts + [""])
    return tr


def _numbers(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if not k.startswith(("time/", "throughput/"))}


@pytest.mark.parametrize("mode", list(MODES))
def test_an_iteration_keeps_tensors_on_the_models_device(tmp_path, mode):
    plain = _trainer(tmp_path / "plain", mode)
    expect, expect_eval = plain.step(), plain.evaluate()
    tr = _trainer(tmp_path / "strict", mode)
    with strict_device():
        stats = tr.step()
        got_eval = tr.evaluate()
    assert stats["cost/nfe_rollout"] > 0 and torch.isfinite(torch.tensor(stats["reward/mean"]))
    # the same run: a meta tensor can slip through silently (indexing a CPU tensor with one reads garbage)
    assert _numbers(stats) == _numbers(expect) and got_eval == expect_eval


def test_device_names_are_checked_when_loaded_and_resolved_when_built():
    from diffusion_rl.adapters import ModelConfig, build_adapter

    with pytest.raises(ValueError, match="'gpu0' is not a torch device"):
        ModelConfig(device="gpu0")
    if not torch.cuda.is_available():
        cfg = ModelConfig(device="cuda", height=16, width=16)  # a GPU config loads (and dry-runs) anywhere
        with pytest.raises(ValueError, match="'cuda'.*torch.cuda.is_available"):
            build_adapter(cfg)  # and is refused when it would run
    assert ModelConfig().device == "auto"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", list(MODES))
def test_an_iteration_on_cuda_matches_the_cpu(tmp_path, mode):
    """Noise comes from CPU generators, so the same seed starts both devices from the same initial noise; CPU and
    CUDA float kernels round differently, so the samples are not bit-equal, and what is checked is the iteration's
    mean reward within 0.05 (not the samples themselves). Runs only where CUDA is available (not on the CPU machine
    this suite is kept green on)."""
    cpu, gpu = _trainer(tmp_path / "cpu", mode), _trainer(tmp_path / "gpu", mode, "cuda")
    assert next(gpu.adapter.transformer.parameters()).is_cuda
    s_cpu, s_gpu = cpu.step(), gpu.step()
    assert s_cpu["reward/mean"] == pytest.approx(s_gpu["reward/mean"], abs=0.05)
    # the updated weights evaluate alike too (ODE samples on the evaluation prompts, EMA weights where kept)
    assert cpu.evaluate() == pytest.approx(gpu.evaluate(), abs=0.05)
