"""Experiment trackers through their own libraries: TensorBoard, Weights & Biases, MLflow and trackio.

:class:`grpo.metrics.MetricsLogger` (rank 0 only) writes ``metrics.jsonl`` and hands every row, image grid and video
to the backends that ``log.backends`` names (:class:`LogConfig`, the ``log:`` section of every job's config):

============  ==========================================  =========================================  ===============
backend       scalars                                     images / videos                            where
============  ==========================================  =========================================  ===============
tensorboard   ``SummaryWriter.add_scalar``                ``add_image`` / an animated GIF summary    ``<out>/tb``
wandb         ``run.log(row, step=)``                     ``wandb.Image`` / ``wandb.Video(mp4)``     ``<out>/wandb``
mlflow        ``MlflowClient.log_batch`` (``Metric``)     ``log_image(key=, step=)`` / mp4 artifact  the tracking URI
trackio       ``Run.log(row, step=)``                     ``trackio.Image`` / ``trackio.Video(mp4)`` ``$TRACKIO_DIR``
============  ==========================================  =========================================  ===============

The resolved config goes to each (W&B and trackio ``config``, MLflow params + ``config.json``). Each tracker's run id is
kept in ``<out>/trackers.json``; a run started again in the same output directory with ``resume: true`` continues the
same tracker runs (W&B ``id`` + ``resume="allow"``, MLflow's run id, trackio's run name), so a resumed training run is
one tracker run. A backend whose package is not installed is refused when the config is loaded
(:func:`missing_packages`, one line, exit 2, nothing written).

Steps: a run killed between two checkpoints logged rows past the checkpoint it resumes from; ``metrics.jsonl`` and
MLflow keep both copies of those steps, trackio too, W&B keeps the first (it drops steps below its last one).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol

Backend = Literal["tensorboard", "wandb", "mlflow", "trackio"]
BACKENDS: tuple[str, ...] = ("tensorboard", "wandb", "mlflow", "trackio")
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio"}
STATE_FILE = "trackers.json"  # the tracker run ids of an output directory (what a resumed run continues)


@dataclass
class LogConfig:
    # where metrics, images and videos go besides metrics.jsonl (rank 0 only); [] for metrics.jsonl alone
    backends: list[Backend] = field(default_factory=lambda: ["tensorboard"], metadata={
        "help": "trackers besides metrics.jsonl: tensorboard, wandb, mlflow, trackio (rank 0 only; [] for none)"})
    project: str = "branchloop"  # the W&B project, MLflow experiment and trackio project the run goes to
    run_name: str = ""  # the tracker run's display name ("": the output directory's name)
    wandb_mode: Literal["auto", "online", "offline"] = "auto"  # auto: $WANDB_MODE (W&B's default: online); offline:
                                                               # files under <output_dir>/wandb for `wandb sync`
    mlflow_uri: str = ""  # MLflow tracking URI ("": $MLFLOW_TRACKING_URI, else MLflow's default); file://
                          # or a path: the file store

    def __post_init__(self) -> None:
        dup = sorted({b for b in self.backends if list(self.backends).count(b) > 1})
        if dup:
            raise ValueError(f"log.backends names {dup} more than once (expected each of {list(BACKENDS)} at most "
                             "once)")
        if not self.project.strip():
            raise ValueError("log.project must not be empty (the tracker project or experiment the run goes to)")
        if self.mlflow_uri != self.mlflow_uri.strip():  # (was: ' ' passed on to MLflow as a tracking URI)
            raise ValueError(f"log.mlflow_uri={self.mlflow_uri!r}: expected a URI or path without surrounding "
                             "whitespace ('': $MLFLOW_TRACKING_URI, else MLflow's default)")

    def inactive_keys(self, prefix: str = "log") -> dict[str, str]:
        """Keys of this section that no started tracker reads (``prefix.key`` -> why), for
        :func:`grpo.config.check_inactive_keys` (which gathers them from every ``log:`` section of a job's config):
        ``wandb_mode`` without ``wandb`` in ``backends``, ``mlflow_uri`` without ``mlflow``."""
        out: dict[str, str] = {}
        for key, backend in (("wandb_mode", "wandb"), ("mlflow_uri", "mlflow")):
            if backend not in self.backends:  # a setting of a tracker the run does not start
                out[f"{prefix}.{key}"] = (f"{prefix}.backends={list(self.backends)} (it sets up the {backend!r} "
                                          f"tracker: add {backend!r} to {prefix}.backends)")
        return out


def missing_packages(log: LogConfig) -> str | None:
    """One line naming the first backend of ``log.backends`` whose package is not importable, else ``None``."""
    for b in log.backends:
        if importlib.util.find_spec(PACKAGES[b]) is None:
            return (f"log.backends names {b!r}, but the package {PACKAGES[b]!r} is not installed "
                    f"(pip install {PACKAGES[b]}, or pip install -e '.[trackers]' for all of them; or drop it from "
                    "log.backends)")
    return None


class Tracker(Protocol):
    """One backend. Steps are training iterations; arrays are uint8 (``[H, W, 3]`` images, ``[T, H, W, 3]`` videos)."""

    name: str
    run_id: str

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None: ...
    def log_image(self, step: int, tag: str, image, path: Path) -> None: ...
    def log_video(self, step: int, tag: str, frames, path: Path, fps: int) -> None: ...
    def close(self) -> None: ...


def flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists kept as values)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def read_state(logdir: str | Path) -> dict[str, dict]:
    """The tracker run ids saved in ``logdir/trackers.json`` (``{}`` when none)."""
    p = Path(logdir) / STATE_FILE
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}  # a damaged file: new tracker runs (the metrics.jsonl record is unaffected)
    return data if isinstance(data, dict) else {}


def write_state(logdir: str | Path, state: Mapping[str, dict]) -> None:
    p = Path(logdir) / STATE_FILE
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(dict(state), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, p)


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, logdir: Path, **_: Any):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(logdir / "tb"))
        self.run_id = str(logdir / "tb")

    def log_scalars(self, step, scalars):
        for k, v in scalars.items():
            self.writer.add_scalar(k, v, step)

    def log_image(self, step, tag, image, path):
        self.writer.add_image(tag, image, step, dataformats="HWC")

    def log_video(self, step, tag, frames, path, fps):
        """An animated GIF (what ``SummaryWriter.add_video`` writes, encoded with imageio so moviepy is not needed)."""
        self.writer._get_file_writer().add_summary(gif_summary(tag, frames, fps), step)

    def close(self):
        self.writer.close()


def gif_summary(tag: str, frames, fps: int):
    """A TensorBoard image summary holding an animated GIF of ``frames`` (uint8 ``[T, H, W, 3]``)."""
    import imageio.v3 as iio
    from tensorboard.compat.proto.summary_pb2 import Summary

    gif = iio.imwrite("<bytes>", frames, extension=".gif", duration=1000 / max(fps, 1), loop=0)
    t, h, w, c = frames.shape
    return Summary(value=[Summary.Value(tag=tag, image=Summary.Image(height=h, width=w, colorspace=c,
                                                                     encoded_image_string=gif))])


class WandbTracker:
    """``wandb.init(id=, resume="allow")`` with its files under ``<logdir>/wandb``; offline mode writes
    ``wandb/offline-run-*-<id>/run-<id>.wandb`` (``wandb sync`` uploads it later)."""

    name = "wandb"

    def __init__(self, logdir: Path, log: LogConfig, run_name: str, config: Mapping, saved: dict | None, **_: Any):
        import wandb

        kw: dict[str, Any] = {}
        if log.wandb_mode != "auto":
            kw["mode"] = log.wandb_mode
        self.run = wandb.init(project=saved.get("project", log.project) if saved else log.project, name=run_name,
                              id=saved.get("id") if saved else None, resume="allow", dir=str(logdir),
                              config=dict(config), reinit="create_new", settings=wandb.Settings(console="off"), **kw)
        self.run_id = self.run.id
        self.state = {"id": self.run.id, "project": self.run.project}
        self._wandb = wandb

    def log_scalars(self, step, scalars):
        self.run.log(dict(scalars), step=step)

    def log_image(self, step, tag, image, path):
        self.run.log({tag: self._wandb.Image(image)}, step=step)

    def log_video(self, step, tag, frames, path, fps):
        self.run.log({tag: self._wandb.Video(str(path), format="mp4")}, step=step)

    def close(self):
        self.run.finish()


_MLFLOW_BAD = re.compile(r"[^0-9A-Za-z_\-. /]")


def mlflow_key(key: str) -> str:
    """A metric name MLflow accepts (letters, digits, ``_ - . /`` and spaces; anything else becomes ``_``)."""
    return _MLFLOW_BAD.sub("_", key)


class MlflowTracker:
    """``MlflowClient`` on the tracking URI (``log.mlflow_uri``, else ``$MLFLOW_TRACKING_URI``, else MLflow's default);
    the run is created once (params = the flattened config, ``config.json`` artifact) and reopened on resume."""

    name = "mlflow"

    def __init__(self, logdir: Path, log: LogConfig, run_name: str, config: Mapping, saved: dict | None, **_: Any):
        saved = saved or {}
        uri = saved.get("tracking_uri") or log.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
        if uri is not None and (uri.startswith("file:") or "://" not in uri):
            # the file store: MLflow 3 refuses it unless asked (it is in maintenance mode); naming it is asking
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param, RunStatus

        self._metric, self._status = Metric, RunStatus
        self.client = MlflowClient(tracking_uri=uri)
        run = None
        if saved.get("run_id"):
            try:
                run = self.client.get_run(saved["run_id"])
            except Exception:  # the store was removed or moved: a new run  # noqa: BLE001
                run = None
        if run is not None:
            self.client.update_run(run.info.run_id, status="RUNNING")
        else:
            exp = self.client.get_experiment_by_name(log.project)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(log.project)
            run = self.client.create_run(exp_id, run_name=run_name)
            params = [Param(k, str(v)[:6000]) for k, v in flatten(config).items()]
            for i in range(0, len(params), 100):  # log_batch takes at most 100 params
                self.client.log_batch(run.info.run_id, params=params[i:i + 100])
        self.run_id = run.info.run_id
        self.client.log_dict(self.run_id, dict(config), "config.json")
        self.state = {"run_id": self.run_id, "experiment_id": run.info.experiment_id,
                      "tracking_uri": self.client.tracking_uri}

    def log_scalars(self, step, scalars):
        import time

        ms = int(time.time() * 1000)
        metrics = [self._metric(mlflow_key(k), float(v), ms, step) for k, v in scalars.items()]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def log_image(self, step, tag, image, path):
        self.client.log_image(self.run_id, image, key=mlflow_key(tag), step=step)

    def log_video(self, step, tag, frames, path, fps):
        self.client.log_artifact(self.run_id, str(path), "videos")

    def close(self):
        self.client.set_terminated(self.run_id, status=self._status.to_string(self._status.FINISHED))


class TrackioTracker:
    """``trackio.init(project, name, resume="allow")`` in trackio's local store (``$TRACKIO_DIR``, else
    ``$HF_HOME/trackio``; ``trackio show`` opens it); its run id is the run name."""

    name = "trackio"

    def __init__(self, logdir: Path, log: LogConfig, run_name: str, config: Mapping, saved: dict | None, **_: Any):
        import trackio

        saved = saved or {}
        project = saved.get("project", log.project)
        name = saved.get("run", run_name)
        self.run = trackio.init(project=project, name=name, config=dict(config),
                                resume="allow" if saved.get("run") else "never", embed=False, auto_log_gpu=False)
        self.run_id = self.run.name
        self.state = {"project": project, "run": self.run.name}
        self._trackio = trackio

    def log_scalars(self, step, scalars):
        self.run.log(dict(scalars), step=step)

    def log_image(self, step, tag, image, path):
        self.run.log({tag: self._trackio.Image(image)}, step=step)

    def log_video(self, step, tag, frames, path, fps):
        self.run.log({tag: self._trackio.Video(str(path))}, step=step)

    def close(self):
        from trackio import context_vars

        self.run.finish()
        if context_vars.current_run.get() is self.run:  # finished: trackio's exit hook need not finish it again
            context_vars.current_run.set(None)


TRACKERS = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker, "mlflow": MlflowTracker,
            "trackio": TrackioTracker}


def open_trackers(logdir: str | Path, log: LogConfig, config: Mapping | None, resume: bool = True) -> list[Tracker]:
    """Start (or, with ``resume`` and a saved id in ``logdir/trackers.json``, continue) one run per backend of
    ``log.backends``; saves their ids. A backend that cannot start raises ``ValueError`` naming it (one line)."""
    logdir = Path(logdir)
    saved = read_state(logdir) if resume else {}
    state = dict(read_state(logdir))
    run_name = log.run_name or logdir.resolve().name
    out: list[Tracker] = []
    try:
        for b in log.backends:
            try:
                tr = TRACKERS[b](logdir=logdir, log=log, run_name=run_name, config=dict(config or {}),
                                 saved=saved.get(b))
            except ImportError as e:
                raise ValueError(missing_packages(LogConfig(backends=[b])) or f"log.backends: {b}: {e}") from e
            except Exception as e:  # the library's own failure (no login, unreachable server): one line naming it
                raise ValueError(f"log.backends: {b} could not start its run: {type(e).__name__}: "
                                 f"{' '.join(str(e).split())[:400]}") from e
            out.append(tr)
            if hasattr(tr, "state"):
                state[b] = tr.state
    except BaseException:
        for tr in out:
            tr.close()
        raise
    if any(b != "tensorboard" for b in log.backends):
        write_state(logdir, state)
        print("trackers: " + ", ".join(f"{t.name} run {t.run_id}" for t in out if t.name != "tensorboard"), flush=True)
    return out
