"""What a user sees (issue 22): captioned, upscaled image grids; rollout video names with task and outcome."""

import torch

from grpo.captions import captioned_grid, upscale_factor
from grpo.metrics import MetricsLogger


def test_grid_tiles_are_upscaled_nearest_and_captioned(tmp_path):
    imgs = torch.zeros(3, 3, 16, 16)
    imgs[0, 0] = 1.0  # red
    imgs[1, 2, :8] = 1.0  # top half blue
    grid = captioned_grid(imgs, ["a red square | reward 0.900", "blue top | reward 0.100", ""], nrow=2)
    k = upscale_factor(16, 16, 256)
    assert k == 16
    tile = grid[:, 4:4 + 256, 4:4 + 256]  # first tile (pad 4): exactly red, no interpolation
    assert torch.equal(tile, imgs[0][:, :1, :1].expand(3, 256, 256))
    blue = grid[:, 4:4 + 256, 4 + 256 + 4: 4 + 512 + 4]
    assert torch.equal(blue[2, :128], torch.ones(128, 256)) and torch.equal(blue[2, 128:], torch.zeros(128, 256))
    below0 = grid[:, 4 + 256: 4 + 256 + 40, 4: 4 + 256]  # caption strip of tile 0: dark text on white
    assert below0.min() < 0.5 and below0.float().mean() > 0.8
    # the third tile's caption is empty: its strip is white
    y3 = 4 + (256 + 40 + 4)
    assert torch.equal(grid[:, y3 + 256: y3 + 256 + 40, 4: 4 + 256], torch.ones(3, 40, 256))
    out = MetricsLogger(tmp_path, tensorboard=False).log_images(5, "samples/after", imgs, nrow=2,
                                                                captions=["a", "b", "c"])
    import imageio.v3 as iio

    arr = iio.imread(out)
    assert out.name == "samples_after_000005.png" and arr.shape[0] >= 2 * 256 and arr.shape[1] >= 2 * 256


def test_video_name_says_task_and_outcome():
    from vla_rl.rollout import Episode, EpisodeSpec, video_name

    eps = [Episode(EpisodeSpec("tabletop/reach_one", i, 0, i), success=i < 2) for i in range(3)]
    assert video_name(eps) == "tabletop-reach_one__2of3_success"
    assert video_name(eps[2:]) == "tabletop-reach_one__0of1_success"
