"""The progress encoder's data option "the scripted expert after a detour" (data.detour_per_task / detour_steps):
the targets (the expert's time to go over the task's success length, or the hindsight bound when it did not
recover), real MuJoCo episodes that start where the play prefix left the scene, and the one command recording
what it used; a bad setting stops in one line before anything runs."""

import json
from pathlib import Path

import numpy as np
import pytest

from vla_rl.cli import main
from world_models.progress_encoder import (
    detour_targets,
    read_progress_metadata,
    record_detour_episodes,
    record_expert_episodes,
)

ROOT = Path(__file__).resolve().parents[2]


def test_detour_targets_recovered_and_not():
    tg, bound = detour_targets(8, first=6, start=2, length=2.0)  # frames 2..7; success at frame 6
    assert not bound
    np.testing.assert_allclose(tg, [1, 1, 1, 0.5, 0, 0])  # min(1, (6 - t) / 2), 0 from the success on
    tg, bound = detour_targets(5, first=-1, start=1, length=4.0)  # frames 1..4 of a failure (T = 4)
    assert bound
    np.testing.assert_allclose(tg, [1, 0.75, 0.5, 0.25])  # at frame t >= (T - t + 1) steps still to go, over L = 4
    with pytest.raises(ValueError, match="success length"):
        detour_targets(5, 3, 0, 0.0)


def test_detour_episodes_start_off_the_expert_path_in_mujoco():
    """reach_one, a fixed detour of 4 play steps: the kept frames start after the prefix (4 frames shorter than the
    whole episode), the expert recovers with targets falling to 0 at its success; with no detour the first frame is
    the reset frame and its target the expert's whole time to go over L."""
    (ref, flags), = record_expert_episodes("tabletop/reach_one", 1, 570_000, noise=0.0)
    length = float(np.argmax(flags))
    eps = record_detour_episodes("tabletop/reach_one", 3, 570_000, length, detour=(4, 4), noise=0.0, hold_steps=2)
    assert len(eps) == 3
    for frames, tg, bound in eps:
        assert not bound and frames.shape[1:] == (32, 32, 3) and len(frames) == len(tg)
        assert np.all(np.diff(tg) <= 0) and tg[-1] == 0 and tg[-3] == 0  # held 2 frames after the success
    assert not np.array_equal(eps[0][0][0], ref[0])  # the play prefix moved the gripper before the expert took over
    (frames, tg, bound), = record_detour_episodes("tabletop/reach_one", 1, 570_000, length, detour=(0, 0), noise=0.0)
    np.testing.assert_array_equal(frames[0], ref[0])
    np.testing.assert_allclose(tg[0], min(1.0, (len(frames) - 3) / length))  # success frame = len - 1 - hold


def test_fit_encoder_records_the_detour_episodes(tmp_path, capsys):
    out = tmp_path / "enc.safetensors"
    rc = main(["fit-encoder", str(ROOT / "configs/vla/fit_progress_encoder.yaml"),
               "data.expert_tasks=[tabletop/reach_one]", "data.expert_per_task=2", "data.play_per_task=0",
               "data.detour_per_task=3", "data.detour_steps=[2,5]", "train.steps=2", "train.batch_episodes=4",
               f"output={out}"])
    assert rc == 0, capsys.readouterr().err
    det = read_progress_metadata(out)["trained_on"]["expert"]["tabletop/reach_one"]["detour_episodes"]
    assert det["episodes"] == 3 and det["steps"] == [2, 5] and 0 <= det["recovered"] <= 3
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["steps"] == 2


@pytest.mark.parametrize("over", [["data.detour_steps=[5,1]"], ["data.detour_steps=[3]"],
                                  ["data.detour_per_task=-1"]])
def test_bad_detour_settings_stop_in_one_line(tmp_path, capsys, over):
    rc = main(["fit-encoder", str(ROOT / "configs/vla/fit_progress_encoder.yaml"), *over,
               f"output={tmp_path / 'e.safetensors'}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "detour" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "e.safetensors").exists()
