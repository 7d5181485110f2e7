"""User SRPO encoders for ``srpo.encoder: package.module:Name`` (tests/vla_rl/test_srpo_plugin_encoder.py)."""

import torch


class MeanColour(torch.nn.Module):
    """``encode_frames``: each frame's mean colour, [B, T, 3]; ``path`` is kept to show what the trainer passes."""

    def __init__(self, path=None):
        super().__init__()
        self.path = path
        self.scale = torch.nn.Parameter(torch.ones(()), requires_grad=False)

    @torch.no_grad()
    def encode_frames(self, video):
        return video.float().mean(dim=(3, 4)) * self.scale


def mean_colour(path=None):
    """A factory (not a class): returns the encoder."""
    return MeanColour(path)


class NoEncodeFrames:
    def __init__(self, path=None):
        pass


def returns_a_string(path=None):
    return "not an encoder"


NOT_CALLABLE = 3
