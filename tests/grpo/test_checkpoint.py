import random
from pathlib import Path

import numpy as np
import pytest
import torch

from grpo import checkpoint as ck


def _state():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    model[1].weight = torch.nn.Parameter(model[1].weight.to(torch.bfloat16).float())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    return model, opt


def test_round_trip_bit_identical_and_rng(tmp_path):
    model, opt = _state()
    random.seed(3), np.random.seed(4), torch.manual_seed(5)
    gen = torch.Generator().manual_seed(11)
    torch.randn(7, generator=gen)
    rng = ck.capture_rng_state()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": rng, "generator": gen.get_state(),
             "tracker": {"history": {"a cat": [1.0, 2.0]}}, "iteration": 7, "half": torch.ones(3, dtype=torch.bfloat16)}
    path = ck.save_checkpoint(tmp_path, 7, state)
    assert (path / "model.safetensors").exists() and (tmp_path / "latest").read_text() == "step_000007"
    expect = (random.random(), np.random.rand(), torch.rand(3), torch.randn(4, generator=gen))

    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    loaded = ck.load_checkpoint(tmp_path)
    for k, v in model.state_dict().items():
        assert torch.equal(loaded["model"][k], v) and loaded["model"][k].dtype == v.dtype
    assert loaded["half"].dtype == torch.bfloat16
    opt2 = torch.optim.AdamW(model.parameters(), lr=1.0)
    opt2.load_state_dict(loaded["optimizer"])
    for (k, s1), (_, s2) in zip(opt.state_dict()["state"].items(), opt2.state_dict()["state"].items()):
        for name in s1:
            assert torch.equal(s1[name], s2[name])
    assert opt2.param_groups[0]["betas"] == (0.9, 0.95) and opt2.param_groups[0]["lr"] == 1e-3
    ck.restore_rng_state(loaded["rng"])
    gen2 = torch.Generator()
    gen2.set_state(loaded["generator"])
    got = (random.random(), np.random.rand(), torch.rand(3), torch.randn(4, generator=gen2))
    assert got[0] == expect[0] and got[1] == expect[1]
    assert torch.equal(got[2], expect[2]) and torch.equal(got[3], expect[3])
    assert loaded["tracker"] == {"history": {"a cat": [1.0, 2.0]}} and loaded["iteration"] == 7


def test_keep_last_and_latest(tmp_path):
    for s in range(1, 6):
        ck.save_checkpoint(tmp_path, s, {"w": {"x": torch.full((2,), float(s))}}, keep_last=2)
    assert [p.name for p in ck.list_checkpoints(tmp_path)] == ["step_000004", "step_000005"]
    assert float(ck.load_checkpoint(tmp_path)["w"]["x"][0]) == 5.0


def test_failed_save_leaves_previous_intact(tmp_path, monkeypatch):
    ck.save_checkpoint(tmp_path, 1, {"w": {"x": torch.ones(2)}, "n": 1})

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ck, "save_file", disk_full)
    with pytest.raises(OSError, match="No space"):
        ck.save_checkpoint(tmp_path, 2, {"w": {"x": torch.zeros(2)}, "n": 2})
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("step")] == ["step_000001"]
    loaded = ck.load_checkpoint(tmp_path)
    assert loaded["n"] == 1 and torch.equal(loaded["w"]["x"], torch.ones(2))


def test_tied_weights_and_bad_values(tmp_path):
    w = torch.randn(4, 4)
    ck.save_checkpoint(tmp_path, 1, {"m": {"a": w, "b": w, "c": w.t()}})
    got = ck.load_checkpoint(tmp_path)["m"]
    assert torch.equal(got["a"], w) and torch.equal(got["b"], w) and torch.equal(got["c"], w.t())
    with pytest.raises(TypeError, match="cannot checkpoint"):
        ck.save_checkpoint(tmp_path, 2, {"bad": object()})
    assert ck.latest_checkpoint(tmp_path).name == "step_000001"
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        ck.load_checkpoint(Path(tmp_path) / "nope")
