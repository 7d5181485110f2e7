"""The progress encoder's data option "the policy's own rollouts" (data.policy / policy_per_task / policy_failures):
the targets of successes and failures (drop / play / the VIP-style hindsight lower bound), the lower-bound loss
(only predictions below the bound are penalized), and the one command (vla-rl fit-encoder) rolling a real VLA out
in the simulator and recording what it used; a bad setting stops in one line before anything runs."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.cli import main
from world_models.progress_encoder import (
    ProgressEncoder,
    ProgressEncoderConfig,
    ProgressTrainConfig,
    policy_targets,
    read_progress_metadata,
    train_progress_encoder,
)

ROOT = Path(__file__).resolve().parents[2]


def _frames(n: int, v: int = 0) -> np.ndarray:
    return np.full((n, 8, 8, 3), v, np.uint8)


def test_policy_targets_for_successes_and_each_failure_rule():
    eps = [(_frames(5), True), (_frames(3), True), (_frames(4), False)]  # successes of 4 and 2 steps: L = 3
    drop = policy_targets(eps, "drop")
    assert len(drop) == 2 and not any(b for _, _, b in drop)
    np.testing.assert_allclose(drop[0][1], [1, 0.75, 0.5, 0.25, 0])
    play = policy_targets(eps, "play")
    assert len(play) == 3 and np.all(play[2][1] == 1) and not play[2][2]
    hind = policy_targets(eps, "hindsight")
    frames, bound, is_bound = hind[2]
    assert is_bound and len(bound) == 4
    np.testing.assert_allclose(bound, [1, 1, 2 / 3, 1 / 3])  # at frame t >= (4 - t) steps still to go, over L = 3
    only_fail = [(_frames(4), False)]
    assert policy_targets(only_fail, "hindsight") == []  # no success length known: left out
    np.testing.assert_allclose(policy_targets(only_fail, "hindsight", success_length=2.0)[0][1], [1, 1, 1, 0.5])
    with pytest.raises(ValueError, match="policy_failures='x'"):
        policy_targets(eps, "x")


def test_a_lower_bound_is_only_violated_from_below():
    """Frames all 0 but 'bright' ones, targets 0.2 as a bound: an encoder already above it gets no loss from them;
    as plain targets it is pulled down to 0.2 (the check can fail: the two trainings must differ)."""
    torch.manual_seed(0)
    videos = [_frames(4, 200) for _ in range(4)]
    targets = [np.full(4, 0.2, np.float32) for _ in range(4)]
    cfg = ProgressTrainConfig(steps=80, batch_episodes=4, lr=2e-2, shift=0, rank_weight=0.0)

    def trained(bounds):
        torch.manual_seed(0)
        enc = ProgressEncoder(ProgressEncoderConfig(channels=[4, 4], hidden=8, image_size=8))
        with torch.no_grad():
            enc.head[-1].bias.fill_(3.0)  # starts at sigmoid(~3) ~ 0.95, above the bound
        losses = train_progress_encoder(enc, videos, targets, cfg, 0, bounds=bounds)
        with torch.no_grad():
            r = float(enc.encode_frames(torch.as_tensor(videos[0]).permute(0, 3, 1, 2)[None]).mean())
        return r, losses

    r_bound, loss_bound = trained([True] * 4)
    r_plain, _ = trained(None)
    assert max(loss_bound) == 0.0 and r_bound > 0.9
    assert r_plain < 0.6
    with pytest.raises(ValueError, match="bounds flag"):
        train_progress_encoder(ProgressEncoder(), videos, targets, cfg, bounds=[True])


def test_fit_encoder_rolls_out_the_policy_and_records_it(tmp_path, capsys):
    out = tmp_path / "enc.safetensors"
    rc = main(["fit-encoder", str(ROOT / "configs/vla/fit_progress_encoder.yaml"),
               "data.expert_tasks=[tabletop/reach_one]", "data.expert_per_task=2", "data.play_per_task=0",
               "data.policy=builtin:tabletop_base", "data.policy_per_task=3", "data.policy_max_steps=6",
               "data.policy_failures=play", "train.steps=2", "train.batch_episodes=4", f"output={out}"])
    assert rc == 0, capsys.readouterr().err
    pol = read_progress_metadata(out)["trained_on"]["policy"]
    assert pol["policy"] == "builtin:tabletop_base" and pol["failures"] == "play"
    assert pol["tasks"]["tabletop/reach_one"]["episodes"] == 3 and pol["tasks"]["tabletop/reach_one"]["used"] == 3
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["steps"] == 2


@pytest.mark.parametrize("over, word", [(["data.policy_per_task=2"], "data.policy is empty"),
                                        (["data.policy=builtin:tabletop_base", "data.policy_failures=maybe"],
                                         "data.policy_failures"),
                                        (["data.policy=/nonexistent/pol", "data.policy_per_task=1"], "data.policy")])
def test_bad_policy_data_settings_stop_in_one_line(tmp_path, capsys, over, word):
    rc = main(["fit-encoder", str(ROOT / "configs/vla/fit_progress_encoder.yaml"), *over,
               f"output={tmp_path / 'e.safetensors'}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and word in err and len(err.splitlines()) == 1
    assert not (tmp_path / "e.safetensors").exists()
