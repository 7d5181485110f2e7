"""log.backends end to end with the real tracker packages, offline: the toy GRPO run (``diffusion-rl toy``) logs to
TensorBoard, W&B (offline mode), MLflow (the local file store) and trackio (its local store); what each tracker's own
reader gives back equals metrics.jsonl, a resumed run continues the same tracker runs, and rank != 0 logs nothing.

The trackers' directories are set by tests/conftest.py (under the session's tmp home) and per test below."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from diffusion_rl.cli import main as cli
from grpo.metrics import MetricsLogger, read_jsonl
from grpo.trackers import LogConfig, mlflow_key, read_state

from ..torchrun_util import torchrun

ROOT = Path(__file__).resolve().parents[2]
ALL = ["tensorboard", "wandb", "mlflow", "trackio"]
TOY = ["model.pretrain_steps=30", "train.eval_samples=16", "grpo.group_size=4", "train.prompts_per_iter=2",
       "train.inner_epochs=1", "model.hidden=32"]


@pytest.fixture
def trackers_env(tmp_path, monkeypatch):
    """Every tracker's files under ``tmp_path``, offline, no telemetry; returns the project name for this test."""
    import trackio.utils

    assert Path(trackio.utils.TRACKIO_DIR).resolve().is_relative_to(Path(__import__("tempfile").gettempdir()).resolve())
    monkeypatch.setenv("WANDB_MODE", "offline")
    for k in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(k, str(tmp_path / k.lower()))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file://{tmp_path / 'mlruns'}")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # this test's own MlflowClient reads the file store
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "600")  # W&B's service starts slowly on 2 busy cores (default 90 s)
    return f"p_{tmp_path.name}"  # trackio's store is one per process (conftest): a project of this test's own


def wandb_records(path: Path):
    """The protobuf records of a W&B run file (``run-<id>.wandb``): its LevelDB-log framing (a 7-byte ``:W&B`` header,
    32 KiB blocks of chunks, each ``crc32 u32 | length u16 | type u8``: full, first, middle, last) around
    ``wandb.proto.wandb_internal_pb2.Record`` messages."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    ident, magic, _ = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, (ident, magic)
    pos, buf, block = 7, b"", 32768
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if n == 0 and kind == 0:
            pos += left
            continue
        buf += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # full or last: one record
            rec = pb.Record()
            rec.ParseFromString(buf)
            buf = b""
            yield rec


def wandb_history(run_dir: Path, run_id: str) -> tuple[dict[int, dict], list[dict], set[str]]:
    """``({step: {key: value}}, configs, run ids)`` over every offline segment of the run (one per start)."""
    steps: dict[int, dict] = {}
    configs, ids = [], set()
    files = sorted(run_dir.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert files, list(run_dir.glob("wandb/*"))
    for f in files:
        for rec in wandb_records(f):
            kind = rec.WhichOneof("record_type")
            if kind == "run":
                ids.add(rec.run.run_id)
                configs.append({u.key: json.loads(u.value_json) for u in rec.run.config.update})
            elif kind == "history":
                row = steps.setdefault(rec.history.step.num, {})
                for it in rec.history.item:
                    key = "/".join(it.nested_key) if it.nested_key else it.key
                    if not key.startswith("_"):
                        row[key] = json.loads(it.value_json)
    return steps, configs, ids


def jsonl_by_step(out: Path) -> dict[int, dict]:
    """metrics.jsonl's scalars per step (rows of one step merged, as the trackers merge them)."""
    rows: dict[int, dict] = {}
    for r in read_jsonl(out / "metrics.jsonl"):
        rows.setdefault(r["step"], {}).update({k: v for k, v in r.items() if k not in ("step", "time")})
    return rows


def mlflow_by_step(uri: str, run_id: str, keys) -> dict[int, dict]:
    from mlflow import MlflowClient

    c = MlflowClient(tracking_uri=uri)
    rows: dict[int, dict] = {}
    for k in keys:
        for m in c.get_metric_history(run_id, mlflow_key(k)):
            rows.setdefault(m.step, {})[k] = m.value
    return rows


def trackio_by_step(project: str, run: str) -> dict[int, dict]:
    from trackio.sqlite_storage import SQLiteStorage

    rows: dict[int, dict] = {}
    for r in SQLiteStorage.get_logs(project, run):
        rows.setdefault(r["step"], {}).update({k: v for k, v in r.items() if k not in ("step", "timestamp")})
    return rows


def tensorboard_by_step(out: Path) -> dict[int, dict]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ev = EventAccumulator(str(out / "tb"), size_guidance={"scalars": 0}).Reload()
    rows: dict[int, dict] = {}
    for tag in ev.Tags()["scalars"]:
        for e in ev.Scalars(tag):
            rows.setdefault(e.step, {})[tag] = e.value
    return rows


def toy(out: Path, project: str, iterations: int, *extra: str) -> int:
    return cli(["toy", str(ROOT / "configs/grpo/toy_flow.yaml"), f"output_dir={out}", f"train.iterations={iterations}",
                f"log.backends={json.dumps(ALL)}", f"log.project={project}", *TOY, *extra])


def check_all_equal_jsonl(out: Path, project: str, state: dict, n_steps: int) -> None:
    want = jsonl_by_step(out)
    assert sorted(want) == list(range(1, n_steps + 1))
    keys = sorted({k for row in want.values() for k in row})
    got_wandb, _, ids = wandb_history(out, state["wandb"]["id"])
    assert ids == {state["wandb"]["id"]}
    assert got_wandb == want
    assert mlflow_by_step(state["mlflow"]["tracking_uri"], state["mlflow"]["run_id"], keys) == want
    assert trackio_by_step(project, state["trackio"]["run"]) == want
    tb = tensorboard_by_step(out)  # float32 in the event file
    assert sorted(tb) == sorted(want)
    for s in want:
        assert tb[s] == pytest.approx(want[s], rel=1e-6, abs=1e-30)


def test_toy_run_logs_the_same_values_to_every_tracker_and_resumes_the_same_runs(tmp_path, trackers_env):
    out, project = tmp_path / "run", trackers_env
    assert toy(out, project, 2) == 0
    state = read_state(out)
    assert sorted(state) == ["mlflow", "trackio", "wandb"]
    check_all_equal_jsonl(out, project, state, 2)

    # the config reached each tracker
    from mlflow import MlflowClient

    mc = MlflowClient(tracking_uri=state["mlflow"]["tracking_uri"])
    run = mc.get_run(state["mlflow"]["run_id"])
    assert run.data.params["train.iterations"] == "2" and run.data.params["log.project"] == project
    assert mc.download_artifacts(run.info.run_id, "config.json", str(tmp_path / "dl"))
    assert json.loads((tmp_path / "dl" / "config.json").read_text())["output_dir"] == str(out)
    _, configs, _ = wandb_history(out, state["wandb"]["id"])
    assert configs[0]["train"]["iterations"] == 2 and configs[0]["seed"] == 0
    from trackio.sqlite_storage import SQLiteStorage

    assert SQLiteStorage.get_run_config(project, state["trackio"]["run"])["grpo"]["group_size"] == 4

    # resumed (2 more iterations, from the checkpoint at 2): the same tracker runs carry on
    assert toy(out, project, 4) == 0
    assert read_state(out) == state
    check_all_equal_jsonl(out, project, state, 4)
    assert len(list(out.glob(f"wandb/offline-run-*-{state['wandb']['id']}"))) == 2  # two starts, one run id
    exp = mc.get_experiment_by_name(project)
    assert [r.info.run_id for r in mc.search_runs([exp.experiment_id])] == [state["mlflow"]["run_id"]]
    assert mc.get_run(state["mlflow"]["run_id"]).info.status == "FINISHED"
    assert SQLiteStorage.get_runs(project) == [state["trackio"]["run"]]


def test_images_and_videos_reach_every_tracker(tmp_path, trackers_env):
    project = trackers_env
    log = MetricsLogger(tmp_path, config={"seed": 0}, log=LogConfig(backends=ALL, project=project))
    images = torch.zeros(4, 3, 8, 8)
    images[:, 0] = 1.0  # red tiles
    frames = torch.zeros(5, 3, 8, 12)
    for t in range(5):
        frames[t, t % 3, :, : 2 * (t + 1)] = 1.0
    log.log(1, {"reward/mean": 0.25})
    png = log.log_images(2, "samples/after", images, nrow=2)
    mp4 = log.log_video(3, "rollouts/final", frames, fps=5)
    log.close()
    state = read_state(tmp_path)
    # W&B: an image-file at step 2, a video-file at step 3, the files beside the run
    steps, _, _ = wandb_history(tmp_path, state["wandb"]["id"])
    (seg,) = tmp_path.glob(f"wandb/offline-run-*-{state['wandb']['id']}")
    img, vid = steps[2]["samples/after/path"], steps[3]["rollouts/final/path"]
    assert steps[2]["samples/after/_type"] == "image-file" and steps[3]["rollouts/final/_type"] == "video-file"
    import imageio.v3 as iio

    assert np.array_equal(iio.imread(seg / "files" / img)[..., :3], iio.imread(png))
    assert (seg / "files" / vid).read_bytes() == mp4.read_bytes()
    # MLflow: the image under images/ (with its step), the video under videos/
    from mlflow import MlflowClient

    mc = MlflowClient(tracking_uri=state["mlflow"]["tracking_uri"])
    names = [a.path for a in mc.list_artifacts(state["mlflow"]["run_id"], "images")]
    assert any(n.startswith("images/samples~after+step+2+") and n.endswith(".png") for n in names), names
    assert [a.path for a in mc.list_artifacts(state["mlflow"]["run_id"], "videos")] == [f"videos/{mp4.name}"]
    # trackio: image and video entries whose files are in its media folder
    import trackio.utils

    rows = trackio_by_step(project, state["trackio"]["run"])
    ti, tv = rows[2]["samples/after"], rows[3]["rollouts/final"]
    assert ti["_type"] == "trackio.image" and tv["_type"] == "trackio.video"
    assert np.array_equal(iio.imread(Path(trackio.utils.MEDIA_DIR) / ti["file_path"])[..., :3], iio.imread(png))
    assert (Path(trackio.utils.MEDIA_DIR) / tv["file_path"]).read_bytes() == mp4.read_bytes()
    # TensorBoard: the grid and the animated GIF
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ev = EventAccumulator(str(tmp_path / "tb"), size_guidance={"images": 0}).Reload()
    assert [e.step for e in ev.Images("samples/after")] == [2] and [e.step for e in ev.Images("rollouts/final")] == [3]


def test_rank_other_than_zero_logs_nothing(tmp_path, trackers_env):
    """A non-main rank's logger (``enabled=False``, what every trainer passes there) opens no tracker run."""
    project = trackers_env
    log = MetricsLogger(tmp_path / "rank1", enabled=False, config={"seed": 0},
                        log=LogConfig(backends=ALL, project=project))
    log.log(1, {"reward/mean": 0.5})
    log.log_images(1, "samples/after", torch.zeros(1, 3, 4, 4))
    log.log_video(1, "rollouts/final", torch.zeros(2, 3, 4, 4))
    log.close()
    from trackio.sqlite_storage import SQLiteStorage

    assert not (tmp_path / "rank1").exists() and not (tmp_path / "wandb_dir").exists()
    assert not (tmp_path / "mlruns").exists() and project not in SQLiteStorage.get_projects()


def test_two_ranks_make_one_tracker_run_each(tmp_path, trackers_env):
    """The toy run on 2 processes (torchrun): rank 0 alone logs; each tracker holds one run equal to metrics.jsonl."""
    import os
    import subprocess

    out, project = tmp_path / "two", trackers_env
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    cmd = [*torchrun(2), "-m", "diffusion_rl.cli", "toy",
           str(ROOT / "configs/grpo/toy_flow.yaml"), f"output_dir={out}", "train.iterations=2",
           f"log.backends={json.dumps(ALL)}", f"log.project={project}", *TOY]
    res = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert (res.stdout + res.stderr).count("trackers: wandb run") == 1  # printed by the one rank that opened them
    state = read_state(out)
    check_all_equal_jsonl(out, project, state, 2)
    assert len(list(out.glob("wandb/offline-run-*"))) == 1
    from mlflow import MlflowClient
    from trackio.sqlite_storage import SQLiteStorage

    mc = MlflowClient(tracking_uri=state["mlflow"]["tracking_uri"])
    assert len(mc.search_runs([mc.get_experiment_by_name(project).experiment_id])) == 1
    assert SQLiteStorage.get_runs(project) == [state["trackio"]["run"]]


def test_a_backend_whose_package_is_missing_is_one_line_at_config_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # what importlib sees when the package is not installed
    out = tmp_path / "run"
    rc = cli(["toy", str(ROOT / "configs/grpo/toy_flow.yaml"), f"output_dir={out}",
              "log.backends=[tensorboard,mlflow]"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert "log.backends names 'mlflow', but the package 'mlflow' is not installed" in err, err
    assert not out.exists()


def test_backend_names_are_checked_by_the_config_loader(tmp_path, capsys):
    for bad, why in (("[comet]", "'log.backends[0]' expects one of 'tensorboard', 'wandb', 'mlflow', 'trackio'"),
                     ("[wandb,wandb]", "log.backends names ['wandb'] more than once")):
        rc = cli(["toy", str(ROOT / "configs/grpo/toy_flow.yaml"), f"output_dir={tmp_path / 'run'}",
                  f"log.backends={bad}"])
        err = capsys.readouterr().err
        assert rc == 2 and why in err, err
    assert not (tmp_path / "run").exists()
