"""WindowSet: the world model's training windows cut per batch from the trajectories, equal to the materialized ones
(named batches: WindowBatch, FrameBatch, FrameSamples)."""

import copy

import pytest
import torch

from world_models.data import collect_sans
from world_models.video_wm import (
    VideoWorldModel,
    WorldModelConfig,
    train_success_head,
    train_world_model,
    world_model_metrics,
)
from world_models.windows import FrameBatch, WindowBatch, WindowSet, success_samples, wm_windows

TINY_WM = dict(image_size=16, context_frames=2, chunk=2, action_dim=4, sampling_steps=2, layers=1, ffn_dim=32, patch=4)


@pytest.fixture(scope="module")
def reach():
    return collect_sans("tabletop/reach", {"success": 2, "near": 1, "failure": 1, "random": 1}, horizon=9,
                        image_size=16,
                        env_kwargs={"object_state": True})


def _old_windows(data, tc, k, stride, text_dim, state):
    """The materialized cut as wm_windows made it before WindowSet (padded tensors + video_wm.window_dataset), as the
    tuple (context, actions, future, success[, text or None[, state, ref]]) it was."""
    from world_models.video_wm import window_dataset
    from world_models.windows import instruction_features

    v, a, s, st = data.videos, data.actions, data.success, data.state
    pad = tc - 1
    if pad:
        v = torch.cat([v[:, :1].expand(-1, pad, -1, -1, -1), v], dim=1)
        a = torch.cat([a.new_zeros(a.shape[0], pad, a.shape[2]), a], dim=1)
        s = torch.cat([s[:, :1].expand(-1, pad), s], dim=1)
        st = torch.cat([st[:, :1].expand(-1, pad, -1), st], dim=1)
    w = window_dataset(v, a, s, WorldModelConfig(image_size=v.shape[-1], context_frames=tc, chunk=k, patch=1))
    out = [w.context, w.actions, w.future, w.success]
    n, t = v.shape[:2]
    starts = range(0, t - tc - k + 1)
    if text_dim:
        out.append(instruction_features(data.instructions, text_dim).repeat(len(starts), 1))
    elif state:
        out.append(None)
    if state:
        out.append(torch.cat([st[:, s0 + tc:s0 + tc + k] for s0 in starts]))
        out.append(data.videos[:, 0].repeat(len(starts), 1, 1, 1))
    keep = torch.arange(out[0].shape[0]).reshape(-1, n)[::stride].flatten()
    return tuple(None if x is None else x[keep] for x in out)


@pytest.mark.parametrize("tc,k,stride,text_dim,state", [(2, 2, 1, 8, True), (2, 3, 2, 0, True), (1, 4, 1, 0, False),
                                                         (3, 2, 3, 4, False)])
def test_windows_equal_the_materialized_cut(reach, tc, k, stride, text_dim, state):
    ws = WindowSet(reach, tc, k, stride, text_dim, state)
    old = _old_windows(reach, tc, k, stride, text_dim, state)
    old = WindowBatch(*old[:5], *(old[5:] if state else ()))  # the tuple's entries by name
    new = ws.materialize()
    assert isinstance(new, WindowBatch) and len(ws) == len(old) == len(new)
    assert (new.text is None) == (not text_dim) and (new.state is None) == (new.ref is None) == (not state)
    assert _equal(old, new) and _equal(new, wm_windows(reach, tc, k, stride, text_dim, state))
    idx = torch.tensor([len(ws) - 1, 0, 3, 3])
    assert _equal(old.take(idx), ws.take(idx))
    assert _equal(ws.future_states(), old.state) if state else ws.future_states() is None
    # the success head's per-frame samples, in success_samples' order
    flat = success_samples(old.future, old.actions, old.success, old.text, old.state, old.ref)
    assert _equal(flat, old.frame_samples())
    fs = ws.frame_samples()
    assert torch.equal(fs.labels, flat.labels) and len(fs) == len(flat)
    j = torch.tensor([0, 5, len(fs.labels) - 1])
    assert _equal(flat.take(j), fs.take(j))
    assert ws.data.frames is reach.frames  # no copy of the frames: windows are cut per batch


def _equal(a, b) -> bool:
    """Equal tensors, or equal named batches (every entry equal, or None in both)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    return type(a) is type(b) and all((x is None and y is None)
                                      or (x is not None and y is not None and torch.equal(x, y))
                                      for x, y in zip(vars(a).values(), vars(b).values()))


def test_named_batches_check_their_rows():
    with pytest.raises(ValueError, match="leading dim"):
        WindowBatch(torch.zeros(3, 2, 3, 4, 4), torch.zeros(2, 2, 4), torch.zeros(3, 2, 3, 4, 4), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="leading dim"):
        FrameBatch(torch.zeros(3, 3, 4, 4), torch.zeros(3, 4), torch.zeros(3), state=torch.zeros(4, 2))


def test_training_on_windowset_equals_training_on_tensors(reach):
    """Same batches, same floats: a world model and its success head trained on either end bit-identical."""
    torch.manual_seed(0)
    base = VideoWorldModel(WorldModelConfig(**TINY_WM, state_dim=18))
    runs = []
    for data in (wm_windows(reach, 2, 2, text_dim=base.cfg.text_dim, state=True),
                 WindowSet(reach, 2, 2, text_dim=base.cfg.text_dim, state=True)):
        wm = copy.deepcopy(base)
        losses = train_world_model(wm, data, steps=3, batch=4)
        head = train_success_head(wm, data, steps=3, batch=8, augment=True)
        runs.append((losses, head, wm.state_dict(), world_model_metrics(wm, data, batch=5)))
    (l0, h0, s0, m0), (l1, h1, s1, m1) = runs
    assert l0 == l1 and h0 == h1 and all(torch.equal(s0[k], s1[k]) for k in s0)
    assert m0 == pytest.approx(m1, rel=1e-6)
    with pytest.raises(ValueError, match="state-aware"):
        train_success_head(wm, WindowSet(reach, 2, 2), steps=1)


def test_imagined_samples_keep_episode_entries_once(reach):
    """FrameSamples gives the rows of its materialized FrameBatch and trains the head to the same bits."""
    from world_models.data import StatePredictor
    from world_models.fit import imagined_success_samples

    torch.manual_seed(0)
    ground = dict(state_dim=18, state_points=(0, 9, 12, 15),
                  state_camera=(0, -0.4, 0.42, 1, 0, 0, 0, 0.686, 0.727, 50))
    wm = VideoWorldModel(WorldModelConfig(**TINY_WM, **ground))
    sp = StatePredictor(18, 4, hidden=16)
    fs = imagined_success_samples(wm, reach, rollouts=2, steps=1, state_model=sp)
    flat = fs.materialize()  # the batch it stands for
    n, t = reach.actions.shape[:2]
    assert len(fs) == len(flat) == 2 * n * t and flat.frames.shape == (2 * n * t, 3, 16, 16)
    assert torch.equal(flat.ref, reach.videos[:, 0].repeat_interleave(t, 0).repeat(2, 1, 1, 1))
    assert torch.equal(flat.text, wm.text_features(reach.instructions).repeat_interleave(t, 0).repeat(2, 1))
    assert fs.per_episode["ref"].shape[0] == n and fs.samples.ref is None  # stored once per episode
    assert _equal(fs.take(torch.tensor([3, 0, 7])), flat.take(torch.tensor([3, 0, 7])))
    win = WindowSet(reach, 2, 2, text_dim=wm.cfg.text_dim, state=True)
    runs = []
    for imagined in (fs, flat):
        m = copy.deepcopy(wm)
        runs.append((train_success_head(m, win, steps=3, batch=8, imagined=imagined, augment=True),
                     m.success_head.state_dict()))
    assert runs[0][0] == runs[1][0] and all(torch.equal(v, runs[1][1][k]) for k, v in runs[0][1].items())
    with pytest.raises(ValueError, match="too short"):
        WindowSet(reach, 2, 20)


def test_bench_windows_runs_and_the_losses_agree(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_windows", "bench/bench_windows.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--episodes", "8", "--steps", "8", "--image-size", "16", "--batches", "3"]) == 0
    out = capsys.readouterr().out
    assert "same losses on both: True" in out
    # the byte formula the full-size extrapolation uses matches what this run held
    held = [line for line in out.splitlines() if line.startswith("bytes held")][0].split()
    formula = out.split("the formula on this run's data: ")[1].split()
    assert held[2] == formula[0] + "MB" and held[3] == formula[3] + "MB"
