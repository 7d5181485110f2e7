"""vla-rl train/loop --plan: the full-size VLA recipes and the World-VLA-Loop config planned on the meta device / fake
tensors (vla_rl.plan), parameter counts against the published sizes and hand counts, FLOPs against the 2 (forward)
and 6 (forward + backward) FLOPs-per-parameter-per-token rule plus attention, bad input refused in one line."""

import re
import time

import pytest

from grpo.config import load_config
from vla_rl.cli import main
from vla_rl.plan import SMOLVLA_PUBLISHED, plan_smolvla
from vla_rl.trainer import VLARLConfig

GiB = 2 ** 30


def _smolvla_hand_count() -> tuple[int, int]:
    """SmolVLA's parameters by hand from its published architecture: SmolVLM2-500M (SigLIP-B/16 at 512 px, pixel
    shuffle x4 connector, SmolLM2-360M text model cut to 16 of its 32 layers, its own lm_head) + the action expert
    (16 Llama layers 720 wide, MLP 2048, 15 query / 5 kv heads of 64; odd layers take the backbone's 320-wide keys /
    values) + the state / action / time projections. Returns (total, expert + projections)."""
    lin = lambda i, o, bias=True: i * o + (o if bias else 0)  # noqa: E731
    d, ff = 768, 3072
    vision = lin(3 * 16 * 16, d) + 1024 * d + 12 * (4 * lin(d, d) + 2 * 2 * d + lin(d, ff) + lin(ff, d)) + 2 * d
    connector = lin(d * 16, 960, bias=False)
    h, kv = 960, 320
    text_layer = 2 * lin(h, h, False) + 2 * lin(h, kv, False) + 3 * lin(h, 2560, False) + 2 * h
    text = 49280 * h + 16 * text_layer + h + 49280 * h  # embeddings, layers, final norm, lm_head (untied)
    w = 720
    expert = 0
    for i in range(16):
        kv_in = w if i % 2 == 0 else kv
        expert += lin(w, h, False) + lin(h, w, False) + 2 * lin(kv_in, kv, False) + 3 * lin(w, 2048, False) + 2 * w
    expert += w + lin(32, h) + lin(32, w) + lin(w, 32) + lin(2 * w, w) + lin(w, w)
    return vision + connector + text + expert, expert


def test_smolvla_plan_counts_the_published_size(capsys):
    t0 = time.process_time()  # CPU time of this process: the promise holds on a loaded box too
    assert main(["train", "configs/vla/smolvla_reach_one.yaml", "--plan"]) == 0
    took = time.process_time() - t0
    out = capsys.readouterr().out
    total, trained = _smolvla_hand_count()
    assert f"parameters (meta device): {total / 1e6:.3f} M, trained {trained / 1e6:.3f} M" in out
    assert abs(total / 1e9 - SMOLVLA_PUBLISHED) <= 0.01 * SMOLVLA_PUBLISHED  # "450M parameters" (SmolVLA paper)
    # fsdp: train_expert_only freezes the VLM
    for row in ("ddp    1 GPU(s)", "ddp    8 GPU(s)", "fsdp   8 GPU(s)  n/a"):
        assert row in out
    assert "s/iter on 8 GPU(s) at 494 TFLOP/s x 40% MFU" in out
    assert took < 90, took


def test_smolvla_flops_match_a_hand_count():
    """Per row: the vision tower on 2 x 1024 patches, the text model over the 177-token prefix, the expert over the
    50-action chunk per flow step (10), each 2 FLOPs per parameter per token (x3 with backward for the expert in
    training) + 4 S_q S_k D per attention layer."""
    cfg = load_config(VLARLConfig, "configs/vla/smolvla_reach_one.yaml", [])
    p = plan_smolvla(cfg)
    enc = 12 * (4 * (768 * 768 + 768) + 768 * 3072 * 2 + 3072 + 768 + 4 * 768)
    txt, S, P, n, steps = 16 * (2 * 960 * 960 + 2 * 960 * 320 + 3 * 960 * 2560 + 2 * 960), 1024, 177, 50, 10
    _, expert = _smolvla_hand_count()
    vis = 2 * enc * S + 4 * S * S * 768 * 12 + 2 * 768 * 768 * S + 2 * 11_796_480 * 64
    text = 2 * txt * P + 4 * P * P * 960 * 16
    exp = 2 * expert * n + 4 * n * (P + n) * 960 * 16
    assert p.rollout.flops / p.rollout_rows == pytest.approx(2 * vis + text + steps * exp, rel=0.05)
    assert p.train.flops / p.train_rows == pytest.approx(2 * vis + text + 3 * steps * exp, rel=0.05)
    assert 0 < p.rollout.peak and 0 < p.train.peak


def _pi_hand_count(pi05: bool) -> tuple[int, int]:
    """pi0 / pi0.5 by hand (lerobot.policies.pi0 / pi05): SigLIP So400m/14 at 224 px + projector + Gemma 2B (tied
    lm_head) + the Gemma-300M expert (no token embedding; its lm_head kept) + projections; pi0.5's norms are adaptive
    (a 1024 -> 3072 dense layer each, no weight). Returns (total, trained with train_expert_only: the expert without
    its unused lm_head + projections)."""
    lin = lambda i, o, bias=True: i * o + (o if bias else 0)  # noqa: E731
    d, ff = 1152, 4304
    vision = lin(3 * 14 * 14, d) + 256 * d + 27 * (4 * lin(d, d) + 2 * 2 * d + lin(d, ff) + lin(ff, d)) + 2 * d
    h = 2048
    gemma = 257152 * h + 18 * (2 * lin(h, h, False) + 2 * lin(h, 256, False) + 3 * lin(h, 16384, False) + 2 * h) + h
    w = 1024
    norm = lin(w, 3 * w) if pi05 else w
    expert = 18 * (lin(w, 2048, False) + lin(2048, w, False) + 2 * lin(w, 256, False) + 3 * lin(w, 4096, False)
                   + 2 * norm) + norm
    proj = lin(32, w) + lin(w, 32) + (2 * lin(w, w) if pi05 else lin(32, w) + lin(2 * w, w) + lin(w, w))
    head = 257152 * w
    return vision + lin(d, 2048) + gemma + expert + proj + head, expert + proj


@pytest.mark.parametrize("kind", ["pi0", "pi05"])
def test_pi_plan_counts(kind, capsys):
    """pi0 / pi0.5 (configs/vla/pi0_reach_one.yaml, pi05_reach_one.yaml): the meta-device count equals the hand count
    and the 3.50 B / 3.62 B that vla_rl.policies.factory.BASE_SIZES states (counted there with LeRobot's own classes),
    and is within 10% of the pi0 paper's 3.3 B (3 B PaliGemma + 300 M expert)."""
    from vla_rl.policies.factory import BASE_SIZES

    assert main(["train", f"configs/vla/{kind}_reach_one.yaml", "--plan"]) == 0
    out = capsys.readouterr().out
    total, trained = _pi_hand_count(kind == "pi05")
    assert f"parameters (meta device): {total / 1e6:.3f} M, trained {trained / 1e6:.3f} M" in out
    stated = float(re.search(r"([\d.]+) B parameters", BASE_SIZES[kind]).group(1))
    assert round(total / 1e9, 2) == stated
    assert abs(total / 1e9 - 3.3) <= 0.1 * 3.3
    assert "ddp    8 GPU(s)" in out and "s/iter on 8 GPU(s)" in out


@pytest.mark.parametrize("recipe", ["robosuite_lift", "libero_spatial_full"])
def test_builtin_full_recipes_plan(recipe, capsys):
    assert main(["train", f"configs/vla/{recipe}.yaml", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "plan: built-in SmallVLA (flow head)" in out
    n = float(re.search(r"parameters \(meta device\): ([\d.]+) M", out).group(1))
    assert 0.05 < n < 5  # the built-in VLA is a small network (~0.25 M here)
    rows = {m.group(1) + m.group(2): m.group(0) for m in re.finditer(r"  (ddp|fsdp) +(\d+) GPU\(s\).*", out)}
    assert set(rows) == {"ddp1", "ddp8", "fsdp1", "fsdp8"} and all("fits 80 GB: yes" in r for r in rows.values())


@pytest.mark.slow
def test_wm_loop_plan(capsys):
    """The World-VLA-Loop's Wan2.1-1.3B-shaped world model: its count against the published 1.3B size class, its
    training step against 6 P B tokens and its imagined chunk against 2 P rows tokens (4 frames x 16 x 16 tokens),
    the largest batch that fits consistent with the memory it prints."""
    assert main(["loop", "configs/world_models/loop_robosuite_lift.yaml", "models.wm_batch=32", "--plan"]) == 0
    out = capsys.readouterr().out
    n = float(re.search(r"world model ([\d.]+) B", out).group(1)) * 1e9
    assert 1.3e9 <= n <= 1.45e9  # Wan2.1-T2V-1.3B's transformer is 1.419 B with its text embedder (diffusion plan)
    tf = float(re.search(r"training step \(batch 32\): ([\d.]+) TFLOP", out).group(1)) * 1e12
    assert tf == pytest.approx(6 * n * 32 * 1024, rel=0.1)
    rf = float(re.search(r"over 64 episodes ([\d.]+) TFLOP", out).group(1)) * 1e12
    assert rf == pytest.approx(2 * n * 64 * 1024, rel=0.1)
    act = float(re.search(r"activations ([\d.]+) GiB;", out).group(1)) * GiB
    b = int(re.search(r"largest models.wm_batch whose world-model training fits 80 GB.*: (\d+)", out).group(1))
    per = act / 32
    assert 16 * n + b * per <= 80e9 * 1.01 and 16 * n + (b + 1) * per > 80e9 * 0.99
    assert "fits 80 GB: NO" in out  # batch 32 without gradient checkpointing: ~194 GiB of activations
    assert "host memory" in out and "GPU-h" in out
    assert main(["loop", "configs/world_models/loop_robosuite_lift.yaml", "--plan"]) == 0  # the recipe's batch: 8
    out = capsys.readouterr().out
    assert "training step (batch 8)" in out and "fits 80 GB: yes" in out


def test_plan_bad_input(tmp_path, capsys):
    out_dir = tmp_path / "run"
    base = ["train", "configs/vla/smolvla_reach_one.yaml", f"output_dir={out_dir}", "--plan"]
    for extra, msg in ((["--gpus", "eight"], "--gpus='eight': expected positive integers"),
                       (["--mfu", "2"], "--mfu=2.0: expected a fraction in (0, 1]"),
                       (["policy.lerobot.paligemma_variant=gemma_300m", "policy.type=pi0"],
                        "--plan sizes pi0 with paligemma_variant='gemma_2b'")):
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1, err
    assert main(["train", "configs/vla/smolvla_reach_one_cpu.yaml", f"output_dir={out_dir}", "--plan"]) == 2
    err = capsys.readouterr().err.strip()
    assert "vlm_model_name='tiny' is another one" in err and len(err.splitlines()) == 1
    assert main(["loop", "configs/world_models/loop_robosuite_lift.yaml", f"output_dir={out_dir}", "--plan",
                 "--gpu-mem", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--gpu-mem=0.0: expected a finite number of GB > 0" in err and len(err.splitlines()) == 1
    assert not out_dir.exists()  # nothing written


def test_the_policy_class_describes_its_own_plan(monkeypatch):
    """``--plan`` asks the policy class for its passes (``plan_passes``); a class without one gets one clear error."""
    from vla_rl.plan import plan_builtin
    from vla_rl.policies import factory
    from vla_rl.policy import SmallVLA

    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach_one.yaml", ["rl.minibatch_size=8"])
    p = plan_builtin(cfg)
    assert p.name == "built-in SmallVLA (flow head)" and p.flow_steps == cfg.policy.flow.num_steps
    assert p.train_rows == 8 and p.params == p.trainable > 0
    assert p.train.flops / p.train_rows > p.rollout.flops / p.rollout_rows > 0  # T steps + backward vs one call

    class NoPlan(SmallVLA):
        plan_passes = None

    monkeypatch.setattr(factory, "policy_class", lambda pcfg: NoPlan)
    with pytest.raises(ValueError, match="NoPlan has no plan_passes"):
        plan_builtin(cfg)
