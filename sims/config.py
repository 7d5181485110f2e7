"""Typed environment options with validation (errors name the bad value and what was expected)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

CAMERAS = ("agentview", "wrist")
IMAGE_RANGE = (16, 1024)  # the camera image sides (pixels) a sim renders
OUT_OF_BOUNDS = ("clip", "raise")


def _image_hw(size: Any) -> tuple[int, int]:
    if isinstance(size, (int,)) and not isinstance(size, bool):
        h = w = int(size)
    elif isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(s, int) and not isinstance(s, bool)
                                                                    for s in size):
        h, w = int(size[0]), int(size[1])
    else:
        raise ValueError(f"image_size must be an int or (height, width) ints, got {size!r}")
    for s in (h, w):
        if not IMAGE_RANGE[0] <= s <= IMAGE_RANGE[1]:
            raise ValueError(f"image_size must be in [{IMAGE_RANGE[0]}, {IMAGE_RANGE[1]}] pixels (64-256 typical), "
                             f"got {size!r}")
    return h, w


def check_common(cfg: Any) -> None:
    """The options every simulator's frozen config shares, checked in place: ``image_size`` (:func:`_image_hw`),
    ``cameras`` (names from :data:`CAMERAS`, no repeats; a single name becomes a 1-tuple) and
    ``action_out_of_bounds`` (one of :data:`OUT_OF_BOUNDS`)."""
    _image_hw(cfg.image_size)
    cams = (cfg.cameras,) if isinstance(cfg.cameras, str) else cfg.cameras
    if not isinstance(cams, (tuple, list)):
        raise ValueError(f"cameras must be a tuple of names from {CAMERAS}, got {cfg.cameras!r}")
    for c in cams:
        if c not in CAMERAS:
            raise ValueError(f"unknown camera {c!r}; expected names from {CAMERAS}")
    if len(set(cams)) != len(cams):
        raise ValueError(f"cameras must not repeat, got {cfg.cameras!r}")
    object.__setattr__(cfg, "cameras", tuple(cams))
    if cfg.action_out_of_bounds not in OUT_OF_BOUNDS:
        raise ValueError(f"action_out_of_bounds must be one of {OUT_OF_BOUNDS}, got {cfg.action_out_of_bounds!r}")


def check_extra_view(view: Any) -> tuple:
    """``extra_view`` (see :class:`TabletopConfig`) as a checked ``(name, camera, size)`` tuple, or ``()``."""
    if view is None or (isinstance(view, (tuple, list)) and len(view) == 0):
        return ()
    ok = isinstance(view, (tuple, list)) and len(view) == 3 and isinstance(view[0], str) and view[0] \
        and view[0] not in CAMERAS and view[1] in CAMERAS and isinstance(view[2], int) \
        and not isinstance(view[2], bool) and IMAGE_RANGE[0] <= view[2] <= IMAGE_RANGE[1]
    if not ok:
        raise ValueError(f"extra_view must be (name, camera, size) with a name that is not a camera, a camera from "
                         f"{CAMERAS} and a size in [16, 1024] pixels, e.g. ('srpo', 'agentview', 64); got {view!r}")
    return (str(view[0]), str(view[1]), int(view[2]))


def extra_view_name_size(env_kwargs: Any) -> tuple[Any, Any]:
    """The ``(name, size)`` of the ``extra_view`` that env options ``env_kwargs`` give, read as given (not checked:
    the env checks it when built, :func:`check_extra_view`): ``name`` is its first item, ``size`` its third when it
    has the three of ``(name, camera, size)``; None for what is not there (no ``extra_view``, or not a list/tuple)."""
    view = env_kwargs.get("extra_view")
    if not isinstance(view, (list, tuple)) or not view:
        return None, None
    return view[0], (view[2] if len(view) == 3 else None)


def checked_action(action: Any, dim: int, out_of_bounds: str) -> np.ndarray:
    """A robosuite-style ``[dx, dy, dz, dax, day, daz, gripper]`` action as float64 ``[dim]`` in [-1, 1]: a wrong shape
    or a non-finite value raises (naming it); components outside [-1, 1] are clipped, or raise with
    ``out_of_bounds="raise"`` (naming each (index, value))."""
    a = np.asarray(action, dtype=np.float64)
    if a.shape != (dim,):
        raise ValueError(f"action must have shape ({dim},) = [dx, dy, dz, dax, day, daz, gripper], got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"action has non-finite values: {a.tolist()}")
    if a.min() < -1 or a.max() > 1:
        if out_of_bounds == "raise":
            bad = [(i, float(v)) for i, v in enumerate(a) if not -1.0 <= v <= 1.0]
            raise ValueError(f"action components {bad} (index, value) are outside the bounds [-1, 1]")
        a = np.clip(a, -1, 1)
    return a

@dataclass(frozen=True)
class TabletopConfig:
    """Options of the built-in tabletop suite (``sims.make("tabletop/<task>", **fields)``).

    image_size: int or (H, W) pixels of every camera image (16..1024; 64-256 typical).
    cameras: names from ``("agentview", "wrist")``; ``()`` disables images (no renderer is created).
    max_steps: control steps per episode before ``truncated`` (>= 1); None: the task's default.
    control_freq: control steps per simulated second (Hz); physics runs ``round(1 / (control_freq *
        timestep))`` substeps of ``timestep`` seconds per control step.
    timestep: MuJoCo physics timestep in seconds.
    max_delta: end-effector displacement target in metres for an action component of 1 (so an action
        ``[dx, dy, dz, g]`` in [-1, 1] asks for at most ``max_delta`` m per axis per step).
    object_state: append object positions (fixed scene order, not by role) to ``obs["state"]``.
    action_out_of_bounds: ``"clip"`` clips actions to [-1, 1]; ``"raise"`` raises ValueError.
        Non-finite actions and wrong shapes always raise.
    reward: ``"sparse"`` (1.0 on the success step, else 0) or ``"dense"`` (the progress measure).
    extra_view: ``(name, camera, size)``: also render ``camera`` at ``size x size`` pixels (16..1024) into
        ``obs["images"][name]`` (``name`` not a camera name), e.g. ``("srpo", "agentview", 64)``: a larger frame
        for SRPO's progress encoder while the policy's cameras keep ``image_size``; ``()``: none.
    """

    image_size: Any = 64
    cameras: tuple[str, ...] = ("agentview",)
    max_steps: int | None = None
    control_freq: float = 20.0
    timestep: float = 0.005
    max_delta: float = 0.03
    object_state: bool = False
    action_out_of_bounds: str = "clip"
    reward: str = "sparse"
    extra_view: tuple = ()  # (name, camera, size): an extra render of camera at size px into images[name]; (): none

    def __post_init__(self) -> None:
        check_common(self)
        object.__setattr__(self, "extra_view", check_extra_view(self.extra_view))
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise ValueError(f"max_steps must be an int >= 1 (or None for the task default), got {self.max_steps!r}")
        if not (isinstance(self.timestep, (int, float)) and 0 < self.timestep <= 0.02):
            raise ValueError(f"timestep must be in (0, 0.02] seconds, got {self.timestep!r}")
        if not (isinstance(self.control_freq, (int, float)) and 0 < self.control_freq <= 1.0 / self.timestep):
            raise ValueError(f"control_freq must be in (0, 1/timestep = {1.0 / self.timestep:g}] Hz, got "
                             f"{self.control_freq!r}")
        if not (isinstance(self.max_delta, (int, float)) and 0 < self.max_delta <= 0.1):
            raise ValueError(f"max_delta must be in (0, 0.1] metres per step, got {self.max_delta!r}")
        if self.reward not in ("sparse", "dense"):
            raise ValueError(f"reward must be 'sparse' or 'dense', got {self.reward!r}")

    @property
    def hw(self) -> tuple[int, int]:
        return _image_hw(self.image_size)

    @property
    def n_substeps(self) -> int:
        return max(1, round(1.0 / (self.control_freq * self.timestep)))

    @classmethod
    def from_kwargs(cls, **kw: Any) -> "TabletopConfig":
        """Build from keyword arguments; unknown keys raise TypeError listing the valid ones."""
        return build(cls, kw)


def build(cls, kw: dict[str, Any]):
    names = {f.name for f in fields(cls)}
    bad = sorted(set(kw) - names)
    if bad:
        raise TypeError(f"unknown {cls.__name__} option(s) {bad}; valid: {sorted(names)}")
    return cls(**kw)
