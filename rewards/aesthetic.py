"""LAION aesthetic score: the "improved aesthetic predictor" MLP on CLIP ViT-L/14 image embeddings
(Schuhmann et al. 2022; the aesthetic reward of DDPO, Black et al. 2023)::

    e_i = norm(CLIP-L image embedding of x_i)   [B, 768]
    a_i = MLP(e_i)                              [B], roughly 1..10

MLP layout (``sac+logos+ava1-l14-linearMSE.pth``), an ``nn.Sequential`` named ``layers``::

    layers.0 Linear(768, 1024) - Dropout(0.2) - layers.2 Linear(1024, 128) - Dropout(0.2)
    - layers.4 Linear(128, 64) - Dropout(0.1) - layers.6 Linear(64, 16) - layers.7 Linear(16, 1)

(no nonlinearities, as released). Sizes are read from the weights, so any MLP of that layout loads.
``clip`` is a local ``transformers`` CLIP directory (e.g. a snapshot of ``openai/clip-vit-large-patch14``; only
the vision tower is loaded), ``mlp`` the local ``.pth``/``.safetensors`` file. Component ``aesthetic``.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from .base import ImageReward, RewardOutput, resolve_dtype
from .clip_backbone import clip_preprocess, dtype_kwarg, read_mean_std, require_path

MLP_LAYERS = (0, 2, 4, 6, 7)  # Linear indices in the released nn.Sequential


def aesthetic_mlp(state_dict: dict[str, torch.Tensor]) -> nn.Sequential:
    """The LAION MLP with the sizes of ``state_dict`` (keys ``layers.{0,2,4,6,7}.{weight,bias}``, optional prefix)."""
    sd = {k[k.index("layers."):]: v for k, v in state_dict.items() if "layers." in k}
    need = [f"layers.{i}.{p}" for i in MLP_LAYERS for p in ("weight", "bias")]
    missing = [k for k in need if k not in sd]
    if missing or len(sd) != len(need):
        raise ValueError(f"not a LAION aesthetic-predictor MLP: expected keys {need}, missing {missing}, "
                         f"extra {sorted(set(sd) - set(need))}")
    dims = [sd["layers.0.weight"].shape[1]] + [sd[f"layers.{i}.weight"].shape[0] for i in MLP_LAYERS]
    if dims[-1] != 1:
        raise ValueError(f"aesthetic MLP must end in 1 output, got {dims[-1]}")
    mlp = nn.Sequential(nn.Linear(dims[0], dims[1]), nn.Dropout(0.2), nn.Linear(dims[1], dims[2]), nn.Dropout(0.2),
                        nn.Linear(dims[2], dims[3]), nn.Dropout(0.1), nn.Linear(dims[3], dims[4]),
                        nn.Linear(dims[4], dims[5]))
    wrapper = nn.Module()
    wrapper.layers = mlp
    wrapper.load_state_dict({k: v.float() for k, v in sd.items()})
    return mlp


def load_state_dict_file(path: os.PathLike, reward: str) -> dict[str, torch.Tensor]:
    try:
        if str(path).endswith(".safetensors"):
            from safetensors.torch import load_file

            sd = load_file(str(path))
        else:
            sd = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"reward {reward!r}: cannot load weights from {str(path)!r}: {e}") from e
    if isinstance(sd, dict) and "state_dict" in sd:
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise ValueError(f"reward {reward!r}: {str(path)!r} holds {type(sd).__name__}, expected a state dict")
    return sd


class AestheticReward(ImageReward):
    name = "aesthetic"

    def __init__(self, clip: str | None = None, mlp: str | None = None, dtype: str = "float32", device: str = "cpu",
                 nonfinite: str = "warn"):
        from transformers import CLIPVisionModelWithProjection

        cp = require_path(clip, self.name, "a local CLIP ViT-L/14 directory (e.g. a snapshot of "
                          "openai/clip-vit-large-patch14)", "clip")
        mp = require_path(mlp, self.name, "the LAION aesthetic MLP weights (sac+logos+ava1-l14-linearMSE.pth)", "mlp")
        dt = resolve_dtype(dtype)
        try:  # the vision tower of a full CLIP directory; its projection size is the CLIP's projection_dim
            from transformers import AutoConfig

            cfg = AutoConfig.from_pretrained(str(cp), local_files_only=True)
            vcfg = getattr(cfg, "vision_config", cfg)
            vcfg.projection_dim = getattr(cfg, "projection_dim", vcfg.projection_dim)
            self.vision = CLIPVisionModelWithProjection.from_pretrained(str(cp), config=vcfg, local_files_only=True,
                                                                        **dtype_kwarg(dt))
        except (OSError, ValueError) as e:
            raise ValueError(f"reward {self.name!r}: cannot load a CLIP vision model from {str(cp)!r}: {e}") from e
        self.vision = self.vision.to(device).eval().requires_grad_(False)
        self.mlp = aesthetic_mlp(load_state_dict_file(mp, self.name)).to(device=device, dtype=dt).eval()
        self.mlp.requires_grad_(False)
        d = self.vision.config.projection_dim
        if self.mlp[0].in_features != d:
            raise ValueError(f"reward {self.name!r}: the MLP takes {self.mlp[0].in_features}-d embeddings, the CLIP in "
                             f"{str(cp)!r} gives {d}-d (the LAION MLP expects ViT-L/14, 768)")
        self.mean, self.std = read_mean_std(cp)
        self.size = int(self.vision.config.image_size)
        self.nonfinite = nonfinite  # type: ignore[assignment]

    @torch.no_grad()
    def score(self, images, prompts, metadata) -> RewardOutput:
        p = next(self.vision.parameters())
        x = clip_preprocess(images.to(p.device), self.size, self.mean, self.std).to(p.dtype)
        e = self.vision(pixel_values=x).image_embeds.float()
        e = e / e.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        a = self.mlp(e.to(p.dtype)).float().squeeze(-1).to(images.device)
        return RewardOutput(total=a, components={"aesthetic": a})
