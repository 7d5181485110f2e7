"""The world model's training windows and the success head's per-frame samples, as named batches.

Window ``w`` of an episode (frames ``uint8 [T+1, 3, H, W]``, frame ``t`` the observation before action ``t``; the
first frame is repeated ``context_frames - 1`` times with zero actions so that a rollout can start from a single
real observation) is a :class:`WindowBatch` row::

    context  [Tc, 3, H, W]   the context frames            actions  [K, A]   the action chunk after them
    future   [K, 3, H, W]    the frames the chunk produced success  [K]      the simulator's flag at those frames
    text     [text_dim]      instruction features (or None)
    state    [K, D]          the simulator state at the future frames (state-aware success head; or None)
    ref      [3, H, W]       the episode's first real frame (the head's instruction grounding; or None)

floats in [0, 1]. :class:`WindowSet` cuts them per batch from the uint8 trajectories (what the loop trains on),
:func:`wm_windows` materializes them all; both offer ``len``, ``take(idx) -> WindowBatch``, ``future_states()``
and ``frame_samples()``, and so does a :class:`WindowBatch` itself.

The success head learns per frame: a :class:`FrameBatch` row is ``frames [3, H, W]``, the action that produced
it ``actions [A]``, its label ``labels`` (success) and the same ``text`` / ``state [D]`` / ``ref`` entries.
:func:`success_samples` flattens windows into them (window-major, then the ``K`` future frames),
:class:`FrameSamples` stores the entries that repeat an episode's value once per episode, and
``WindowSet.frame_samples()`` cuts them from the trajectories; all three give ``labels`` and ``take(idx)``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from .data import Trajectories


def instruction_features(texts, dim: int) -> torch.Tensor:
    """Hashed bag of words ``[B, dim]`` (crc32 of each lower-cased word, L2-normalized): enough for the success
    head to know *which* object the instruction names without a text encoder."""
    out = torch.zeros(len(texts), dim, device="cpu")
    for i, t in enumerate(texts):
        for w in str(t).lower().split():
            out[i, zlib.crc32(w.encode()) % dim] += 1.0
    return F.normalize(out, dim=-1) if dim else out


def _entries(batch) -> list[torch.Tensor | None]:
    return [getattr(batch, f.name) for f in fields(batch)]


def _check_rows(batch) -> None:
    n = {f.name: int(v.shape[0]) for f, v in zip(fields(batch), _entries(batch)) if v is not None}
    if len(set(n.values())) > 1:
        raise ValueError(f"{type(batch).__name__} entries must share their leading dim, got {n}")


@dataclass
class WindowBatch:
    """Windows of the world model (module docstring): ``W`` rows of every entry, None where absent."""

    context: torch.Tensor  # [W, Tc, 3, H, W] in [0, 1]
    actions: torch.Tensor  # [W, K, A]
    future: torch.Tensor  # [W, K, 3, H, W] in [0, 1]
    success: torch.Tensor  # [W, K]
    text: torch.Tensor | None = None  # [W, text_dim] instruction features
    state: torch.Tensor | None = None  # [W, K, D] the state at the future frames
    ref: torch.Tensor | None = None  # [W, 3, H, W] the episode's first real frame

    def __post_init__(self) -> None:
        _check_rows(self)

    def __len__(self) -> int:
        return int(self.context.shape[0])

    def take(self, idx) -> "WindowBatch":
        """Rows ``idx`` ``[B]`` of every entry."""
        return WindowBatch(*(None if x is None else x[idx] for x in _entries(self)))

    def future_states(self) -> torch.Tensor | None:
        return self.state

    def frame_samples(self) -> "FrameBatch":
        """The success head's per-frame samples of these windows (:func:`success_samples`)."""
        return success_samples(self.future, self.actions, self.success, self.text, self.state, self.ref)


@dataclass
class FrameBatch:
    """Per-frame samples of the success head (module docstring): ``M`` rows of every entry, None where absent."""

    frames: torch.Tensor  # [M, 3, H, W] in [0, 1]
    actions: torch.Tensor  # [M, A] the action that produced the frame
    labels: torch.Tensor  # [M] success at that frame
    text: torch.Tensor | None = None  # [M, text_dim]
    state: torch.Tensor | None = None  # [M, D]
    ref: torch.Tensor | None = None  # [M, 3, H, W]

    def __post_init__(self) -> None:
        _check_rows(self)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def take(self, idx) -> "FrameBatch":
        return FrameBatch(*(None if x is None else x[idx] for x in _entries(self)))


def success_samples(frames: torch.Tensor, actions: torch.Tensor, success: torch.Tensor,
                    text: torch.Tensor | None = None, state: torch.Tensor | None = None,
                    ref: torch.Tensor | None = None) -> FrameBatch:
    """Flatten per-step data into the success head's samples: ``frames[N, K, 3, H, W]`` in [0, 1], the actions
    that produced them ``actions[N, K, A]``, labels ``success[N, K]`` (and instruction features ``text[N, D]``, the
    state at each frame ``state[N, K, S]``, the episodes' first real frames ``ref[N, 3, H, W]``) -> a
    :class:`FrameBatch` of ``N*K`` rows (window-major)."""
    n, k = frames.shape[:2]
    if actions.shape[:2] != (n, k) or success.shape != (n, k) or (state is not None and state.shape[:2] != (n, k)):
        raise ValueError(f"frames {tuple(frames.shape)}, actions {tuple(actions.shape)}, success "
                         f"{tuple(success.shape)} (and state) must share the leading [N, K]")
    return FrameBatch(frames.flatten(0, 1), actions.flatten(0, 1).float(), success.flatten().float(),
                      None if text is None else text.repeat_interleave(k, 0),
                      None if state is None else state.flatten(0, 1).float(),
                      None if ref is None else ref.repeat_interleave(k, 0))


class FrameSamples:
    """Per-frame samples whose ``text`` and ``ref`` (values that only repeat an episode's) are stored once per episode:
    ``per_episode[name]`` holds ``[N, ...]`` rows and sample ``i`` reads row ``episode[i]``. For ``R`` imagined rollouts
    of ``N`` episodes at 128 px that saves ``R * N * T`` frames (4.5 GB for 288 episodes of 80 steps).

    ``samples``: the per-sample entries (a :class:`FrameBatch`; its ``text`` / ``ref`` are None when stored per
    episode). ``labels``, ``len`` and ``take(idx) -> FrameBatch`` (which builds only the rows asked for) as a
    :class:`FrameBatch`; :meth:`materialize` gives every row."""

    def __init__(self, samples: FrameBatch, per_episode: dict[str, torch.Tensor | None] | None = None,
                 episode: torch.Tensor | None = None):
        self.samples = samples
        self.per_episode = {k: v for k, v in (per_episode or {}).items() if v is not None}
        bad = sorted(set(self.per_episode) - {"text", "ref"})
        if bad:
            raise ValueError(f"per-episode entries can be 'text' and 'ref', got {bad}")
        if self.per_episode and (episode is None or episode.shape[0] != len(samples)):
            raise ValueError("per-episode entries need the episode index of every sample")
        self.episode = episode
        self.labels = samples.labels

    def __len__(self) -> int:
        return len(self.samples)

    def take(self, idx) -> FrameBatch:
        """Samples ``idx`` ``[B]``."""
        out = self.samples.take(idx)
        for name, rows in self.per_episode.items():
            setattr(out, name, rows[self.episode[idx]])
        return out

    def materialize(self) -> FrameBatch:
        return self.take(torch.arange(len(self), device="cpu"))


def wm_windows(data: Trajectories, context_frames: int, chunk: int, stride: int = 1, text_dim: int = 0,
               state: bool = False) -> WindowBatch:
    """Every window at once (module docstring): ``text`` with ``text_dim > 0``, ``state`` and ``ref`` with
    ``state=True``.

    Materialized: ``(Tc + K + 1)`` float frames per window. :class:`WindowSet` (the same windows, cut per batch)
    is what the loop trains on."""
    return WindowSet(data, context_frames, chunk, stride, text_dim, state).materialize()


class WindowSet:
    """:func:`wm_windows` without the copy: windows cut on the fly from the trajectories' uint8 frames.

    Window ``w`` is the ``w``-th of :func:`wm_windows`' order (start-major, episodes inner, every ``stride``-th
    start), and ``take(idx)`` returns exactly ``wm_windows(...).take(idx)``: the same floats, so training on either
    draws the same batches. Memory is the trajectories' (uint8 frames, ``T+1`` per episode) instead of
    ``(context + chunk + 1)`` float frames per window: at 128 px with context 2 and chunk 4, 1.4 MB a window,
    ~31 GB for loop_robosuite_lift.yaml's 288 episodes, against ~1.1 GB of episodes.

    In padded time (the first frame repeated ``pad = context_frames - 1`` times, zero actions before it), the
    window starting at ``s`` holds context frames ``s .. s+Tc-1``, actions ``s+Tc-1 .. s+Tc+K-2`` and future
    frames / success / state ``s+Tc .. s+Tc+K-1``; in the episode's own time that is frames ``max(s+i-pad, 0)``,
    actions ``s .. s+K-1`` and futures ``s+1 .. s+K``.

    :meth:`frame_samples` gives the success head's per-frame samples of these windows (``success_samples``'
    order: window-major, then the ``K`` future frames), also without copying."""

    def __init__(self, data: Trajectories, context_frames: int, chunk: int, stride: int = 1, text_dim: int = 0,
                 state: bool = False):
        st = data.state
        if state and (st is None or st.dim() != 3 or st.shape[-1] == 0):
            raise ValueError("state=True needs trajectories with a state [N, T+1, D] (D > 0)")
        if context_frames < 1 or chunk < 1 or stride < 1:
            raise ValueError(f"need context_frames, chunk, stride >= 1, got {context_frames}, {chunk}, {stride}")
        n, t1 = data.frames.shape[:2]
        if data.actions.shape[:2] != (n, t1 - 1) or data.success.shape != (n, t1):
            raise ValueError(f"expected actions [N={n}, T={t1 - 1}, A] and success [N, T+1={t1}], got "
                             f"{tuple(data.actions.shape)}, {tuple(data.success.shape)}")
        self.data, self.tc, self.k, self.with_state = data, context_frames, chunk, state
        n_starts = t1 - chunk  # padded length (t1 + Tc - 1) minus the window (Tc + K), plus 1
        if n_starts < 1:
            raise ValueError(f"trajectories of {t1} frames are too short for {context_frames} context + {chunk} "
                             "future frames")
        starts = torch.arange(0, n_starts, stride, device="cpu")
        self._start = starts.repeat_interleave(n)  # [W] padded start of each window
        self._episode = torch.arange(n, device="cpu").repeat(len(starts))  # [W]
        self.text = instruction_features(data.instructions, text_dim) if text_dim else None  # [N, text_dim]

    def __len__(self) -> int:
        return int(self._episode.shape[0])

    def _index(self, idx) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Episode ``[B]``, context frame indices ``[B, Tc]``, action indices ``[B, K]``, future indices ``[B, K]``."""
        idx = torch.as_tensor(idx, dtype=torch.long, device="cpu")
        e, s = self._episode[idx], self._start[idx]
        pad = self.tc - 1
        ctx_t = (s[:, None] + torch.arange(self.tc, device="cpu") - pad).clamp_min(0)
        act_t = s[:, None] + torch.arange(self.k, device="cpu")
        return e, ctx_t, act_t, act_t + 1

    def take(self, idx) -> WindowBatch:
        """Windows ``idx`` (``[B]``), as ``wm_windows(...).take(idx)``."""
        d = self.data
        e, ctx_t, act_t, fut_t = self._index(idx)
        ep = e[:, None]
        st = self.with_state
        return WindowBatch(d.frames[ep, ctx_t].float() / 255.0, d.actions[ep, act_t],
                           d.frames[ep, fut_t].float() / 255.0,
                           d.success[ep, fut_t], None if self.text is None else self.text[e],
                           d.state[ep, fut_t].float() if st else None, d.frames[e, 0].float() / 255.0 if st else None)

    def materialize(self) -> WindowBatch:
        """Every window at once (what :func:`wm_windows` returns)."""
        return self.take(torch.arange(len(self), device="cpu"))

    def future_states(self) -> torch.Tensor | None:
        """The state at every window's future frames ``[W, K, D]`` (small: fits a state-aware head's normalizer;
        None without ``state``)."""
        if not self.with_state:
            return None
        e, _, _, fut_t = self._index(torch.arange(len(self), device="cpu"))
        return self.data.state[e[:, None], fut_t].float()

    def frame_samples(self) -> "WindowFrames":
        return WindowFrames(self)


class WindowFrames:
    """The success head's samples of a :class:`WindowSet`: sample ``j`` is future frame ``j % K`` of window
    ``j // K`` with the action that produced it, its success label (and text, state, first real frame), as
    ``wm_windows(...).frame_samples()`` would flatten them. ``labels``: all ``W*K`` labels (for class weights)."""

    def __init__(self, windows: WindowSet):
        self.w = windows
        e, _, f_t = self._at(torch.arange(len(windows) * windows.k, device="cpu"))
        self.labels = windows.data.success[e, f_t].float()

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def _at(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample ``idx`` -> (episode, action index, future frame index), each ``[B]``: sample ``j`` of window ``w``
        (padded start ``s``) is the frame after action ``s + j``."""
        w, j = idx // self.w.k, idx % self.w.k
        a_t = self.w._start[w] + j
        return self.w._episode[w], a_t, a_t + 1

    def take(self, idx) -> FrameBatch:
        """Samples ``idx`` ``[B]``."""
        e, a_t, f_t = self._at(torch.as_tensor(idx, dtype=torch.long, device="cpu"))
        d = self.w.data
        st = self.w.with_state
        return FrameBatch(d.frames[e, f_t].float() / 255.0, d.actions[e, a_t].float(), d.success[e, f_t].float(),
                          None if self.w.text is None else self.w.text[e], d.state[e, f_t].float() if st else None,
                          d.frames[e, 0].float() / 255.0 if st else None)
