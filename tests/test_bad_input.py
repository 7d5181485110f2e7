"""The bad-input battery (issue 22): every CLI subcommand, fed a bad input, must print exactly one error line on stderr
naming the bad key/value/path and what was expected, exit non-zero, print no traceback, and leave the run directory
byte-for-byte as it was (tree + SHA-256 of every file).

Cases that the config loader catches run with ``--dry-run``; the others (unwritable output directory, corrupt
checkpoint on resume, misbehaving custom reward, demo file of the wrong action size) run the command for real with
tiny overrides and must stop before the first expensive step.

Most cases call the CLI's ``main(argv)`` in this process (its return value or ``SystemExit`` code is the exit code;
stderr is captured at the file descriptor, and every Python warning or WARNING log record the command emits counts
as a line of it, as it would in a fresh interpreter; an uncaught exception fails the test with its traceback). The
cases in :data:`SUBPROCESS` (one per subcommand, and every case that imports robosuite / LIBERO, whose imports print)
run the real entry point, ``python -m <cli>``, in a subprocess: each of those pays the interpreter + torch start
(~3 s), which the in-process cases do not."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
D_CFG = "configs/diffusion/tiny_sd3_flat.yaml"
V_CFG = "configs/vla/tabletop_reach.yaml"
L_CFG = "configs/world_models/loop_reach_one.yaml"
ALIAS_BOMB = "&l0 [a, a, a, a, a, a, a, a, a]"  # nine nested lists of nine aliases: 9^9 values (YAML's billion laughs)
for _i in range(1, 9):
    ALIAS_BOMB = f"&l{_i} [{ALIAS_BOMB}" + f", *l{_i - 1}" * 8 + "]"
T_CFG = "configs/grpo/toy_flow.yaml"
FE_CFG = "configs/vla/fit_progress_encoder.yaml"
D_TINY = ["train.iterations=1", "grpo.group_size=2", "sampler.num_steps=2", "train.prompts_per_iter=1",
          "prompts.num_eval=1", "train.eval_steps=2", "train.log_images=false"]
V_TINY = ["env.max_episode_steps=8", "env.kwargs={image_size: 32}", "policy.image_size=32", "policy.ctx_dim=32",
          "policy.flow.hidden=32", "policy.flow.num_steps=2", "sft.demos_per_task=1", "sft.steps=2", "sft.batch_size=4",
          "rl.groups_per_task=1", "rl.eval_episodes=1", "rl.iterations=1", "rl.num_videos=0", "rl.reward=binary",
          "grpo.group_size=2"]


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` -> SHA-256 of its bytes (``dir`` / ``link:<target>`` for the others)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = f"link:{os.readlink(p)}"
        elif p.is_dir():
            out[rel] = "dir"
        elif not p.is_file():  # a FIFO (reading it would block)
            out[rel] = "special"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run_cli(module: str, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_in_process(module: str, args: list[str], capfd, caplog, monkeypatch) -> subprocess.CompletedProcess:
    """``module.main(args)`` here, as ``python -m module`` would run it from the checkout: the exit code (its return
    value, or the code of a ``SystemExit``: argparse's errors), stdout and stderr (captured at the file descriptor).
    Python warnings under the interpreter's default filters (what a fresh process prints) and log records of WARNING
    and above (what logging's last-resort handler prints) are appended to stderr, one line each."""
    main = importlib.import_module(module).main
    monkeypatch.chdir(REPO)
    capfd.readouterr()
    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for cat in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", cat)
        try:
            rc = main(list(args))
        except SystemExit as e:  # what the interpreter does with it
            rc = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
    out, err = capfd.readouterr()
    err += "".join(f"{w.category.__name__}: {w.message}\n" for w in caught)
    err += "".join(f"{r.levelname}: {r.getMessage()}\n" for r in caplog.records if r.levelno >= logging.WARNING)
    return subprocess.CompletedProcess([module, *args], rc, out, err)


# ---- fixtures that real-run cases need --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A regular file (an output directory under it cannot be created, even by root), a YAML with a syntax error on
    line 4, one tiny diffusion run and one tiny VLA run with checkpoints, and a demo file."""
    a = tmp_path_factory.mktemp("assets")
    (a / "a_file").write_text("not a directory\n")
    (a / "binary.txt").write_bytes(b"\xff\xfe\x00prompts")
    (a / "junk.safetensors").write_bytes(bytes(range(200)))
    (a / "old.hdf5").write_bytes(b"an earlier output\n")
    (a / "old.html").write_bytes(b"<p>an earlier report</p>\n")
    (a / "old.safetensors").write_bytes(b"an earlier encoder file\n")
    (a / "broken.yaml").write_text("seed: 0\nmodel:\n  kind: sd3\n  height: [16\nreward: {name: x}\n")
    (a / "empty.yaml").write_text("")
    (a / "prev_export").mkdir()
    (a / "prev_export" / "export.json").write_text("{}\n")
    (a / "a_dir.yaml").mkdir()
    (a / "dmg.ckpt" / "step_000001").mkdir(parents=True)  # pretrain-shapes' resumable state, damaged
    (a / "dmg.ckpt" / "step_000001" / "state.json").write_text('{"step": 1, "sta')
    (a / "dup.yaml").write_text((REPO / D_CFG).read_text() + "train: {iterations: 2}\n")  # a second train: section
    (a / "metrics_only").mkdir()
    (a / "metrics_only" / "metrics.jsonl").write_text('{"step": 0, "time": 0.0, "reward/mean": 0.1}\n')
    (a / "junk.hdf5").write_bytes(b"not an HDF5 file\n" * 10)
    import h5py

    with h5py.File(a / "zero_demos.hdf5", "w") as f:  # a demo file with no demos in it
        f.create_group("data")
    (a / "metrics_empty").mkdir()
    (a / "metrics_empty" / "metrics.jsonl").write_text("")
    # the fourth sweep's files: YAML that is not a mapping / of another encoding, metrics rows of the wrong shape,
    # a JSON and a safetensors file that are not what the command reads
    (a / "list.yaml").write_text("- seed\n- train\n")
    (a / "scalar.yaml").write_text("just a sentence\n")
    (a / "intkeys.yaml").write_text("1: 2\n")
    (a / "nested_dup.yaml").write_text("seed: 0\ntrain:\n  lr: 0.1\n  lr: 0.2\n")
    (a / "latin1.yaml").write_bytes("seed: 0\nlog: {run_name: caf\u00e9}\n".encode("latin-1"))
    (a / "tabs.yaml").write_text("seed: 0\ntrain:\n\tlr: 0.1\n")
    (a / "nul.yaml").write_text('seed: 0\nreward: {name: "shapes\\0verifier"}\n')  # a NUL byte in a string
    (a / "blank.txt").write_text("\n  \n")
    (a / "prompts_obj.json").write_text('{"prompts": ["a red circle"]}')
    (a / "wrongshape.json").write_text('{"step": [1, 2]}')
    (a / "empty_dir").mkdir()
    (a / "adir.html").mkdir()
    for name, rows in (("metrics_list", "[1, 2]\n"),
                       ("metrics_badjson", '{"step": 0, "reward/mean": 0.1}\n{oops\n{"step": 1, "reward/mean": 0.2}\n'),
                       ("metrics_nostep", '{"reward/mean": 0.1}\n'),
                       ("metrics_strstep", '{"step": "zero", "reward/mean": 0.1}\n')):
        (a / name).mkdir()
        (a / name / "metrics.jsonl").write_text(rows)
    import torch
    from safetensors.torch import save_file

    save_file({"foo": torch.zeros(2, 2)}, str(a / "wrongkeys.safetensors"))
    # the sixth sweep's: a FIFO (a read blocks until a writer comes), two symlinks pointing at each other, YAML whose
    # tagged values PyYAML cannot build, one of several documents, a config file of comments only
    os.mkfifo(a / "fifo.hdf5")
    os.mkfifo(a / "fifo.yaml")
    (a / "loop1").symlink_to(a / "loop2")
    (a / "loop2").symlink_to(a / "loop1")
    (a / "tag_empty.yaml").write_text("seed: !!float\n")
    (a / "tag_timestamp.yaml").write_text("seed: !!timestamp 2020-13-45\n")
    (a / "multidoc.yaml").write_text("---\nseed: 0\n---\nseed: 1\n")
    (a / "pyobj.yaml").write_text("seed: !!python/object/apply:os.system [ls]\n")
    (a / "comments.yaml").write_text("# nothing but a comment\n")
    (a / "deep_typo.yaml").write_text("model:\n  lora:\n    rnak: 4\n")
    (a / "date.yaml").write_text("log: {run_name: 2001-01-01}\n")
    # the seventh sweep's: a saved diffusers pipeline's folder (export --force must not write into it)
    (a / "pipe").mkdir()
    (a / "pipe" / "model_index.json").write_text("{}\n")
    # the eighth sweep's: a section that is a list, wrong types inside nested lists
    (a / "rl_list.yaml").write_text("seed: 0\nrl: [1, 2]\n")
    (a / "state_dims_str.yaml").write_text("srpo:\n  encoder: proprio\n  state_dims: [0, '1']\n")
    (a / "tasks_int.yaml").write_text("env:\n  tasks: [tabletop/reach, 3]\n")
    (a / "band_str.yaml").write_text("rl: {success_band: [0.1, x]}\n")
    (a / "config_only").mkdir()  # a model folder whose weights are missing
    (a / "alias_bomb.yaml").write_text(f"env:\n  tasks: {ALIAS_BOMB}\n")
    (a / "config_only" / "config.json").write_text("{}\n")
    (a / "band_scalar.yaml").write_text("rl:\n  success_band: 0.5\n")  # the eleventh sweep's: a pair given as a number
    return a


def _corrupt_copy(src: Path, dst: Path, how: str) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    ck = max((dst / "checkpoints").glob("step_*"))
    if how == "truncated":
        f = next(p for p in sorted(ck.glob("*.safetensors")) if p.name != "state.safetensors")
        f.write_bytes(f.read_bytes()[:100])
    elif how == "copy":  # unchanged: a resume under another config
        pass
    elif how == "stalelatest":  # "latest" names a checkpoint that is not there: eval / export must not pick another
        (dst / "checkpoints" / "latest").write_text("step_999999\n")
    elif how == "statelist":  # state.json parses, but is not the trainer's object
        (ck / "state.json").write_text("[]\n")
    elif how == "garbled":  # state.json cut short mid-write
        (ck / "state.json").write_text('{"step": 1, "sta')
    elif how == "stateempty":
        (ck / "state.json").write_text("{}\n")
    elif how == "latestbinary":  # the "latest" pointer is not text
        (dst / "checkpoints" / "latest").write_bytes(b"\xff\xfe\x00\x01")
    elif how == "shape":  # weights of another shape under the same names (a [1, ...] tensor would broadcast)
        from safetensors.torch import load_file, save_file

        for f in [*ck.glob("trainable.safetensors"), *ck.glob("model.safetensors")]:
            sd = load_file(f)
            k = next(k for k, v in sd.items() if v.dim() == 2)
            save_file({**sd, k: sd[k][:1].clone()}, f)
    elif how == "wrongkeys":  # the weights under names of another model (a safetensors of the wrong keys)
        from safetensors.torch import load_file, save_file

        for f in [*ck.glob("trainable.safetensors"), *ck.glob("model.safetensors")]:
            save_file({f"x.{k}": v for k, v in load_file(f).items()}, f)
    elif how == "int":  # LoRA weights stored as integers (the export wrote them out)
        import torch
        from safetensors.torch import load_file, save_file

        for f in [*ck.glob("trainable.safetensors"), *ck.glob("pytorch_lora_weights.safetensors")]:
            save_file({k: v.to(torch.int32) for k, v in load_file(f).items()}, f)
    elif how == "nan":  # weights of NaN: training on from them would give NaN samples / actions
        from safetensors.torch import load_file, save_file

        for f in [*ck.glob("trainable.safetensors"), *ck.glob("model.safetensors")]:
            save_file({k: v.fill_(float("nan")) if v.is_floating_point() else v for k, v in load_file(f).items()}, f)
    elif how == "policytrunc":  # the saved policy (sft.base_policy) cut short
        f = dst / "policy" / "model.safetensors"
        f.write_bytes(f.read_bytes()[:300])
    elif how in ("hdrhuge", "hdrzero"):  # the weights' safetensors header: a length beyond the file / nothing at all
        import struct

        for f in [*ck.glob("trainable.safetensors"), *ck.glob("model.safetensors")]:
            f.write_bytes(struct.pack("<Q", 2**62) + f.read_bytes()[8:] if how == "hdrhuge" else b"")
    elif how in ("fifostate", "fifoinfo", "fifolatest"):  # a FIFO where the run keeps a file (an open blocks on it)
        f = {"fifostate": ck / "state.json", "fifoinfo": dst / "run_info.json",
             "fifolatest": dst / "checkpoints" / "latest"}[how]
        f.unlink()
        os.mkfifo(f)
    elif how == "latestempty":  # the ninth sweep's: the "latest" pointer written as zero bytes
        (dst / "checkpoints" / "latest").write_text("")
    elif how == "latestoutside":  # "latest" names a directory outside checkpoints/ (the run directory itself)
        (dst / "checkpoints" / "latest").write_text("..\n")
    elif how == "runinfolist":  # run_info.json parses, but is not the run's object
        (dst / "run_info.json").write_text("[]\n")
    elif how == "runinfoempty":
        (dst / "run_info.json").write_text("")
    elif how == "metricsdir":  # a directory where the run appends its metrics rows
        (dst / "metrics.jsonl").unlink()
        (dst / "metrics.jsonl").mkdir()
    elif how == "ckfile":  # checkpoints/ replaced by a file
        shutil.rmtree(dst / "checkpoints")
        (dst / "checkpoints").write_text("not a directory\n")
    elif how == "statezero":  # state.json of zero bytes (a disk that filled up)
        (ck / "state.json").write_text("")
    elif how == "evalfile":  # a file where eval --video writes its folder
        (dst / "eval").write_text("not a directory\n")
    elif how in ("hdrdtype", "hdrlist"):  # the eleventh sweep's: a weights header naming a dtype safetensors lacks, a
        # header that is JSON but not an object
        import struct

        for f in [*ck.glob("trainable.safetensors"), *ck.glob("model.safetensors")]:
            b = f.read_bytes()
            n = struct.unpack("<Q", b[:8])[0]
            head = json.loads(b[8:8 + n])
            head = {k: v if k == "__metadata__" else {**v, "dtype": "Q9"} for k, v in head.items()} \
                if how == "hdrdtype" else [1, 2]
            raw = json.dumps(head).encode()
            raw += b" " * (n - len(raw))  # (the same length: only the header differs)
            f.write_bytes(struct.pack("<Q", len(raw)) + raw + b[8 + n:])
    elif how in ("stepneg", "stepmismatch", "stepbool", "stepstr"):  # state.json's step: not its directory's number
        st = json.loads((ck / "state.json").read_text())
        st["step"] = {"stepneg": -5, "stepmismatch": 7, "stepbool": True, "stepstr": "one"}[how]
        (ck / "state.json").write_text(json.dumps(st))
    elif how == "noconfig":  # the state holds no saved config
        st = json.loads((ck / "state.json").read_text())
        st["state"]["__dict__"].pop("config")
        (ck / "state.json").write_text(json.dumps(st))
    elif how == "latestbest":  # "latest" names best/, not a step_* checkpoint
        (dst / "checkpoints" / "latest").write_text("best\n")
    elif how == "nolora":  # the checkpoint's trainable weights are gone
        for c in (dst / "checkpoints").iterdir():
            if c.is_dir() and not c.is_symlink():
                for f in [*c.glob("*lora*"), *c.glob("trainable.safetensors")]:
                    f.unlink()
    else:
        (ck / "state.json").unlink()
        # state.json gone: "latest" still names it; the run must say so, not start over
    return dst


@pytest.fixture(scope="module")
def diffusion_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("drun") / "run"
    r = run_cli("diffusion_rl.cli", ["train", D_CFG, f"output_dir={out}", *D_TINY], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def vla_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("vrun") / "run"
    r = run_cli("vla_rl.cli", ["train", V_CFG, f"output_dir={out}", *V_TINY], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("trun") / "run"
    r = run_cli("diffusion_rl.cli", ["toy", T_CFG, f"output_dir={out}", "train.iterations=1"], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def demo_wrong_action(tmp_path_factory):
    import h5py

    d = tmp_path_factory.mktemp("demo") / "demos.hdf5"
    r = run_cli("vla_rl.cli", ["record-demos", "tabletop/reach", "1", str(d), "--image-size", "32"])
    assert r.returncode == 0, r.stderr[-2000:]
    with h5py.File(d, "a") as f:
        for name in list(f["data"]):
            acts = f["data"][name]["actions"][()]
            del f["data"][name]["actions"]
            f["data"][name]["actions"] = acts[:, :-2]  # 2 action dims fewer than the task's
    return d


# ---- the battery ---------------------------------------------------------------------------------------------
D = ("diffusion_rl.cli", ["train", D_CFG, "--dry-run"])
V = ("vla_rl.cli", ["train", V_CFG, "--dry-run"])
L = ("vla_rl.cli", ["loop", L_CFG, "--dry-run"])
T = ("diffusion_rl.cli", ["toy", T_CFG, "--dry-run"])

# id -> (module, argv before the run-dir override, extra args, substrings the error line must hold)
CASES = {
    # diffusion-rl train
    "d-unknown-key": (*D, ["nosuch.key=1"], ["nosuch"]),
    # a reward server (rewards.remote): bad settings, a server that does not answer, serve-reward's own input
    "d-remote-bad-url": (*D, ["reward.remote.url=localhost:8000"], ["reward.remote.url", "http://HOST:PORT"]),
    "d-remote-zero-timeout": (*D, ["reward.name=http://127.0.0.1:9", "reward.remote.timeout_s=0"],
                              ["reward.remote.timeout_s", "> 0"]),
    "d-overlap-zero": (*D, ["reward.overlap=0"], ["reward.overlap", ">= 1"]),
    "d-overlap-too-many": (*D, ["reward.overlap=99"], ["reward.overlap=99", "expected 1..16"]),
    "d-remote-dead": ("diffusion_rl.cli", ["train", D_CFG],
                      ["reward.name=http://127.0.0.1:9", "reward.remote.retries=0", *D_TINY],
                      ["http://127.0.0.1:9", "GET /health", "serve-reward"]),
    "d-serve-unknown": ("diffusion_rl.cli", ["serve-reward", "nosuch_reward", "--port", "0"], [], ["nosuch_reward"]),
    "d-serve-bad-kwargs": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--kwargs", "{oops"], [],
                           ["--kwargs", "not JSON"]),
    "v-remote-bad-reward": ("vla_rl.cli", ["train", V_CFG, "--dry-run"], ["rl.reward=ftp://x"],
                            ["rl.reward", "ftp://x", "http://HOST:PORT"]),
    "v-serve-bad-port": ("vla_rl.cli", ["serve-reward", "rewards.success:success_reward", "--port", "-1"], [],
                         ["--port -1", "0..65535"]),
    "d-wrong-type": (*D, ["train.iterations=abc"], ["train.iterations", "abc"]),
    "d-neg-iterations": (*D, ["train.iterations=-1"], ["train.iterations", ">= 0"]),
    "d-zero-group": (*D, ["grpo.group_size=0"], ["group_size", "0"]),
    "d-neg-group": (*D, ["grpo.group_size=-4"], ["group_size", "-4"]),
    "d-group-1": (*D, ["grpo.group_size=1"], ["group_size", "1"]),
    "d-zero-image": (*D, ["model.height=0"], ["model.height", "0"]),
    "d-neg-image": (*D, ["model.width=-16"], ["model.width", "-16"]),
    # image sizes the model cannot take (issue 36): refused when the config loads, for a real run too (nothing written)
    "d-image-not-multiple": ("diffusion_rl.cli", ["train", D_CFG], ["model.height=15", "model.width=15", *D_TINY],
                             ["model.height=15", "multiples of 4", "12 or 16"]),
    "d-image-too-large": (*D, ["model.height=128"], ["model.height=128", "at most 64"]),
    "d-image-flux": (*D, ["model.kind=flux", "model.width=30"], ["model.width=30", "multiples of 4", "packing"]),
    "d-image-wan-frames": (*D, ["model.kind=wan", "model.num_frames=6"], ["model.num_frames=6", "4 k + 1"]),
    "d-image-shapes-model": ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_branch.yaml", "--dry-run"],
                             ["model.width=30"], ["model.width=30", "multiples of 4", "builtin:shapes_sd3"]),
    "d-image-full-size": ("diffusion_rl.cli",
                          ["train", "configs/diffusion/sd35m_pickscore.yaml", "--dry-run", "--plan"],
                          ["model.height=500"], ["model.height=500", "multiples of 16", "sd3.5-medium"]),
    "d-image-wan22-5b": ("diffusion_rl.cli",
                         ["train", "configs/diffusion/wan22_ti2v5b_video.yaml", "--dry-run", "--plan"],
                         ["model.height=720"], ["model.height=720", "multiples of 32", "704 or 736"]),
    "d-missing-model": (*D, ["model.path=/nonexistent/model_dir"], ["/nonexistent/model_dir"]),
    "d-unknown-reward": (*D, ["reward.name=nosuch_reward"], ["nosuch_reward"]),
    "d-unknown-sde": (*D, ["sampler.sde=nosuch_sde"], ["nosuch_sde"]),
    "d-unknown-prompt-source": (*D, ["prompts.source=web"], ["prompts.source", "web", "'shapes', 'file', 'list'"]),
    "d-unknown-loss": (*D, ["train.loss=dpo"], ["train.loss", "dpo", "'grpo', 'nft'"]),
    "d-unknown-pool-sampler": (*D, ["pool.pool_sampler=euler"], ["pool.pool_sampler", "euler", "'sde', 'ode'"]),
    "d-typo": (*D, ["train.itrations=2"], ["itrations", "did you mean"]),
    "d-yaml-syntax": ("diffusion_rl.cli", ["train", "{assets}/broken.yaml", "--dry-run"], [],
                      ["broken.yaml", "line 5", "line 4"]),
    "d-empty-yaml": ("diffusion_rl.cli", ["train", "{assets}/empty.yaml", "--dry-run"], [], ["empty.yaml", "empty"]),
    "d-config-is-dir": ("diffusion_rl.cli", ["train", "{assets}/a_dir.yaml", "--dry-run"], [],
                        ["a_dir.yaml", "directory"]),
    "d-nan-lr": (*D, ["train.lr=nan"], ["train.lr", "finite", "nan"]),
    "d-inf-lr": (*D, ["train.lr=.inf"], ["train.lr", "finite", "inf"]),
    "d-neg-lr": (*D, ["train.lr=-1e-4"], ["train.lr", "> 0", "-0.0001"]),
    "d-neg-seed": (*D, ["seed=-1"], ["seed", ">= 0", "-1"]),
    "d-neg-kl": (*D, ["grpo.kl_coef=-0.5"], ["grpo.kl_coef", ">= 0", "-0.5"]),
    "d-neg-clip-high": (*D, ["grpo.clip_high=-1"], ["grpo.clip_high", ">= 0", "-1"]),
    "d-zero-adv-clip": (*D, ["grpo.adv_clip=0"], ["grpo.adv_clip", "> 0", "0"]),
    "d-empty-output": (*D, ["output_dir="], ["output_dir", "directory"]),
    "d-ema-one": (*D, ["train.ema_decay=1.0"], ["train.ema_decay", "< 1", "1.0"]),
    "d-zero-keep-last": (*D, ["train.keep_last=0"], ["train.keep_last", ">= 1", "0"]),
    "d-section-scalar": (*D, ["train=5"], ["train", "mapping", "5"]),
    "d-no-equals": (*D, ["noequals"], ["noequals", "key=value"]),
    "d-unwritable-out": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir={assets}/a_file/run", *D_TINY],
                         ["{assets}/a_file/run"]),
    "d-reward-raises": ("diffusion_rl.cli", ["train", D_CFG], ["reward.name=tests.bad_rewards:raises", *D_TINY],
                        ["tests.bad_rewards:raises", "reward service unavailable"]),
    "d-reward-nan": ("diffusion_rl.cli", ["train", D_CFG], ["reward.name=tests.bad_rewards:nan", *D_TINY],
                     ["tests.bad_rewards:nan", "non-finite"]),
    "d-reward-shape": ("diffusion_rl.cli", ["train", D_CFG], ["reward.name=tests.bad_rewards:wrong_shape", *D_TINY],
                       ["tests.bad_rewards:wrong_shape", "shape"]),
    "d-resume-truncated": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_truncated}", *D_TINY, "train.iterations=2"],
                           ["safetensors"]),
    "d-resume-no-state": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_nostate}", *D_TINY, "train.iterations=2"],
                          ["state.json"]),
    # diffusion-rl eval / export / pretrain-shapes / toy
    "d-prompts-binary": (*D, ["prompts.source=file", "prompts.file={assets}/binary.txt"],
                         ["prompts.file", "{assets}/binary.txt", "UTF-8"]),
    "d-lora-init-junk": (*D, ["model.lora_init={assets}/junk.safetensors"],
                         ["model.lora_init", "{assets}/junk.safetensors", "cannot read"]),
    "d-lora-init-not-safetensors": (*D, ["model.lora_init={assets}/a_file"], ["model.lora_init", ".safetensors"]),
    "d-eval-missing": ("diffusion_rl.cli", ["eval", "{assets}/no_run"], [], ["{assets}/no_run"]),
    "d-eval-truncated": ("diffusion_rl.cli", ["eval", "{drun_truncated_ck}"], [], ["safetensors"]),
    "d-export-missing": ("diffusion_rl.cli", ["export", "{assets}/no_run", "{assets}/exp"], [], ["{assets}/no_run"]),
    "d-export-into-run": ("diffusion_rl.cli", ["export", "{drun}", "{drun}/exported"], [],
                          ["{drun}/exported", "inside the run"]),
    "d-export-existing": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/prev_export"], [],
                          ["{assets}/prev_export", "already holds an export", "--force"]),
    "d-report-existing": ("diffusion_rl.cli", ["report", "{drun}", "--out", "{assets}/old.html"], [],
                          ["{assets}/old.html", "already exists", "--force"]),
    "v-report-existing": ("vla_rl.cli", ["report", "{assets}/metrics_only", "--out", "{assets}/old.html"], [],
                          ["{assets}/old.html", "already exists", "--force"]),
    "d-export-unwritable": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/a_file/exp"], [],
                            ["{assets}/a_file/exp"]),
    "p-zero-steps": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--steps", "0"], [],
                     ["steps", "0"]),
    "p-neg-size": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--size", "-8"], [],
                   ["--size", "-8"]),
    "p-zero-batch": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--batch", "0"], [],
                     ["--batch", "0"]),
    "p-wrong-type": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--steps", "ten"], [],
                     ["--steps", "ten"]),
    "p-unwritable-out": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/a_file/ps", "--steps", "1"], [],
                         ["{assets}/a_file/ps"]),
    "p-missing-init": ("diffusion_rl.cli",
                       ["pretrain-shapes", "--out", "{assets}/ps", "--init", "{assets}/no_model"], [],
                       ["{assets}/no_model"]),
    "t-unknown-key": (*T, ["nosuch.key=1"], ["nosuch"]),
    "t-typo": (*T, ["train.itrations=2"], ["itrations", "did you mean"]),
    "t-group-1": (*T, ["grpo.group_size=1"], ["group_size", "1"]),
    "t-neg-iterations": (*T, ["train.iterations=-3"], ["iterations", "-3"]),
    "t-wrong-type": (*T, ["model.hidden=wide"], ["model.hidden", "wide"]),
    "t-unknown-sde": (*T, ["sampler.sde=nosuch_sde"], ["nosuch_sde"]),
    "t-yaml-syntax": ("diffusion_rl.cli", ["toy", "{assets}/broken.yaml", "--dry-run"], [],
                      ["broken.yaml", "line 5", "line 4"]),
    # vla-rl train
    "v-unknown-key": (*V, ["nosuch.key=1"], ["nosuch"]),
    "v-wrong-type": (*V, ["rl.iterations=abc"], ["rl.iterations", "abc"]),
    "v-neg-iterations": (*V, ["rl.iterations=-1"], ["rl.iterations", ">= 0"]),
    "v-zero-group": (*V, ["grpo.group_size=0"], ["group_size", "0"]),
    "v-neg-group": (*V, ["grpo.group_size=-2"], ["group_size", "-2"]),
    "v-group-1": (*V, ["grpo.group_size=1"], ["group_size", "1"]),
    "v-zero-image": (*V, ["policy.image_size=0"], ["image_size", "0"]),
    "v-neg-image": (*V, ["policy.image_size=-32"], ["image_size", "-32"]),
    # a dry run checks values only (a full recipe prints its cost without its weights or data); the run checks paths
    "v-missing-model": ("vla_rl.cli", ["train", V_CFG], ["sft.base_policy=/nonexistent/policy", *V_TINY],
                        ["/nonexistent/policy"]),
    "v-unknown-reward": (*V, ["rl.reward=nosuch_reward"], ["nosuch_reward"]),
    # rl.reward=sim_progress reads the simulator's own progress: refused where the tasks have none (a run)
    "v-sim-progress-no-measure": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "rl.reward=sim_progress",
                                                                   "env.tasks=[robosuite/Lift]"],
                                  ["rl.reward=sim_progress", "robosuite/Lift", "tabletop/*"]),
    "v-unknown-task": (*V, ["env.tasks=[tabletop/nosuch_task]"], ["tabletop/nosuch_task"]),
    "v-unknown-policy-kind": (*V, ["policy.head=nosuch_head"], ["policy.head", "nosuch_head", "'flow', 'gaussian'"]),
    "v-unknown-encoder": (*V, ["srpo.encoder=nosuch_encoder"], ["nosuch_encoder"]),
    "v-unknown-sde": (*V, ["policy.flow.sde_kind=nosuch_sde"], ["policy.flow.sde_kind", "nosuch_sde", "'flow_grpo'"]),
    "v-unknown-onpolicy-action": (*V, ["rl.onpolicy_action=loud"],
                                  ["rl.onpolicy_action", "loud", "'warn', 'stop', 'off'"]),
    "v-typo": (*V, ["rl.itrations=2"], ["itrations", "did you mean"]),
    "v-nan-lr": (*V, ["rl.lr=nan"], ["rl.lr", "finite", "nan"]),
    "v-neg-seed": (*V, ["seed=-3"], ["seed", ">= 0", "-3"]),
    "v-neg-eval-episodes": (*V, ["rl.eval_episodes=-1"], ["rl.eval_episodes", ">= 1", "-1"]),
    "v-zero-minibatch": (*V, ["rl.minibatch_size=0"], ["rl.minibatch_size", ">= 1", "0"]),
    "v-unknown-camera": (*V, ["policy.cameras=[nosuchcam]"], ["policy.cameras", "nosuchcam"]),
    "v-bad-schedule": (*V, ["rl.lr_schedule=step"], ["rl.lr_schedule", "step", "'constant', 'linear', 'cosine'"]),
    "v-chunk-steps": (*V, ["policy.n_action_steps=9", "policy.chunk_size=4"], ["n_action_steps", "9", "4"]),
    "v-empty-tasks": (*V, ["env.tasks=[]"], ["env.tasks", "empty"]),
    "v-yaml-syntax": ("vla_rl.cli", ["train", "{assets}/broken.yaml", "--dry-run"], [],
                      ["broken.yaml", "line 5", "line 4"]),
    "v-unwritable-out": ("vla_rl.cli", ["train", V_CFG], ["output_dir={assets}/a_file/run", *V_TINY],
                         ["{assets}/a_file/run"]),
    "v-demo-wrong-action": ("vla_rl.cli", ["train", V_CFG],
                            ["sft.demo_path={demo}", "output_dir={assets}/vdemo", *V_TINY],
                            ["{demo}", "action"]),
    # every simulator's options are checked at start, dry run or not (issue 36: a traceback from the first env built)
    "v-sim-unknown-option": (*V, ["env.kwargs={bogus_opt: 1}"],
                             ["env.kwargs", "bogus_opt", "TabletopConfig", "valid:"]),
    "v-sim-unknown-option-run": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "env.kwargs={image_size: 32, bogus_opt: 1}"],
                                 ["env.kwargs", "bogus_opt", "TabletopConfig"]),
    "v-sim-bad-value": (*V, ["env.kwargs={reward: dens}"], ["env.kwargs", "tabletop/reach", "reward", "dens"]),
    "v-robosuite-unknown-option": ("vla_rl.cli", ["train", "configs/vla/robosuite_lift.yaml", "--dry-run"],
                                   ["env.kwargs={settle_steps: 3}"],
                                   ["robosuite/Lift", "settle_steps", "RobosuiteConfig"]),
    "v-libero-unknown-option": ("vla_rl.cli", ["train", "configs/vla/libero_spatial.yaml", "--dry-run"],
                                ["env.kwargs={reward: dense}"],
                                ["libero/libero_spatial/0", "'reward'", "LiberoConfig"]),
    "l-unknown-wm-prediction": (*L, ["models.wm.prediction=eps"], ["models.wm.prediction", "eps", "'x0', 'velocity'"]),
    "l-sim-unknown-option": (*L, ["vla.env.kwargs={bogus: 1}"], ["vla.env.kwargs", "bogus", "TabletopConfig"]),
    "l-sim-unknown-option-run": ("vla_rl.cli", ["loop", L_CFG], ["cycles=1", "vla.env.kwargs={bogus: 1}"],
                                 ["vla.env.kwargs", "bogus", "TabletopConfig"]),
    "l-demo-wrong-action": ("vla_rl.cli", ["loop", L_CFG], ["vla.sft.demo_path={demo}", "cycles=1"],
                            ["vla.sft.demo_path", "{demo}", "actions of size 2", "expected 4", "tabletop/reach_one"]),
    "l-demo-missing": ("vla_rl.cli", ["loop", L_CFG], ["vla.sft.demo_path={assets}/no_demos.hdf5", "cycles=1"],
                       ["vla.sft.demo_path", "{assets}/no_demos.hdf5"]),
    "v-eval-sim-option": ("vla_rl.cli", ["eval", "{vrun_badenv_ck}"], [],
                          ["env.kwargs", "bogus_opt", "TabletopConfig"]),
    "v-resume-truncated": ("vla_rl.cli", ["train", V_CFG], ["{vrun_truncated}", *V_TINY, "rl.iterations=2"],
                           ["safetensors"]),
    "v-resume-no-state": ("vla_rl.cli", ["train", V_CFG], ["{vrun_nostate}", *V_TINY, "rl.iterations=2"],
                          ["state.json"]),
    # vla-rl eval / loop / record-demos / libero-demos
    "v-eval-missing": ("vla_rl.cli", ["eval", "{assets}/no_run"], [], ["{assets}/no_run"]),
    "v-eval-truncated": ("vla_rl.cli", ["eval", "{vrun_truncated_ck}"], [], ["safetensors"]),
    "v-eval-diffusion-run": ("vla_rl.cli", ["eval", "{drun}"], [], ["not a vla-rl", "diffusion-rl eval"]),
    "d-eval-vla-run": ("diffusion_rl.cli", ["eval", "{vrun}"], [], ["not a diffusion-rl", "vla-rl eval"]),
    "v-eval-neg-episodes": ("vla_rl.cli", ["eval", "{vrun}", "--episodes", "-1"], [], ["--episodes", "-1"]),
    "l-unknown-key": (*L, ["nosuch.key=1"], ["nosuch"]),
    "l-wrong-type": (*L, ["cycles=abc"], ["cycles", "abc"]),
    "l-neg-cycles": (*L, ["cycles=-1"], ["cycles", ">= 0"]),
    "l-zero-image": (*L, ["data.image_size=0"], ["image_size", "0"]),
    "l-group-1": (*L, ["vla.grpo.group_size=1"], ["group_size", "1"]),
    "l-unknown-task": (*L, ["data.task=tabletop/nosuch_task"], ["tabletop/nosuch_task"]),
    "l-typo": (*L, ["rl_iteratons=3"], ["rl_iteratons", "did you mean"]),
    "l-yaml-syntax": ("vla_rl.cli", ["loop", "{assets}/broken.yaml", "--dry-run"], [],
                      ["broken.yaml", "line 5", "line 4"]),
    "l-unwritable-out": ("vla_rl.cli", ["loop", L_CFG], ["output_dir={assets}/a_file/loop", "cycles=1"],
                         ["{assets}/a_file/loop"]),
    "r-zero-n": ("vla_rl.cli", ["record-demos", "tabletop/reach", "0", "{assets}/r.hdf5"], [], ["n", "0"]),
    "r-unknown-task": ("vla_rl.cli", ["record-demos", "tabletop/nosuch", "1", "{assets}/r.hdf5"], [],
                       ["tabletop/nosuch"]),
    "r-zero-image": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--image-size", "0"], [],
                     ["--image-size", "0"]),
    "r-wrong-type": ("vla_rl.cli", ["record-demos", "tabletop/reach", "two", "{assets}/r.hdf5"], [], ["two"]),
    "r-unwritable-out": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/a_file/r.hdf5"], [],
                         ["{assets}/a_file/r.hdf5"]),
    "r-existing-out": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/old.hdf5"], [],
                       ["{assets}/old.hdf5", "already exists", "--force"]),
    "lb-existing-out": ("vla_rl.cli", ["libero-demos", "{assets}/old.hdf5", "{demo}", "--env-names",
                                       "libero/libero_spatial/0"], [], ["{assets}/old.hdf5", "already exists"]),
    "r-out-not-hdf5": ("vla_rl.cli", ["record-demos", "tabletop/reach", "2", "{assets}/demos.txt"], [],
                       ["{assets}/demos.txt", ".hdf5", "--format lerobot"]),
    "d-branch-split-beyond-steps": ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_branch.yaml", "--dry-run"],
                                    ["branch.split_steps=[3,12]"],
                                    ["branch.split_steps", "[12]", "sampler.num_steps=10"]),
    "lb-out-is-input": ("vla_rl.cli", ["libero-demos", "{demo}", "{demo}", "--env-names", "libero/libero_spatial/0",
                                       "--force"], [], ["{demo}", "one of the inputs"]),
    "lb-missing-input": ("vla_rl.cli", ["libero-demos", "{assets}/o.hdf5", "{assets}/none_demo.hdf5", "--suite",
                                        "libero_spatial"], [], ["{assets}/none_demo.hdf5"]),
    "fe-unknown-key": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["train.stepz=3"],
                       ["train.stepz", "did you mean"]),
    "fe-unknown-task": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["data.expert_tasks=[tabletop/nosuch]"],
                        ["data.expert_tasks", "tabletop/nosuch"]),
    "fe-out-not-safetensors": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output={assets}/enc.pt"],
                               ["{assets}/enc.pt", ".safetensors"]),
    "fe-existing-out": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output={assets}/old.safetensors"],
                        ["{assets}/old.safetensors", "already exists", "--force"]),
    "fe-missing-demo": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["data.demo_paths=[{assets}/none.hdf5]",
                                                                "output={assets}/e.safetensors"],
                        ["{assets}/none.hdf5"]),
    "v-srpo-encoder-missing": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "rl.reward=srpo", "srpo.encoder=progress",
                                                                "srpo.encoder_path={assets}/none.safetensors"],
                               ["srpo.encoder_path", "{assets}/none.safetensors", "fit-encoder"]),
    "lb-unwritable-out": ("vla_rl.cli", ["libero-demos", "{assets}/a_file/o.hdf5", "{demo}", "--env-names",
                                         "libero/libero_spatial/0"], [], ["{assets}/a_file/o.hdf5"]),
}
# the misuse sweep's finds (issue: "well over a hundred misuse cases against every command"): each was accepted, or
# failed late, with a traceback, or after writing, before its check was added
D_PLAN = ("diffusion_rl.cli", ["train", "configs/diffusion/sd35m_pickscore.yaml", "--dry-run", "--plan"])
SWEEP = {
    "d-device-meta": (*D, ["model.device=meta"], ["device 'meta'", "'cpu', 'cuda'"]),
    "d-seed-2-64": (*D, ["seed=18446744073709551616"], ["seed", "2**32 - 1"]),
    "d-lora-alpha-0": (*D, ["model.lora.alpha=0"], ["lora.alpha", "> 0"]),
    "d-lora-dropout-neg": (*D, ["model.lora.dropout=-0.1"], ["lora.dropout", "[0, 1)", "-0.1"]),
    "d-lora-dropout-1.5": (*D, ["model.lora.dropout=1.5"], ["lora.dropout", "[0, 1)", "1.5"]),
    "d-eta-neg": (*D, ["sampler.eta=-1"], ["sampler.eta", ">= 0", "-1"]),
    "d-shift-0": (*D, ["sampler.shift=0"], ["sampler.shift", "> 0"]),
    "d-cfg-neg": (*D, ["sampler.cfg_scale=-1"], ["sampler.cfg_scale", ">= 0"]),
    "d-mix-stride-0": (*D, ["sampler.mix_stride=0"], ["sampler.mix_stride", ">= 1"]),
    "d-clip-low-1.5": (*D, ["grpo.clip_low=1.5"], ["grpo.clip_low", "< 1", "1.5"]),
    "d-num-eval-0": (*D, ["prompts.num_eval=0"], ["prompts.num_eval", ">= 1"]),
    "d-num-eval-neg": (*D, ["prompts.num_eval=-1"], ["prompts.num_eval", ">= 1", "-1"]),
    "d-backoff-neg": (*D, ["reward.retry_backoff_s=-1"], ["reward.retry_backoff_s", ">= 0"]),
    "d-max-seq-0": (*D, ["model.max_sequence_length=0"], ["model.max_sequence_length", ">= 1"]),
    "d-branch-one-leaf": ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_branch.yaml", "--dry-run"],
                          ["branch.branch=[1]"], ["branch.branch=[1]", "1 leaf"]),
    "d-branch-temp-0": ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_branch.yaml", "--dry-run"],
                        ["branch.fusion=path_prob", "branch.fusion_temperature=0"],
                        ["branch.fusion_temperature", "> 0"]),
    "d-branch-window-neg": ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_branch.yaml", "--dry-run"],
                            ["branch.depth_window=-1"], ["branch.depth_window", ">= 0"]),
    "d-plan-gpu-mem-nan": (*D_PLAN, ["--gpu-mem", "nan"], ["--gpu-mem=nan", "finite"]),
    "d-plan-peak-inf": (*D_PLAN, ["--peak-tflops", "inf"], ["--peak-tflops=inf", "finite"]),
    "d-arch-without-plan": (*D, ["--arch", "sd3.5-medium"], ["--arch", "without --plan"]),
    "d-gpus-without-plan": (*D, ["--gpus", "abc"], ["--gpus", "without --plan"]),
    "d-resume-other-config": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_copy}", *D_TINY, "train.iterations=2",
                                                                     "train.lr=0.5"],
                              ["refusing to resume", "train.lr"]),
    "d-eval-stale-latest": ("diffusion_rl.cli", ["eval", "{drun_stalelatest_dir}"], [], ["step_999999", "latest"]),
    "d-export-stale-latest": ("diffusion_rl.cli", ["export", "{drun_stalelatest_dir}", "{assets}/exp_s"], [],
                              ["step_999999", "latest"]),
    "d-export-truncated": ("diffusion_rl.cli", ["export", "{drun_truncated_dir}", "{assets}/exp_t"], [],
                           ["safetensors", "truncated"]),
    "d-export-no-lora": ("diffusion_rl.cli", ["export", "{drun_nolora_dir}", "{assets}/exp_n"], [],
                         ["no LoRA weights", "trainable.safetensors"]),
    "d-export-empty-out": ("diffusion_rl.cli", ["export", "{drun}", ""], [], ["OUT is empty"]),
    "d-eval-neg-prompts": ("diffusion_rl.cli", ["eval", "{drun}", "prompts.num_eval=-1"], [],
                           ["prompts.num_eval", ">= 1"]),
    "d-out-proc": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir=/proc/branchloop_misuse", *D_TINY],
                   ["/proc/branchloop_misuse", "virtual filesystem"]),
    "p-lr-inf": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--steps", "1", "--lr", "inf"], [],
                 ["--lr=inf", "finite"]),
    "p-seed-neg": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--steps", "1", "--seed=-1"], [],
                   ["--seed=-1"]),
    "p-size-huge": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--steps", "1", "--size",
                                         "100000"], [], ["--size=100000", "at most"]),
    "p-out-empty": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "", "--steps", "1"], [], ["--out is empty"]),
    "p-out-proc": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "/proc/branchloop_misuse", "--steps", "1"], [],
                   ["/proc/branchloop_misuse", "virtual filesystem"]),
    "t-zero-hidden": (*T, ["model.hidden=0"], ["model.hidden", ">= 1"]),
    "t-neg-radius": (*T, ["model.radius=-1"], ["model.radius", "> 0"]),
    "t-zero-steps": (*T, ["sampler.num_steps=0"], ["sampler.num_steps", ">= 1"]),
    "t-zero-lr": (*T, ["train.lr=0"], ["train.lr", "> 0"]),
    "t-zero-eval-samples": (*T, ["train.eval_samples=0"], ["train.eval_samples", ">= 1"]),
    "t-zero-keep-last": (*T, ["train.keep_last=0"], ["train.keep_last", ">= 1"]),
    "t-seed-2-64": (*T, ["seed=18446744073709551616"], ["seed", "2**32 - 1"]),
    "d-report-empty-metrics": ("diffusion_rl.cli", ["report", "{assets}/metrics_empty", "--out", "{assets}/r1.html"],
                               [], ["metrics_empty", "no metrics rows"]),
    "d-serve-delay-nan": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "0", "--delay-s", "nan"],
                          [], ["--delay-s", "finite", "nan"]),
    "v-serve-not-callable": ("vla_rl.cli", ["serve-reward", "math:pi", "--port", "0"], [], ["'math:pi'", "callable"]),
    "v-serve-bad-kwargs-fn": ("vla_rl.cli", ["serve-reward", "rewards.success:success_reward", "--port", "0",
                                             "--kwargs", '{"nosuch": 1}'], [],
                              ["rewards.success:success_reward", "bad arguments ['nosuch']"]),
    "v-conv-empty": (*V, ["policy.conv_channels=[]"], ["policy.conv_channels", "[]"]),
    "v-conv-neg": (*V, ["policy.conv_channels=[-16]"], ["policy.conv_channels", "[-16]"]),
    "v-text-dim-0": (*V, ["policy.text_dim=0"], ["policy.text_dim", ">= 1"]),
    "v-ctx-dim-0": (*V, ["policy.ctx_dim=0"], ["policy.ctx_dim", ">= 1"]),
    "v-flow-hidden-0": (*V, ["policy.flow.hidden=0"], ["flow.hidden", ">= 1"]),
    "v-action-dim-neg": (*V, ["policy.action_dim=-2"], ["policy.action_dim", ">= 0", "-2"]),
    "v-sft-steps-neg": (*V, ["sft.steps=-1"], ["sft.steps", ">= 0"]),
    "v-sft-batch-0": (*V, ["sft.batch_size=0"], ["sft.batch_size", ">= 1"]),
    "v-sft-lr-0": (*V, ["sft.lr=0"], ["sft.lr", "> 0"]),
    "v-sft-log-every-0": (*V, ["sft.log_every=0"], ["sft.log_every", ">= 1"]),
    "v-sft-demos-0": (*V, ["sft.demos_per_task=0"], ["sft.demos_per_task", ">= 1"]),
    "v-train-seeds-neg": (*V, ["rl.train_seeds=[-1]"], ["rl.train_seeds", ">= 0"]),
    "v-frame-size-0": (*V, ["srpo.frame_size=0"], ["srpo.frame_size", ">= 1"]),
    "v-seed-2-64": (*V, ["seed=18446744073709551616"], ["seed", "2**32 - 1"]),
    "v-device-meta": (*V, ["device=meta"], ["device 'meta'", "'cpu', 'cuda'"]),
    "v-gpus-without-plan": (*V, ["--gpus", "0"], ["--gpus", "without --plan"]),
    "v-plan-gpu-mem-nan": ("vla_rl.cli", ["train", "configs/vla/smolvla_reach_one.yaml", "--plan"],
                           ["--gpu-mem", "nan"], ["--gpu-mem=nan", "finite"]),
    "v-progress-no-path": (*V, ["srpo.encoder=progress"], ["srpo.encoder=progress", "srpo.encoder_path"]),
    "v-resume-other-config": ("vla_rl.cli", ["train", V_CFG], ["{vrun_copy}", *V_TINY, "rl.iterations=2", "rl.lr=0.5"],
                              ["refusing to resume", "rl.lr"]),
    "v-eval-stale-latest": ("vla_rl.cli", ["eval", "{vrun_stalelatest_dir}"], [], ["step_999999", "latest"]),
    "r-noise-inf": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--noise", "inf"], [],
                    ["--noise=inf", "finite"]),
    "r-seed-offset-huge": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--seed-offset",
                                          "18446744073709551616"], [], ["--seed-offset", "4294967295"]),
    "r-n-huge": ("vla_rl.cli", ["record-demos", "tabletop/reach", "99999999999", "{assets}/r.hdf5"], [],
                 ["n=99999999999", "at most 1000000"]),
    "v-eval-episodes-huge": ("vla_rl.cli", ["eval", "{vrun}", "--episodes", "99999999999999999999"], [],
                             ["--episodes=99999999999999999999", "1..1000000"]),
    "lb-junk-input": ("vla_rl.cli", ["libero-demos", "{assets}/lb.hdf5", "{assets}/junk.hdf5", "--env-names",
                                     "libero/libero_spatial/0"], [], ["junk.hdf5", "not a readable HDF5"]),
    "lb-per-task-0": ("vla_rl.cli", ["libero-demos", "{assets}/lb.hdf5", "{assets}/junk.hdf5", "--env-names",
                                     "libero/libero_spatial/0", "--per-task", "0"], [], ["--per-task=0", ">= 1"]),
    "l-wm-action-dim": (*L, ["models.wm.action_dim=7"], ["models.wm.action_dim=7", "expected 4"]),
    "l-wm-heads-0": (*L, ["models.wm.hidden_heads=0"], ["wm.hidden_heads", ">= 1"]),
    "l-wm-patch-0": (*L, ["models.wm.patch=0"], ["wm.patch", ">= 1"]),
    "l-near-progress": (*L, ["data.near_progress=[0.9,0.1]"], ["data.near_progress", "low < high"]),
    "l-success-threshold": (*L, ["models.success_threshold=1.5"], ["models.success_threshold", "(0, 1)"]),
    "l-idm-window-0": (*L, ["models.idm.window=0"], ["idm.window", ">= 2"]),
    "l-rollouts-neg": (*L, ["rollouts_per_cycle=-1"], ["rollouts_per_cycle", ">= 0"]),
    "l-noise-neg": (*L, ["data.noise=-1"], ["data.noise", ">= 0"]),
    "l-wm-lr-0": (*L, ["models.wm_lr=0"], ["models.wm_lr", "> 0"]),
    "fe-expert-noise-neg": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["data.expert_noise=-1"],
                            ["data.expert_noise", ">= 0"]),
    "fe-unknown-camera": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["data.camera=nosuchcam"],
                          ["data.camera", "nosuchcam", "agentview"]),
    "fe-env-option": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["data.env_kwargs={bogus_opt: 1}"],
                      ["data.env_kwargs", "bogus_opt"]),
    "fe-demo-junk": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["data.demo_paths=[{assets}/junk.hdf5]",
                                                             "output={assets}/e2.safetensors"],
                     ["data.demo_paths", "junk.hdf5", "not a readable HDF5"]),
    "fe-out-proc": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output=/proc/branchloop_misuse.safetensors"],
                    ["/proc", "virtual filesystem"]),
    "fe-seed-2-64": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["seed=18446744073709551616"],
                     ["seed", "2**32 - 1"]),
    "d-tiny-unknown-option": (*D, ["model.tiny={nosuch: 1}"], ["model.tiny", "nosuch", "tiny_sd3_pipeline"]),
    "d-shapes-unknown-option": (*D, ["prompts.shapes={nosuch: 1}"], ["prompts.shapes", "nosuch", "p_relation"]),
    "l-unknown-episode-kind": (*L, ["data.train={nosuch: 3}"], ["data.train", "nosuch", "success, near"]),
    "l-vla-unknown-task": (*L, ["vla.env.tasks=[tabletop/nosuch]"], ["vla.env.tasks", "tabletop/nosuch"]),
    "d-unknown-monitor": (*D, ["eval.monitors=[nosuch_reward]"], ["eval.monitors", "nosuch_reward", "colour_variance"]),
    "v-report-not-metrics": ("vla_rl.cli", ["report", "{assets}/binary.txt", "--out", "{assets}/r2.html"], [],
                             ["binary.txt", "not JSON"]),
}
# the second misuse sweep's finds: YAML files and overrides of the wrong shape, checkpoints damaged inside their JSON,
# values of the newer commands (fit-encoder, serve-reward, report) that were accepted or failed with a traceback
SWEEP_2 = {
    "d-yaml-dup-section": ("diffusion_rl.cli", ["train", "{assets}/dup.yaml", "--dry-run"], [],
                           ["dup.yaml", "key 'train' appears twice", "first at line"]),
    "l-override-dup-key": (*L, ["data={image_size: 32, image_size: 64}"], ["image_size", "appears twice"]),
    "v-override-bad-yaml": (*V, ["rl.lr=[1,"], ["rl.lr=[1,", "not valid YAML"]),
    "t-override-empty-part": (*T, ["train..lr=1"], ["train..lr", "empty part"]),
    "d-lr-beyond-float": (*D, ["train.lr=1" + "0" * 400], ["train.lr", "finite"]),
    "d-config-dev-null": ("diffusion_rl.cli", ["train", "/dev/null", "--dry-run"], [],
                          ["/dev/null", "not a regular file"]),
    "d-reward-name-empty": (*D, ["reward.name="], ["reward.name is empty", "shapes_verifier"]),
    "fe-play-horizon-0": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["data.play_horizon=0"],
                          ["data.play_horizon", ">= 1", "0"]),
    "fe-rank-tau-0": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["train.rank_tau=0"],
                      ["train.rank_tau", "> 0"]),
    "fe-seed-offset-2-64": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"],
                            ["data.expert_seed_offset=18446744073709551616"],
                            ["data.expert_seed_offset", "2**32 - 1"]),
    "v-tasks-twice": (*V, ["env.tasks=[tabletop/reach,tabletop/reach]"],
                      ["env.tasks", "tabletop/reach", "more than once"]),
    "v-cameras-twice": (*V, ["policy.cameras=[agentview,agentview]"], ["policy.cameras", "more than once"]),
    "v-image-huge": (*V, ["policy.image_size=100000"], ["policy.image_size=100000", "at most 1024"]),
    "r-image-huge": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--image-size", "100000"],
                     [], ["--image-size=100000", "[16, 1024]"]),
    "d-resume-state-list": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_statelist}", *D_TINY, "train.iterations=2"],
                            ["state.json", "corrupt checkpoint state", "a JSON list"]),
    "v-resume-state-empty": ("vla_rl.cli", ["train", V_CFG], ["{vrun_stateempty}", *V_TINY, "rl.iterations=2"],
                             ["state.json", "'step' and 'state'"]),
    "d-eval-state-empty": ("diffusion_rl.cli", ["eval", "{drun_stateempty_dir}"], [],
                           ["state.json", "'step' and 'state'"]),
    "d-resume-latest-binary": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_latestbinary}", *D_TINY,
                                                                      "train.iterations=2"],
                               ["latest", "unreadable checkpoint pointer"]),
    "v-eval-latest-binary": ("vla_rl.cli", ["eval", "{vrun_latestbinary_dir}"], [], ["latest", "unreadable"]),
    "d-report-out-not-html": ("diffusion_rl.cli", ["report", "{assets}/metrics_only", "--out", "{assets}/r.png"], [],
                              ["r.png", ".html"]),
    "d-serve-empty-host": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--host", "", "--port", "0"], [],
                           ["--host ''", "127.0.0.1"]),
    "v-serve-empty-name": ("vla_rl.cli", ["serve-reward", "", "--port", "0"], [], ["NAME is empty"]),
    "d-remote-port-range": (*D, ["reward.name=http://127.0.0.1:99999"], ["http://127.0.0.1:99999", "0..65535"]),
    "d-remote-settings-unused": (*D, ["reward.remote.timeout_s=5"], ["reward.remote.timeout_s", "does nothing"]),
    "v-remote-settings-unused": (*V, ["rl.remote.retries=1"], ["rl.remote.retries", "does nothing"]),
    "d-log-mlflow-uri-unused": (*D, ["log.mlflow_uri=file:///tmp/x"], ["log.mlflow_uri", "does nothing"]),
    "v-log-wandb-mode-unused": (*V, ["log.wandb_mode=offline"], ["log.wandb_mode", "does nothing"]),
    "p-out-nonempty": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/prev_export", "--steps", "1"], [],
                       ["{assets}/prev_export", "already exists", "--force"]),
    "p-ckpt-damaged": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/dmg", "--steps", "1"], [],
                       ["dmg.ckpt", "corrupt checkpoint state", "left untouched"]),
    "p-hidden-heads": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--hidden", "50", "--steps",
                                            "1"], [], ["--hidden=50", "attention heads"]),
    "d-plan-arch-unknown": (*D_PLAN, ["--arch", "sd9"], ["--arch 'sd9'", "unknown architecture"]),
    "d-plan-gpus-huge": (*D_PLAN, ["--gpus", "99999999999999"], ["--gpus", "up to 100000"]),
    # a checkpoint tensor of another shape was broadcast into the weights (diffusion) or a traceback (VLA)
    "d-eval-weights-shape": ("diffusion_rl.cli", ["eval", "{drun_shape_dir}"], [],
                             ["has shape [1,", "this model's is"]),
    "v-eval-weights-shape": ("vla_rl.cli", ["eval", "{vrun_shape_dir}"], [], ["model.safetensors",
                                                                          "does not fit this policy"]),
    "d-eval-weights-nan": ("diffusion_rl.cli", ["eval", "{drun_nan_dir}"], [], ["NaN/inf", "damaged checkpoint"]),
    "v-eval-weights-nan": ("vla_rl.cli", ["eval", "{vrun_nan_dir}"], [], ["model.safetensors", "NaN/inf"]),
    # an export of damaged LoRA weights (another shape, NaN): refused before OUT is written (was: exported)
    "d-export-weights-shape": ("diffusion_rl.cli", ["export", "{drun_shape_dir}", "{assets}/exp_shape"], [],
                               ["export", "has shape [1,", "model.lora.rank=", "nothing written"]),
    "d-export-weights-nan": ("diffusion_rl.cli", ["export", "{drun_nan_dir}", "{assets}/exp_nan"], [],
                             ["export", "NaN/inf", "damaged checkpoint", "nothing written"]),
    # a resume refused for its weights: the checkpoint is checked before the logs open (was: one TensorBoard events
    # file written into the run directory before the refusal)
    "d-resume-weights-nan": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_nan}", *D_TINY, "train.iterations=2"],
                             ["NaN/inf", "damaged checkpoint"]),
    "v-resume-weights-nan": ("vla_rl.cli", ["train", V_CFG], ["{vrun_nan}", *V_TINY, "rl.iterations=2"],
                             ["model.safetensors", "NaN/inf"]),
    "d-resume-weights-shape": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_shape}", *D_TINY, "train.iterations=2"],
                               ["has shape [1,", "this model's is"]),
    "v-resume-weights-shape": ("vla_rl.cli", ["train", V_CFG], ["{vrun_shape}", *V_TINY, "rl.iterations=2"],
                               ["model.safetensors", "does not fit this policy"]),
    "v-base-policy-truncated": ("vla_rl.cli", ["train", V_CFG],
                                [*V_TINY, "sft.base_policy={vrun_policytrunc_dir}/policy"],
                                ["sft.base_policy", "model.safetensors", "corrupt safetensors"]),
    "d-export-nonempty-dir": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/metrics_only"], [],
                              ["metrics_only", "already exists", "--force"]),
    # a tracker that cannot start its run (here: a tracking URI MLflow does not know) leaves no run directory behind
    "d-tracker-cannot-start": ("diffusion_rl.cli", ["train", D_CFG],
                               ["log.backends=[mlflow]", "log.mlflow_uri=nosuch://host", *D_TINY],
                               ["mlflow could not start its run", "nosuch://host"]),
}
# the third misuse sweep (the newest surfaces: lookahead@1, rl.reward=sim_progress, fit-encoder, reward servers, export,
# report): values that were accepted (a tree of a billion nodes filled the memory in a dry run; --plan planned a
# strategy a run refuses) or failed with a traceback
LA = ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_tree_lookahead.yaml", "--dry-run"])
LA_PLAN = ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_tree_lookahead.yaml", "--dry-run", "--plan",
                                "--arch", "sd3.5-medium"])
BR = ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_branch.yaml", "--dry-run"])
SWEEP_3 = {
    "d-lookahead-huge": (*LA, ["branch.lookahead_candidates=1000000000"],
                         ["branch.lookahead_candidates=1000000000", "more than 100000 nodes"]),
    "d-branch-factor-huge": (*BR, ["branch.split_steps=[0]", "branch.branch=[100000000]"],
                             ["branch.branch=[100000000]", "more than 100000 nodes"]),
    "d-branch-no-splits": (*BR, ["branch.split_steps=[]"],
                           ["branch.split_steps is empty", "1 leaf"]),
    "d-lookahead-no-splits": (*LA, ["branch.split_steps=[]"], ["branch.split_steps is empty"]),
    "d-plan-lookahead-pool": (*LA_PLAN, ["pool.enabled=true"],
                              ["branch.lookahead_candidates=4 with pool.enabled=true", "choose one"]),
    "d-plan-lookahead-bf16": (*LA_PLAN, ["pool.quant.format=bf16"], ["pool.quant.format must be fp8 or nvfp4"]),
    "d-plan-lookahead-few": (*LA_PLAN, ["branch.lookahead_candidates=2"],
                             ["branch.lookahead_candidates=2", "must exceed", "branch factor 2"]),
    # GDPO weights of a component the named reward does not return: a KeyError-like refusal after SFT + a rollout
    "v-gdpo-weight-unknown": (*V, ["rl.reward=sim_progress", "grpo.advantage=gdpo",
                                   "grpo.reward_weights={success: 1, nosuch: 2}"],
                              ["grpo.reward_weights", "nosuch", "rl.reward=sim_progress", "'success', 'progress'"]),
    "l-gdpo-weight-progress": (*L, ["vla.grpo.advantage=gdpo", "vla.grpo.reward_weights={progress: 2}"],
                               ["grpo.reward_weights", "progress", "rl.reward=binary", "['success']"]),
    # reward server addresses the client would mangle (it appends /score)
    "v-remote-url-query": (*V, ["rl.reward=http://127.0.0.1:8000/x?y=1"], ["http://127.0.0.1:8000/x?y=1", "?query"]),
    "d-remote-url-space": (*D, ["reward.name=http://127.0.0.1 :8000"], ["http://127.0.0.1 :8000", "whitespace"]),
    # the loops' vla: section: its inactive keys were not checked (vla-rl train refuses them)
    "l-vla-inactive-key": (*L, ["vla.rl.remote.retries=1"], ["vla.rl.remote.retries", "does nothing"]),
    "v-remote-url-userinfo": (*V, ["rl.reward=http://user:pw@127.0.0.1:8000"], ["user:pw@", "not sent"]),
    "d-remote-url-ipv6-open": (*D, ["reward.name=http://[::1:8000"], ["http://[::1:8000", "IPv6"]),
    "d-export-weights-int": ("diffusion_rl.cli", ["export", "{drun_int_dir}", "{assets}/exp_int"], [],
                             ["export", "int32", "floating-point", "nothing written"]),
    "d-report-same-run-twice": ("diffusion_rl.cli", ["report", "{assets}/metrics_only", "{assets}/metrics_only/"
                                                     "metrics.jsonl", "--out", "{assets}/r3.html"],
                                [], ["metrics_only", "named twice"]),
    "v-report-title-empty": ("vla_rl.cli", ["report", "{assets}/metrics_only", "--out", "{assets}/r4.html", "--title",
                                            " "], [], ["--title is empty"]),
    "fe-expert-tasks-twice": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"],
                              ["data.expert_tasks=[tabletop/reach,tabletop/reach]"],
                              ["data.expert_tasks", "tabletop/reach", "more than once"]),
    # no step draws noise: a tree's children are copies, a GRPO loss has no gradient (were accepted)
    "d-lookahead-ode": (*LA, ["sampler.sde=ode"], ["sampler.sde=ode", "children of a tree's split", "flow_grpo"]),
    "d-flat-eta-0": (*D, ["sampler.eta=0"], ["sampler.eta=0", "no gradient"]),
    "d-lookahead-window-beyond": (*LA, ["branch.depth_window=4"],
                                  ["branch.depth_window=4", "3 depths", "0 (all depths)"]),
    "fe-demo-none-successful": ("vla_rl.cli", ["fit-encoder", FE_CFG],
                                ["data.demo_paths=[{assets}/zero_demos.hdf5]", "data.expert_tasks=[]",
                                 "output={assets}/enc_zero.safetensors"],
                                ["data.demo_paths=", "zero_demos.hdf5", "no successful demos"]),
    "fe-shift-beyond-image": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"], ["train.shift=1000"],
                              ["train.shift=1000", "model.image_size=32"]),
}
# the fourth misuse sweep: new cases against every command (wrong types, non-finite numbers, empty / unicode /
# whitespace values, near-miss keys, contradicting overrides, YAML that is not a mapping, paths of the wrong kind,
# report / export fed the wrong files). The ones that were accepted, or failed with a traceback, are marked "was:".
TP = ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_tree_pool.yaml", "--dry-run"])
PF = ("diffusion_rl.cli", ["train", "configs/diffusion/shapes_pool_fp8.yaml", "--dry-run"])
FE = ("vla_rl.cli", ["fit-encoder", FE_CFG, "--dry-run"])
PS = ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps", "--steps", "1"])
SWEEP_4 = {
    # diffusion-rl train: types, numbers, strings
    "s4-d-iterations-float": (*D, ["train.iterations=1.5"], ["train.iterations", "1.5"]),
    "s4-d-iterations-bool": (*D, ["train.iterations=true"], ["train.iterations", "True"]),
    "s4-d-group-float": (*D, ["grpo.group_size=2.0"], ["grpo.group_size", "2.0"]),
    "s4-d-log-images-int": (*D, ["train.log_images=2"], ["train.log_images", "2"]),
    "s4-d-iterations-fullwidth": (*D, ["train.iterations=\uff11\uff10"], ["train.iterations", "\uff11\uff10"]),
    "s4-d-lr-string": (*D, ["train.lr=fast"], ["train.lr", "fast"]),
    "s4-d-lr-list": (*D, ["train.lr=[1e-4]"], ["train.lr", "expects float", "(list)"]),
    "s4-d-lora-rank-0": (*D, ["model.lora.rank=0"], ["lora.rank", ">= 1", "0"]),
    "s4-d-lora-rank-neg": (*D, ["model.lora.rank=-8"], ["lora.rank", ">= 1", "-8"]),
    "s4-d-lora-targets-unknown": (*D, ["model.lora.targets=[nosuch_layer]"], ["LoRA target", "nosuch_layer", "to_q"]),
    # was: peft's line, naming no config key
    "s4-d-lora-targets-empty-name": (*D, ["model.lora.targets=['']"], ["lora.targets=['']", "empty name"]),
    "s4-d-timestep-fraction-0": (*D, ["sampler.timestep_fraction=0"], ["sampler.timestep_fraction", "0"]),
    "s4-d-timestep-fraction-1.5": (*D, ["sampler.timestep_fraction=1.5"], ["sampler.timestep_fraction", "1.5"]),
    "s4-d-timestep-fraction-nan": (*D, ["sampler.timestep_fraction=nan"], ["sampler.timestep_fraction", "nan"]),
    "s4-d-mix-window-neg": (*D, ["sampler.mix_window=-1"], ["sampler.mix_window", "-1"]),
    "s4-d-mix-window-beyond": (*D, ["sampler.mix_window=100"], ["sampler.mix_window", "100"]),
    "s4-d-eta-nan": (*D, ["sampler.eta=nan"], ["sampler.eta", "nan"]),
    "s4-d-eta-inf": (*D, ["sampler.eta=.inf"], ["sampler.eta", "inf"]),
    "s4-d-shift-nan": (*D, ["sampler.shift=nan"], ["sampler.shift", "nan"]),
    "s4-d-cfg-inf": (*D, ["sampler.cfg_scale=.inf"], ["sampler.cfg_scale", "inf"]),
    "s4-d-guidance-nan": (*D, ["model.guidance=nan"], ["model.guidance", "nan"]),
    "s4-d-num-steps-0": (*D, ["sampler.num_steps=0"], ["sampler.num_steps", "0"]),
    "s4-d-inner-epochs-0": (*D, ["train.inner_epochs=0"], ["train.inner_epochs", "0"]),
    "s4-d-save-every-0": (*D, ["train.save_every=0"], ["train.save_every", "0"]),
    "s4-d-eval-every-neg": (*D, ["train.eval_every=-1"], ["train.eval_every", "-1"]),
    "s4-d-updates-0": (*D, ["train.updates_per_iter=0"], ["train.updates_per_iter", "0"]),
    "s4-d-lr-min-ratio-2": (*D, ["train.lr_min_ratio=2"], ["train.lr_min_ratio", "2"]),
    "s4-d-weight-decay-neg": (*D, ["train.weight_decay=-1"], ["train.weight_decay", "-1"]),
    "s4-d-weight-decay-nan": (*D, ["train.weight_decay=nan"], ["train.weight_decay", "nan"]),
    "s4-d-onpolicy-tol-neg": (*D, ["train.onpolicy_tol=-1"], ["train.onpolicy_tol", "-1"]),
    "s4-d-onpolicy-tol-nan": (*D, ["train.onpolicy_tol=nan"], ["train.onpolicy_tol", "nan"]),
    "s4-d-tracker-buffer-0": (*D, ["train.use_tracker=true", "train.tracker_buffer=0"], ["train.tracker_buffer", "0"]),
    # was: accepted (a prompt's own statistics were never used)
    "s4-d-tracker-min-over-buffer": (*D, ["train.use_tracker=true", "train.tracker_buffer=4",
                                          "train.tracker_min_count=8"], ["train.tracker_min_count", "8"]),
    "s4-d-nft-beta-0": (*D, ["train.loss=nft", "train.nft_beta=0"], ["train.nft_beta", "0"]),
    "s4-d-nft-timesteps-0": (*D, ["train.loss=nft", "train.nft_timesteps=0"], ["train.nft_timesteps", "0"]),
    "s4-d-prompts-per-iter-0": (*D, ["train.prompts_per_iter=0"], ["train.prompts_per_iter", "0"]),
    "s4-d-ema-nan": (*D, ["train.ema_decay=nan"], ["train.ema_decay", "nan"]),
    "s4-d-adv-eps-neg": (*D, ["grpo.adv_eps=-1"], ["grpo.adv_eps", "-1"]),
    "s4-d-max-grad-norm-0": (*D, ["grpo.max_grad_norm=0"], ["max_grad_norm", "> 0", "0"]),
    "s4-d-max-grad-norm-nan": (*D, ["grpo.max_grad_norm=nan"], ["grpo.max_grad_norm", "nan"]),
    "s4-d-max-nonfinite-neg": (*D, ["grpo.max_nonfinite=-1"], ["grpo.max_nonfinite", "-1"]),
    "s4-d-clip-high-nan": (*D, ["grpo.clip_high=nan"], ["grpo.clip_high", "nan"]),
    "s4-d-kl-nan": (*D, ["grpo.kl_coef=nan"], ["grpo.kl_coef", "nan"]),
    "s4-d-adv-clip-inf": (*D, ["grpo.adv_clip=.inf"], ["grpo.adv_clip", "inf"]),
    "s4-d-weights-without-gdpo": (*D, ["grpo.reward_weights={score: 1}"], ["grpo.reward_weights", "gdpo"]),
    "s4-d-gdpo-weight-nan": (*D, ["grpo.advantage=gdpo", "grpo.reward_weights={score: .nan}"],
                             ["grpo.reward_weights", "nan"]),
    "s4-d-unknown-advantage": (*D, ["grpo.advantage=ppo"], ["grpo.advantage", "ppo"]),
    "s4-d-unknown-kl-type": (*D, ["grpo.kl_type=k2"], ["grpo.kl_type", "k2"]),
    "s4-d-unknown-std-mode": (*D, ["grpo.std_mode=batch"], ["grpo.std_mode", "batch"]),
    "s4-d-reward-retries-neg": (*D, ["reward.retries=-1"], ["reward.retries", "-1"]),
    "s4-d-reward-kwargs-list": (*D, ["reward.kwargs=[1, 2]"], ["reward.kwargs", "[1, 2]"]),
    "s4-d-reward-kwargs-unknown": (*D, ["reward.kwargs={nosuch: 1}"], ["shapes_verifier", "bad arguments", "nosuch"]),
    "s4-d-reward-name-space": (*D, ["reward.name=' shapes_verifier'"], ["' shapes_verifier'", "unknown reward"]),
    "s4-d-reward-name-unicode": (*D, ["reward.name=shapes_v\u0435rifier"], ["shapes_v\u0435rifier"]),
    "s4-d-reward-module-missing": (*D, ["reward.name=nosuch_pkg.mod:fn"], ["nosuch_pkg.mod:fn"]),
    "s4-d-reward-attr-missing": (*D, ["reward.name=rewards:nosuch_fn"], ["rewards:nosuch_fn"]),
    "s4-d-remote-batch-neg": (*D, ["reward.name=http://127.0.0.1:9", "reward.remote.batch_size=-1"],
                              ["reward.remote.batch_size", "-1"]),
    "s4-d-remote-inflight-0": (*D, ["reward.name=http://127.0.0.1:9", "reward.remote.max_in_flight=0"],
                               ["reward.remote.max_in_flight", "0"]),
    "s4-d-remote-timeout-nan": (*D, ["reward.name=http://127.0.0.1:9", "reward.remote.timeout_s=nan"],
                                ["reward.remote.timeout_s", "nan"]),
    "s4-d-remote-encoding": (*D, ["reward.name=http://127.0.0.1:9", "reward.remote.encoding=jpeg"],
                             ["reward.remote.encoding", "jpeg"]),
    "s4-d-remote-url-and-name": (*D, ["reward.name=http://127.0.0.1:9", "reward.remote.url=http://127.0.0.1:8"],
                                 ["reward.name", "remote.url", "named twice"]),
    # prompts
    "s4-d-prompts-file-missing": (*D, ["prompts.source=file", "prompts.file={assets}/none.txt"],
                                  ["prompts.file", "{assets}/none.txt"]),
    # was: "does not exist" for a directory
    "s4-d-prompts-file-dir": (*D, ["prompts.source=file", "prompts.file={assets}/prev_export"],
                              ["prompts.file", "prev_export", "is a directory"]),
    "s4-d-prompts-file-unset": (*D, ["prompts.source=file"], ["prompts.file"]),
    "s4-d-prompts-list-empty": (*D, ["prompts.source=list", "prompts.prompts=[]"], ["prompts.prompts", "empty"]),
    "s4-d-prompts-list-blank": (*D, ["prompts.source=list", "prompts.prompts=['  ']"], ["prompts.prompts"]),
    # was: accepted (a key the prompt source reads nowhere)
    "s4-d-prompts-list-unused": (*D, ["prompts.prompts=[a red circle]"],
                                 ["prompts.prompts", "does nothing", "prompts.source='shapes'"]),
    "s4-d-prompts-file-unused": (*D, ["prompts.file={assets}/a_file"],
                                 ["prompts.file", "does nothing", "prompts.source='shapes'"]),
    "s4-d-prompts-file-empty": (*D, ["prompts.source=file", "prompts.file={assets}/blank.txt"],
                                ["blank.txt", "holds no prompts"]),
    "s4-d-prompts-json-wrong-shape": (*D, ["prompts.source=file", "prompts.file={assets}/prompts_obj.json"],
                                      ["prompts_obj.json", "expected a JSON list of prompts"]),
    # model
    "s4-d-model-kind-unknown": (*D, ["model.kind=sdxl"], ["model.kind", "sdxl"]),
    "s4-d-model-dtype-unknown": (*D, ["model.dtype=fp64"], ["model.dtype", "fp64"]),
    "s4-d-model-path-empty": (*D, ["model.path=''"], ["model.path"]),
    "s4-d-model-path-file": (*D, ["model.path={assets}/a_file"], ["model.path", "a_file"]),
    # was: accepted (model.components completes a single-file model.path only)
    "s4-d-model-components-missing": (*D, ["model.components={assets}/no_components"],
                                      ["model.components", "does nothing", "single-file"]),
    "s4-d-decode-batch-neg": (*D, ["model.decode_batch=-1"], ["model.decode_batch", "-1"]),
    "s4-d-num-frames-0": (*D, ["model.kind=wan", "model.num_frames=0"], ["model.num_frames", "0"]),
    "s4-d-adapter-missing": (*D, ["model.adapter=nosuch_pkg:Adapter"], ["model.adapter", "nosuch_pkg:Adapter"]),
    "s4-d-adapter-no-colon": (*D, ["model.adapter=justaname"], ["model.adapter", "justaname"]),
    "s4-d-pretrain-unknown": (*D, ["model.pretrain=cats"], ["model.pretrain", "cats"]),
    "s4-d-device-cuda-neg": (*D, ["model.device=cuda:-1"], ["cuda:-1"]),
    "s4-d-device-space": (*D, ["model.device=' cpu'"], ["' cpu'", "not a torch device"]),
    "s4-d-lora-init-dir-empty": (*D, ["model.lora_init={assets}/empty_dir"], ["model.lora_init", "empty_dir"]),
    "s4-d-lora-init-wrong-keys": (*D, ["model.lora_init={assets}/wrongkeys.safetensors"],
                                  ["model.lora_init", "wrongkeys.safetensors"]),
    "s4-d-lora-init-without-lora": (*D, ["model.lora.enabled=false", "model.lora_init={assets}/wrongkeys.safetensors"],
                                    ["model.lora_init", "model.lora.enabled"]),
    # overrides / config files
    "s4-d-override-dot-into-scalar": (*D, ["train.lr.x=1"], ["train.lr", "expects float", "{'x': 1}"]),
    "s4-d-override-empty-key": (*D, ["=1"], ["=1"]),
    "s4-d-override-trailing-dot": (*D, ["train.=1"], ["train."]),
    "s4-d-override-key-space": (*D, [" train.lr=1e-4"], ["' train'", "did you mean 'train'"]),
    "s4-d-override-key-unicode": (*D, ["train.\u0131terations=2"], ["\u0131terations"]),
    "s4-d-override-case": (*D, ["Train.iterations=2"], ["Train", "did you mean"]),
    "s4-d-override-section-typo": (*D, ["sampeler.eta=0.5"], ["sampeler", "did you mean"]),
    "s4-d-override-leaf-typo": (*D, ["sampler.etaa=0.5"], ["sampler.etaa", "did you mean"]),
    "s4-d-override-section-null": (*D, ["train=null"], ["train"]),
    "s4-d-output-dir-space": (*D, ["output_dir=' '"], ["output_dir"]),
    "s4-d-output-dir-list": (*D, ["output_dir=[a, b]"], ["output_dir"]),
    "s4-d-resume-string": (*D, ["resume=maybe"], ["resume", "maybe"]),
    "s4-d-yaml-list": ("diffusion_rl.cli", ["train", "{assets}/list.yaml", "--dry-run"], [], ["list.yaml", "mapping"]),
    "s4-d-yaml-scalar": ("diffusion_rl.cli", ["train", "{assets}/scalar.yaml", "--dry-run"], [],
                         ["scalar.yaml", "mapping"]),
    "s4-d-yaml-int-keys": ("diffusion_rl.cli", ["train", "{assets}/intkeys.yaml", "--dry-run"], [], ["intkeys.yaml"]),
    "s4-d-yaml-nested-dup": ("diffusion_rl.cli", ["train", "{assets}/nested_dup.yaml", "--dry-run"], [],
                             ["nested_dup.yaml", "lr", "twice"]),
    "s4-d-yaml-latin1": ("diffusion_rl.cli", ["train", "{assets}/latin1.yaml", "--dry-run"], [], ["latin1.yaml"]),
    "s4-d-yaml-missing": ("diffusion_rl.cli", ["train", "{assets}/none.yaml", "--dry-run"], [], ["none.yaml"]),
    # was: "config file . is a directory"
    "s4-d-yaml-empty-name": ("diffusion_rl.cli", ["train", "", "--dry-run"], [], ["config file name is empty"]),
    "s4-d-yaml-tab-indent": ("diffusion_rl.cli", ["train", "{assets}/tabs.yaml", "--dry-run"], [], ["tabs.yaml"]),
    # plan flags
    "s4-d-plan-mfu-0": (*D_PLAN, ["--mfu", "0"], ["--mfu", "0"]),
    "s4-d-plan-mfu-2": (*D_PLAN, ["--mfu", "2"], ["--mfu", "2"]),
    "s4-d-plan-gpus-0": (*D_PLAN, ["--gpus", "0"], ["--gpus", "0"]),
    "s4-d-plan-gpus-empty": (*D_PLAN, ["--gpus", ""], ["--gpus"]),
    "s4-d-plan-gpus-neg": (*D_PLAN, ["--gpus", "1,-2"], ["--gpus", "-2"]),
    "s4-d-plan-gpu-mem-0": (*D_PLAN, ["--gpu-mem", "0"], ["--gpu-mem", "0"]),
    "s4-d-plan-without-dry-run": ("diffusion_rl.cli", ["train", "configs/diffusion/sd35m_pickscore.yaml", "--plan"],
                                  ["--mfu", "nan"], ["--mfu"]),
    # branch / pool / lookahead: contradicting overrides
    "s4-d-branch-splits-unsorted": (*BR, ["branch.split_steps=[4,2]"],
                                    ["split_steps", "strictly increasing", "[4, 2]"]),
    "s4-d-branch-splits-dup": (*BR, ["branch.split_steps=[2,2]"], ["split_steps", "strictly increasing", "[2, 2]"]),
    "s4-d-branch-splits-neg": (*BR, ["branch.split_steps=[-1,2]"], ["split steps [-1]", "outside [0, 10)"]),
    "s4-d-branch-factors-mismatch": (*BR, ["branch.branch=[2,2]"], ["branch", "[2, 2]"]),
    "s4-d-branch-factor-0": (*BR, ["branch.branch=[0]"], ["branch factors", ">= 1"]),
    "s4-d-branch-prune-k-0": (*BR, ["branch.width_prune=topk_per_parent", "branch.prune_k=0"],
                              ["branch.prune_k", "0"]),
    "s4-d-branch-depth-stride-0": (*BR, ["branch.depth_window=1", "branch.depth_stride=0"],
                                   ["branch.depth_stride", "0"]),
    "s4-d-branch-temp-nan": (*BR, ["branch.fusion=path_prob", "branch.fusion_temperature=nan"],
                             ["branch.fusion_temperature", "nan"]),
    "s4-d-branch-fusion-unknown": (*BR, ["branch.fusion=max"], ["branch.fusion", "max"]),
    "s4-d-lookahead-neg": (*LA, ["branch.lookahead_candidates=-1"], ["branch.lookahead_candidates", "-1"]),
    "s4-d-lookahead-without-tree": (*D, ["branch.lookahead_candidates=4"],
                                    ["branch.lookahead_candidates", "branch.enabled"]),
    "s4-d-lookahead-pool": (*LA, ["pool.enabled=true"], ["branch.lookahead_candidates", "pool.enabled"]),
    "s4-d-lookahead-bf16": (*LA, ["pool.quant.format=bf16"], ["pool.quant.format"]),
    "s4-d-tree-pool-size-mismatch": (*TP, ["pool.pool_size=32"], ["pool.pool_size", "32"]),
    "s4-d-tree-pool-train-over": (*TP, ["pool.train_size=32"], ["pool.train_size", "32"]),
    "s4-d-tree-pool-group-size": (*TP, ["grpo.group_size=4"], ["grpo.group_size"]),
    "s4-d-pool-size-0": (*PF, ["pool.pool_size=0"], ["pool.pool_size", "0"]),
    "s4-d-pool-train-over-pool": (*PF, ["pool.train_size=32"], ["pool.train_size", "32"]),
    "s4-d-pool-train-vs-group": (*PF, ["pool.train_size=8"], ["pool.train_size", "grpo.group_size"]),
    "s4-d-pool-chunk-0": (*PF, ["pool.chunk=0"], ["pool.chunk", "0"]),
    "s4-d-pool-speedup-neg": (*PF, ["pool.lowp_speedup=-1"], ["pool.lowp_speedup", "-1"]),
    "s4-d-pool-speedup-nan": (*PF, ["pool.lowp_speedup=nan"], ["pool.lowp_speedup", "nan"]),
    "s4-d-pool-bad-regex": (*PF, ["pool.quant.skip.extra_patterns=['(']"],
                            ["pattern '('", "not a valid regular expression"]),
    "s4-d-pool-min-in-neg": (*PF, ["pool.quant.skip.min_in_features=-1"], ["skip.min_in_features", ">= 0", "-1"]),
    "s4-d-pool-format-unknown": (*PF, ["pool.quant.format=int4"], ["pool.quant.format", "int4"]),
    "s4-d-pool-select-unknown": (*PF, ["pool.select=top"], ["pool.select", "top"]),
    "s4-d-eval-patience-0": (*D, ["eval.monitors=[colour_variance]", "eval.patience=0"], ["eval.patience", "0"]),
    "s4-d-eval-min-delta-nan": (*D, ["eval.monitors=[colour_variance]", "eval.min_delta=nan"],
                                ["eval.min_delta", "nan"]),
    "s4-d-eval-monitor-empty": (*D, ["eval.monitors=['']"], ["eval.monitors"]),
    # was: accepted
    "s4-d-eval-monitor-twice": (*D, ["eval.monitors=[colour_variance,colour_variance]"],
                                ["eval.monitors", "['colour_variance']", "more than once"]),
    "s4-d-log-backend-unknown": (*D, ["log.backends=[nosuch]"], ["log.backends", "nosuch"]),
    "s4-d-log-backend-twice": (*D, ["log.backends=[tensorboard,tensorboard]"], ["log.backends", "more than once"]),
    "s4-d-log-backends-string": (*D, ["log.backends=tensorboard"], ["log.backends", "tensorboard"]),
    "s4-d-dist-strategy-unknown": (*D, ["dist.strategy=zero3"], ["dist.strategy", "zero3"]),
    # diffusion-rl eval / export / report / pretrain-shapes / toy / serve-reward
    "s4-d-eval-file": ("diffusion_rl.cli", ["eval", "{assets}/a_file"], [], ["a_file"]),
    "s4-d-eval-empty-dir": ("diffusion_rl.cli", ["eval", "{assets}/empty_dir"], [], ["empty_dir"]),
    "s4-d-eval-unknown-override": ("diffusion_rl.cli", ["eval", "{drun}", "nosuch.key=1"], [], ["nosuch"]),
    "s4-d-eval-nan-override": ("diffusion_rl.cli", ["eval", "{drun}", "sampler.eta=nan"], [], ["sampler.eta", "nan"]),
    "s4-d-export-out-file": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/a_file"], [], ["a_file"]),
    "s4-d-export-run-is-file": ("diffusion_rl.cli", ["export", "{assets}/a_file", "{assets}/exp4"], [], ["a_file"]),
    "s4-d-export-vla-run": ("diffusion_rl.cli", ["export", "{vrun}", "{assets}/exp5"], [], ["vla-rl"]),
    "s4-d-export-out-space": ("diffusion_rl.cli", ["export", "{drun}", " "], [], ["OUT"]),
    "s4-d-report-missing": ("diffusion_rl.cli", ["report", "{assets}/no_run", "--out", "{assets}/r5.html"], [],
                            ["no_run"]),
    "s4-d-report-dir-without-metrics": ("diffusion_rl.cli", ["report", "{assets}/empty_dir", "--out",
                                                             "{assets}/r6.html"], [], ["empty_dir", "metrics"]),
    "s4-d-report-metrics-list-rows": ("diffusion_rl.cli", ["report", "{assets}/metrics_list", "--out",
                                                           "{assets}/r7.html"], [], ["metrics_list"]),
    "s4-d-report-metrics-bad-json": ("diffusion_rl.cli", ["report", "{assets}/metrics_badjson", "--out",
                                                          "{assets}/r8.html"], [],
                                     ["metrics_badjson", "line 2", "not JSON"]),
    "s4-d-report-metrics-no-step": ("diffusion_rl.cli", ["report", "{assets}/metrics_nostep", "--out",
                                                         "{assets}/r9.html"], [], ["metrics_nostep", "step"]),
    "s4-d-report-metrics-nan-step": ("diffusion_rl.cli", ["report", "{assets}/metrics_strstep", "--out",
                                                          "{assets}/r10.html"], [], ["metrics_strstep", "step"]),
    "s4-d-report-out-dir": ("diffusion_rl.cli", ["report", "{assets}/metrics_only", "--out", "{assets}/adir.html"],
                            [], ["adir.html"]),
    "s4-d-report-out-in-file": ("diffusion_rl.cli", ["report", "{assets}/metrics_only", "--out",
                                                     "{assets}/a_file/r.html"], [], ["a_file/r.html"]),
    # was: "--out='.': is a directory"
    "s4-d-report-out-empty": ("diffusion_rl.cli", ["report", "{assets}/metrics_only", "--out", ""], [],
                              ["--out is empty"]),
    "s4-d-report-no-runs": ("diffusion_rl.cli", ["report", "--out", "{assets}/r11.html"], [], ["run_dirs", "required"]),
    "s4-d-report-json-file": ("diffusion_rl.cli", ["report", "{assets}/wrongshape.json", "--out",
                                                   "{assets}/r12.html"], [], ["wrongshape.json"]),
    "s4-p-lr-0": (*PS, ["--lr", "0"], ["--lr", "0"]),
    "s4-p-lr-nan": (*PS, ["--lr", "nan"], ["--lr", "nan"]),
    "s4-p-hidden-0": (*PS, ["--hidden", "0"], ["--hidden", "0"]),
    "s4-p-init-file": (*PS, ["--init", "{assets}/a_file"], ["init=", "a_file", "no saved shapes pipeline"]),
    "s4-p-out-file": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/a_file", "--steps", "1"], [],
                      ["a_file"]),
    "s4-p-steps-float": (*PS[:1], PS[1][:3] + ["--steps", "1.5"], [], ["--steps", "1.5"]),
    "s4-p-unknown-flag": (*PS, ["--stepz", "1"], ["--stepz"]),
    "s4-t-eta-nan": (*T, ["sampler.eta=nan"], ["sampler.eta", "nan"]),
    "s4-t-iterations-float": (*T, ["train.iterations=1.5"], ["train.iterations", "1.5"]),
    "s4-t-yaml-list": ("diffusion_rl.cli", ["toy", "{assets}/list.yaml", "--dry-run"], [], ["list.yaml", "mapping"]),
    "s4-t-group-size-bool": (*T, ["grpo.group_size=true"], ["grpo.group_size", "True"]),
    "s4-t-output-dir-in-file": ("diffusion_rl.cli", ["toy", T_CFG],
                                ["output_dir={assets}/a_file/toy", "train.iterations=1"],
                                ["{assets}/a_file/toy"]),
    "s4-d-serve-port-string": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "http"], [],
                               ["--port", "http"]),
    "s4-d-serve-port-huge": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "70000"], [],
                             ["70000", "0..65535"]),
    "s4-d-serve-kwargs-list": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "0", "--kwargs",
                                                    "[1, 2]"], [], ["--kwargs", "[1, 2]"]),
    "s4-d-serve-delay-neg": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "0", "--delay-s",
                                                  "-1"], [], ["--delay-s", "-1"]),
    "s4-d-serve-name-space": ("diffusion_rl.cli", ["serve-reward", " ", "--port", "0"], [], ["NAME"]),
    # vla-rl train
    "s4-v-sim-noise-without-reward": (*V, ["rl.sim_progress_noise=0.1"], ["rl.sim_progress_noise", "sim_progress"]),
    "s4-v-sim-noise-neg": (*V, ["rl.reward=sim_progress", "rl.sim_progress_noise=-0.1"],
                           ["rl.sim_progress_noise", "-0.1"]),
    "s4-v-sim-noise-nan": (*V, ["rl.reward=sim_progress", "rl.sim_progress_noise=nan"],
                           ["rl.sim_progress_noise", "nan"]),
    "s4-v-max-episode-steps-0": (*V, ["env.max_episode_steps=0"], ["env.max_episode_steps", "0"]),
    "s4-v-chunk-size-0": (*V, ["policy.chunk_size=0"], ["chunk_size=0", "policy.n_action_steps"]),
    "s4-v-n-action-steps-0": (*V, ["policy.n_action_steps=0"], ["policy.n_action_steps", "0"]),
    "s4-v-groups-per-task-0": (*V, ["rl.groups_per_task=0"], ["rl.groups_per_task", "0"]),
    "s4-v-save-every-0": (*V, ["rl.save_every=0"], ["rl.save_every", "0"]),
    "s4-v-num-videos-neg": (*V, ["rl.num_videos=-1"], ["rl.num_videos", "-1"]),
    "s4-v-grad-accum-0": (*V, ["rl.grad_accum=0"], ["rl.grad_accum", "0"]),
    "s4-v-inner-epochs-0": (*V, ["rl.inner_epochs=0"], ["rl.inner_epochs", "0"]),
    "s4-v-success-band-reversed": (*V, ["rl.success_band=[0.9, 0.1]"], ["rl.success_band"]),
    "s4-v-success-band-nan": (*V, ["rl.success_band=[.nan, 1]"], ["rl.success_band", "nan"]),
    "s4-v-train-seed-range-0": (*V, ["rl.train_seed_range=0"], ["rl.train_seed_range", "0"]),
    "s4-v-eval-split-unknown": (*V, ["rl.eval_split=train"], ["rl.eval_split", "train"]),
    "s4-v-tasks-string": (*V, ["env.tasks=tabletop/reach"], ["env.tasks", "tabletop/reach"]),
    "s4-v-tasks-empty-name": (*V, ["env.tasks=['']"], ["env.tasks"]),
    "s4-v-task-space": (*V, ["env.tasks=[' tabletop/reach']"], ["tabletop/reach"]),
    "s4-v-video-camera-unknown": (*V, ["env.video_camera=nosuchcam"], ["env.video_camera", "nosuchcam"]),
    "s4-v-plugin-missing": (*V, ["env.plugins=[nosuch_plugin_mod]"], ["env.plugins", "nosuch_plugin_mod"]),
    "s4-v-policy-kind-unknown": (*V, ["policy.kind=nosuch"], ["policy.kind", "nosuch"]),
    "s4-v-policy-type-unknown": (*V, ["policy.type=gpt"], ["policy.type", "gpt"]),
    "s4-v-max-text-len-0": (*V, ["policy.max_text_len=0"], ["policy.max_text_len", "0"]),
    "s4-v-state-dim-neg": (*V, ["policy.state_dim=-1"], ["policy.state_dim", "-1"]),
    "s4-v-gaussian-min-over-max": (*V, ["policy.head=gaussian", "policy.gaussian.min_std=2"],
                                   ["min_std <= init_std <= max_std", "2.0"]),
    "s4-v-gaussian-std-nan": (*V, ["policy.head=gaussian", "policy.gaussian.init_std=nan"],
                              ["policy.gaussian.init_std", "nan"]),
    "s4-v-flow-eta-nan": (*V, ["policy.flow.eta=nan"], ["policy.flow.eta", "nan"]),
    "s4-v-flow-steps-0": (*V, ["policy.flow.num_steps=0"], ["flow.num_steps", ">= 1", "0"]),
    "s4-v-sft-image-shift-neg": (*V, ["sft.image_shift=-1"], ["sft.image_shift", "-1"]),
    "s4-v-sft-wd-nan": (*V, ["sft.weight_decay=nan"], ["sft.weight_decay", "nan"]),
    # was: h5py's errno dump
    "s4-v-demo-path-dir": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "sft.demo_path={assets}/empty_dir"],
                           ["sft.demo_path", "empty_dir", "is a directory"]),
    "s4-v-demo-path-junk": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "sft.demo_path={assets}/junk.hdf5"],
                            ["sft.demo_path", "junk.hdf5"]),
    "s4-v-init-policy-missing": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "sft.init_policy={assets}/no_policy"],
                                 ["sft.init_policy", "no_policy"]),
    "s4-v-init-and-base-policy": (*V, ["sft.init_policy={assets}/empty_dir", "sft.base_policy={assets}/empty_dir"],
                                  ["sft.init_policy", "sft.base_policy"]),
    "s4-v-srpo-num-frames-0": (*V, ["srpo.num_frames=0"], ["srpo.num_frames", "0"]),
    "s4-v-srpo-eps-0": (*V, ["srpo.dbscan_eps=0"], ["srpo.dbscan_eps", "0"]),
    "s4-v-srpo-min-samples-0": (*V, ["srpo.min_samples=0"], ["min_samples >= 1", "0"]),
    "s4-v-srpo-progress-max-nan": (*V, ["srpo.progress_max=nan"], ["srpo.progress_max", "nan"]),
    "s4-v-srpo-progress-max-2": (*V, ["srpo.progress_max=2"], ["srpo.progress_max", "2"]),
    "s4-v-srpo-encoder-path-wrong-keys": ("vla_rl.cli", ["train", V_CFG],
                                          [*V_TINY, "rl.reward=srpo", "srpo.encoder=progress",
                                           "srpo.encoder_path={assets}/wrongkeys.safetensors"],
                                          ["srpo.encoder_path", "wrongkeys.safetensors"]),
    "s4-v-device-cuda-abc": (*V, ["device=cuda:abc"], ["cuda:abc"]),
    "s4-v-device-empty": (*V, ["device="], ["device"]),
    "s4-v-lr-schedule-case": (*V, ["rl.lr_schedule=Cosine"], ["rl.lr_schedule", "Cosine"]),
    "s4-v-iterations-bool": (*V, ["rl.iterations=yes"], ["rl.iterations", "True"]),
    "s4-v-typo-section": (*V, ["polcy.image_size=32"], ["polcy", "did you mean"]),
    "s4-v-yaml-list": ("vla_rl.cli", ["train", "{assets}/list.yaml", "--dry-run"], [], ["list.yaml", "mapping"]),
    "s4-v-yaml-nested-dup": ("vla_rl.cli", ["train", "{assets}/nested_dup.yaml", "--dry-run"], [],
                             ["nested_dup.yaml", "twice"]),
    "s4-v-gdpo-weights-unused": (*V, ["grpo.reward_weights={success: 1}"], ["grpo.reward_weights", "gdpo"]),
    "s4-v-plan-mfu-nan": ("vla_rl.cli", ["train", "configs/vla/smolvla_reach_one.yaml", "--plan"], ["--mfu", "nan"],
                          ["--mfu", "nan"]),
    # vla-rl eval / report / record-demos / fit-encoder / loop / serve-reward
    "s4-v-eval-file": ("vla_rl.cli", ["eval", "{assets}/a_file"], [], ["a_file"]),
    "s4-v-eval-device-meta": ("vla_rl.cli", ["eval", "{vrun}", "--device", "meta"], [], ["meta"]),
    "s4-v-eval-episodes-float": ("vla_rl.cli", ["eval", "{vrun}", "--episodes", "2.5"], [], ["--episodes", "2.5"]),
    "s4-v-report-missing": ("vla_rl.cli", ["report", "{assets}/no_run", "--out", "{assets}/r13.html"], [],
                            ["no_run"]),
    "s4-v-report-metrics-list-rows": ("vla_rl.cli", ["report", "{assets}/metrics_list", "--out", "{assets}/r14.html"],
                                      [], ["metrics_list"]),
    "s4-v-report-safetensors": ("vla_rl.cli", ["report", "{assets}/wrongkeys.safetensors", "--out",
                                               "{assets}/r15.html"], [], ["wrongkeys.safetensors"]),
    "s4-r-noise-neg": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--noise", "-1"], [],
                       ["--noise", "-1"]),
    "s4-r-task-empty": ("vla_rl.cli", ["record-demos", "", "1", "{assets}/r.hdf5"], [], ["task"]),
    "s4-r-out-empty": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", ""], [], ["out"]),
    "s4-r-out-dir": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/empty_dir"], [], ["empty_dir"]),
    "s4-r-n-neg": ("vla_rl.cli", ["record-demos", "tabletop/reach", "-3", "{assets}/r.hdf5"], [], ["-3"]),
    "s4-r-format-unknown": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--format",
                                           "csv"], [], ["--format", "csv"]),
    "s4-fe-steps-0": (*FE, ["train.steps=0"], ["train.steps", "0"]),
    "s4-fe-lr-nan": (*FE, ["train.lr=nan"], ["train.lr", "nan"]),
    "s4-fe-output-empty": (*FE, ["output="], ["output"]),
    "s4-fe-output-dir": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output={assets}/empty_dir"], ["empty_dir"]),
    "s4-fe-output-in-file": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output={assets}/a_file/e.safetensors"],
                             ["a_file/e.safetensors"]),
    "s4-fe-demo-paths-string": (*FE, ["data.demo_paths={assets}/junk.hdf5"], ["data.demo_paths"]),
    "s4-fe-image-size-0": (*FE, ["model.image_size=0"], ["model.image_size", "0"]),
    "s4-fe-typo": (*FE, ["dta.camera=agentview"], ["dta", "did you mean"]),
    "s4-fe-yaml-list": ("vla_rl.cli", ["fit-encoder", "{assets}/list.yaml", "--dry-run"], [], ["list.yaml", "mapping"]),
    "s4-l-sim-noise-without-reward": (*L, ["vla.rl.sim_progress_noise=0.2"],
                                      ["vla.rl.sim_progress_noise", "sim_progress"]),
    "s4-l-horizon-0": (*L, ["data.horizon=0"], ["data.horizon", "0"]),
    "s4-l-start-pool-0": (*L, ["data.start_pool=0"], ["data.start_pool", "0"]),
    "s4-l-noise-nan": (*L, ["data.noise=nan"], ["data.noise", "nan"]),
    "s4-l-near-progress-nan": (*L, ["data.near_progress=[.nan, 0.8]"], ["data.near_progress", "nan"]),
    "s4-l-train-counts-neg": (*L, ["data.train={success: -1}"], ["data.train", "-1"]),
    # was: accepted, then a traceback after the data collection
    "s4-l-wm-image-mismatch": (*L, ["models.wm.image_size=64"], ["models.wm.image_size=64", "data.image_size=32"]),
    "s4-l-wm-patch-not-divisor": (*L, ["models.wm.patch=5"], ["image_size 32", "divisible by patch 5"]),
    "s4-l-wm-lr-nan": (*L, ["models.wm_lr=nan"], ["models.wm_lr", "nan"]),
    "s4-l-imagined-fraction-2": (*L, ["models.success_imagined_fraction=2"],
                                 ["models.success_imagined_fraction", "2"]),
    # was: a line without the value
    "s4-l-rl-iterations-neg": (*L, ["rl_iterations=-1"], ["rl_iterations", ">= 0", "-1"]),
    "s4-l-real-eval-0": (*L, ["real_eval_episodes=0"], ["real_eval_episodes", "0"]),
    "s4-l-device-meta": (*L, ["device=meta"], ["meta"]),
    "s4-l-yaml-scalar": ("vla_rl.cli", ["loop", "{assets}/scalar.yaml", "--dry-run"], [], ["scalar.yaml", "mapping"]),
    "s4-v-serve-port-neg-huge": ("vla_rl.cli", ["serve-reward", "rewards.success:success_reward", "--port",
                                                "99999999999999999999"], [], ["--port", "0..65535"]),
    # was: accepted by a dry run that then filled GBs of memory (a schedule, prompts or embeddings of 1e8-1e9), or a
    # run that would record / sample for days
    "s4-d-num-eval-huge": (*D, ["prompts.num_eval=1000000000"], ["prompts.num_eval=1000000000", "at most 100000"]),
    "s4-d-num-steps-huge": (*D, ["sampler.num_steps=1000000000"], ["sampler.num_steps=1000000000", "at most 10000"]),
    "s4-d-max-seq-huge": (*D, ["model.max_sequence_length=100000000"],
                          ["model.max_sequence_length=100000000", "at most 8192"]),
    "s4-d-lora-rank-huge": (*D, ["model.lora.rank=100000000"], ["lora.rank=100000000", "at most 8192"]),
    "s4-d-group-huge": (*D, ["grpo.group_size=1000000000"], ["group_size=1000000000", "at most 100000"]),
    "s4-v-group-huge": (*V, ["grpo.group_size=1000000000"], ["group_size=1000000000", "at most 100000"]),
    "s4-v-flow-steps-huge": (*V, ["policy.flow.num_steps=1000000000"],
                             ["flow.num_steps=1000000000", "at most 10000"]),
    "s4-v-demos-huge": (*V, ["sft.demos_per_task=100000000"], ["sft.demos_per_task=100000000", "at most 1000000"]),
    # checkpoints whose weights carry another model's names; serve-reward on a host that does not resolve
    "s4-d-export-wrong-keys": ("diffusion_rl.cli", ["export", "{drun_wrongkeys_dir}", "{assets}/exp_wk"], [],
                               ["export", "x.transformer_blocks", "a checkpoint of another model", "nothing written"]),
    "s4-d-eval-wrong-keys": ("diffusion_rl.cli", ["eval", "{drun_wrongkeys_dir}"], [],
                             ["x.transformer_blocks", "this model does not have"]),
    "s4-d-resume-wrong-keys": ("diffusion_rl.cli", ["train", D_CFG],
                               ["{drun_wrongkeys}", *D_TINY, "train.iterations=2"],
                               ["x.transformer_blocks", "this model does not have"]),
    "s4-v-eval-wrong-keys": ("vla_rl.cli", ["eval", "{vrun_wrongkeys_dir}"], [], ["model.safetensors"]),
    "s4-d-serve-host-unknown": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--host", "nosuchhost.invalid",
                                                     "--port", "0"], [], ["nosuchhost.invalid:0", "cannot listen"]),
    "s4-v-serve-kwargs-string": ("vla_rl.cli", ["serve-reward", "rewards.success:success_reward", "--port", "0",
                                                "--kwargs", '"x"'], [], ["--kwargs"]),
}
CASES.update(SWEEP)
CASES.update(SWEEP_2)
CASES.update(SWEEP_3)
# the fifth misuse sweep: a run directory of another command (was: `vla-rl loop` into a `vla-rl train` run emptied its
# metrics.jsonl; train / toy refused with a diff of every key, after the toy had rewritten run_info.json), a refused
# toy resume (was: its logs opened first), keys eval takes as overrides that train refuses. "was:" marks the failures
SWEEP_5 = {
    "s5-l-output-vla-run": ("vla_rl.cli", ["loop", L_CFG], ["{vrun_copy}", "cycles=1"],
                            ["output_dir=", "another job", "not a WorldLoopConfig run", "env, policy, sft"]),
    "s5-l-output-diffusion-run": ("vla_rl.cli", ["loop", L_CFG], ["{drun_copy}", "cycles=1"],
                                  ["another job", "not a WorldLoopConfig run"]),
    "s5-d-output-vla-run": ("diffusion_rl.cli", ["train", D_CFG], ["{vrun_copy}", *D_TINY],
                            ["another job", "not a DiffusionRLConfig run", "env, policy, sft"]),
    "s5-d-output-toy-run": ("diffusion_rl.cli", ["train", D_CFG], ["{trun_copy}", *D_TINY],
                            ["another job", "not a DiffusionRLConfig run", "model.hidden"]),
    "s5-v-output-diffusion-run": ("vla_rl.cli", ["train", V_CFG], ["{drun_copy}", *V_TINY],
                                  ["another job", "not a VLARLConfig run", "model, sampler"]),
    "s5-t-output-diffusion-run": ("diffusion_rl.cli", ["toy", T_CFG], ["{drun_copy}", "train.iterations=2"],
                                  ["another job", "not a ToyConfig run", "model.kind"]),
    "s5-t-resume-other-config": ("diffusion_rl.cli", ["toy", T_CFG], ["{trun_copy}", "train.iterations=2",
                                                                      "train.lr=0.5"],
                                 ["refusing to resume", "train.lr", "0.5"]),
    # a damaged toy checkpoint on resume: one line naming the file, left as it is (was: a safetensors traceback, or
    # "Invalid control character at: line 1 column 17" naming no file)
    "s5-t-resume-truncated": ("diffusion_rl.cli", ["toy", T_CFG], ["{trun_truncated}", "train.iterations=2"],
                              ["model.safetensors", "corrupt safetensors", "left untouched"]),
    "s5-t-resume-garbled-state": ("diffusion_rl.cli", ["toy", T_CFG], ["{trun_garbled}", "train.iterations=2"],
                                  ["state.json", "corrupt checkpoint state", "left untouched"]),
    # a success band beyond [0, 1] (e.g. [1, 2]) keeps no group: the run trained on nothing (was: accepted)
    "s5-v-success-band-beyond-1": (*V, ["rl.success_band=[1, 2]"], ["rl.success_band", "low < 1 and high > 0",
                                                                     "[1.0, 2.0]"]),
    # a policy directory without config.json (here a diffusion-rl run): was, for the loop, data collected and logs
    # written before the policy failed to load
    "s5-l-base-policy-not-a-policy": ("vla_rl.cli", ["loop", L_CFG], ["vla.sft.base_policy={drun}", "cycles=1"],
                                      ["vla.sft.base_policy=", "no saved policy there", "config.json"]),
    "s5-d-eval-seed-neg": ("diffusion_rl.cli", ["eval", "{drun}", "seed=-1"], [], ["seed", ">= 0", "-1"]),
    "s5-d-eval-seed-2-64": ("diffusion_rl.cli", ["eval", "{drun}", "seed=18446744073709551616"], [],
                            ["seed", "2**32 - 1"]),
    "s5-d-eval-inactive-key": ("diffusion_rl.cli", ["eval", "{drun}", "reward.remote.timeout_s=5"], [],
                               ["reward.remote.timeout_s", "does nothing"]),
    # sizes no memory holds, or counts that would record / sample for days: was accepted by the dry run, then the run
    # died in a traceback building the model (a width of 1e9 asked 548 GB) or ran on, unbounded
    "s5-d-prompts-per-iter-huge": (*D, ["train.prompts_per_iter=1000000000"],
                                   ["train.prompts_per_iter=1000000000", "at most 100000"]),
    "s5-v-groups-per-task-huge": (*V, ["rl.groups_per_task=1000000000"], ["rl.groups_per_task=1000000000", "at most"]),
    "s5-v-ctx-dim-huge": (*V, ["policy.ctx_dim=1000000000"], ["policy.ctx_dim=1000000000", "at most 8192"]),
    "s5-v-text-dim-huge": (*V, ["policy.text_dim=1000000000"], ["policy.text_dim=1000000000", "at most 8192"]),
    "s5-v-chunk-size-huge": (*V, ["policy.chunk_size=100000000"], ["policy.chunk_size=100000000", "at most 8192"]),
    "s5-v-conv-channels-huge": (*V, ["policy.conv_channels=[16, 1000000000]"],
                                ["policy.conv_channels=[16, 1000000000]", "at most 8192"]),
    "s5-v-max-text-len-huge": (*V, ["policy.max_text_len=1000000000"], ["policy.max_text_len", "at most 8192"]),
    "s5-v-action-dim-huge": (*V, ["policy.action_dim=1000000000"], ["policy.action_dim", "at most 8192"]),
    "s5-v-state-dim-huge": (*V, ["policy.state_dim=1000000000"], ["policy.state_dim", "at most 8192"]),
    "s5-v-flow-hidden-huge": (*V, ["policy.flow.hidden=1000000000"], ["flow.hidden=1000000000", "at most 8192"]),
    "s5-v-flow-layers-huge": (*V, ["policy.flow.layers=1000000000"], ["flow.layers=1000000000", "at most 256"]),
    "s5-v-gaussian-hidden-huge": (*V, ["policy.head=gaussian", "policy.gaussian.hidden=1000000000"],
                                  ["gaussian.hidden", "at most 8192"]),
    "s5-l-vla-ctx-dim-huge": (*L, ["vla.policy.ctx_dim=1000000000"], ["policy.ctx_dim", "at most 8192"]),
    "s5-l-start-pool-huge": (*L, ["data.start_pool=1000000000"], ["data.start_pool=1000000000", "at most 1000000"]),
    "s5-l-train-count-huge": (*L, ["data.train={success: 1000000000}"], ["data.train", "at most 1000000"]),
    "s5-fe-play-horizon-huge": (*FE, ["data.play_horizon=1000000000"], ["data.play_horizon", "at most 1000000"]),
    "s5-fe-expert-per-task-huge": (*FE, ["data.expert_per_task=1000000000"],
                                   ["data.expert_per_task", "at most 1000000"]),
    "s5-t-hidden-huge": (*T, ["model.hidden=1000000000"], ["model.hidden=1000000000", "at most 8192"]),
    "s5-t-steps-huge": (*T, ["sampler.num_steps=1000000000"], ["sampler.num_steps", "at most 10000"]),
    "s5-t-prompts-per-iter-huge": (*T, ["train.prompts_per_iter=1000000000"], ["train.prompts_per_iter", "at most"]),
    "s5-t-eval-samples-huge": (*T, ["train.eval_samples=1000000000"], ["train.eval_samples", "at most 1000000"]),
    "s5-p-hidden-huge": (*PS, ["--hidden", "1000000"], ["--hidden=1000000", "at most 4096"]),
    "s5-p-layers-huge": (*PS, ["--layers", "1000000"], ["--layers=1000000", "at most 256"]),
    "s5-p-batch-huge": (*PS, ["--batch", "1000000000"], ["--batch=1000000000", "at most 65536"]),
    # (was: "embedded null byte", naming no key; a traceback from Path.expanduser)
    "s5-d-yaml-nul-byte": ("diffusion_rl.cli", ["train", "{assets}/nul.yaml", "--dry-run"], [],
                           ["nul.yaml", "'reward.name' holds a NUL byte", "'shapes\\x00verifier'"]),
    "s5-d-output-dir-unknown-user": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir=~nosuchuser_bl/run", *D_TINY],
                                     ["'output_dir'='~nosuchuser_bl/run'", "no home directory"]),
    "s5-fe-output-unknown-user": (*FE, ["output=~nosuchuser_bl/e.safetensors"],
                                  ["'output'='~nosuchuser_bl/e.safetensors'", "no home directory"]),
    # (was: served, then time.sleep overflowed on every request)
    "s5-d-serve-delay-huge": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "0", "--delay-s",
                                                   "1e30"], [], ["--delay-s=1e+30", "at most 3600"]),
    # already refused, never in a table: wrong types, numbers out of range, empty YAML files, paths of the wrong kind,
    # eval's overrides, export of a folder without a checkpoint, flags of another command
    "s5-d-bool-as-string": (*D, ["train.log_images='true'"], ["train.log_images", "expects bool", "'true'"]),
    "s5-d-dict-for-int": (*D, ["grpo.group_size={a: 1}"], ["grpo.group_size", "expects int", "{'a': 1}"]),
    "s5-d-list-for-int": (*D, ["model.height=[16]"], ["model.height", "expects int", "[16]"]),
    "s5-d-seed-float": (*D, ["seed=1.0"], ["seed", "expects int", "1.0"]),
    "s5-d-seed-string": (*D, ["seed='0'"], ["seed", "expects int", "'0'"]),
    "s5-d-timestep-fraction-1.5": (*D, ["sampler.timestep_fraction=1.5"], ["sampler.timestep_fraction", "(0, 1]"]),
    "s5-d-clip-low-neg": (*D, ["grpo.clip_low=-0.5"], ["grpo.clip_low", ">= 0", "-0.5"]),
    "s5-d-ema-neg": (*D, ["train.ema_decay=-0.5"], ["train.ema_decay", ">= 0", "-0.5"]),
    "s5-d-lr-min-ratio-neg": (*D, ["train.lr_min_ratio=-1"], ["train.lr_min_ratio", "[0, 1]"]),
    "s5-d-unknown-section": (*D, ["nosuchsection={a: 1}"], ["unknown config key 'nosuchsection'"]),
    "s5-d-dot-into-list": (*D, ["model.lora.targets.x=1"], ["model.lora.targets", "expects list[str]"]),
    "s5-d-output-dir-is-file": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir={assets}/a_file", *D_TINY],
                                ["{assets}/a_file", "is a file, not a directory"]),
    "s5-d-eval-height-15": ("diffusion_rl.cli", ["eval", "{drun}", "model.height=15"], [],
                            ["model.height=15", "multiples of 4"]),
    "s5-d-eval-num-eval-huge": ("diffusion_rl.cli", ["eval", "{drun}", "prompts.num_eval=1000000000"], [],
                                ["prompts.num_eval=1000000000", "at most 100000"]),
    "s5-d-eval-device-meta": ("diffusion_rl.cli", ["eval", "{drun}", "model.device=meta"], [], ["device 'meta'"]),
    "s5-d-eval-lora-rank": ("diffusion_rl.cli", ["eval", "{drun}", "model.lora.rank=2"], [],
                            ["has shape [4, 32]", "this model's is [2, 32]"]),
    "s5-d-eval-no-equals": ("diffusion_rl.cli", ["eval", "{drun}", "noequals"], [], ["'noequals'", "key=value"]),
    "s5-d-eval-reward-unknown": ("diffusion_rl.cli", ["eval", "{drun}", "reward.name=nosuch"], [],
                                 ["unknown reward 'nosuch'"]),
    "s5-d-export-run-without-checkpoint": ("diffusion_rl.cli", ["export", "{assets}/metrics_only", "{assets}/exp_m"],
                                           [], ["metrics_only", "holds no checkpoint"]),
    "s5-v-eval-device-empty": ("vla_rl.cli", ["eval", "{vrun}", "--device", ""], [], ["device ''", "torch device"]),
    "s5-v-eval-empty-dir": ("vla_rl.cli", ["eval", "{assets}/empty_dir"], [], ["empty_dir", "holds no checkpoint"]),
    "s5-v-clip-low-neg": (*V, ["grpo.clip_low=-0.5"], ["grpo.clip_low", ">= 0"]),
    "s5-v-env-kwargs-list": (*V, ["env.kwargs=[1]"], ["env.kwargs", "expects dict"]),
    "s5-v-env-image-size-string": (*V, ["env.kwargs={image_size: big}"], ["env.kwargs.image_size='big'"]),
    "s5-v-env-image-size-huge": (*V, ["env.kwargs={image_size: 1000000}"], ["image_size", "[16, 1024]", "1000000"]),
    "s5-v-env-max-delta-nan": (*V, ["env.kwargs={max_delta: .nan}"], ["max_delta", "nan"]),
    "s5-v-env-control-freq-0": (*V, ["env.kwargs={control_freq: 0}"], ["control_freq", "got 0"]),
    "s5-v-yaml-empty": ("vla_rl.cli", ["train", "{assets}/empty.yaml", "--dry-run"], [], ["empty.yaml", "empty"]),
    "s5-l-yaml-empty": ("vla_rl.cli", ["loop", "{assets}/empty.yaml", "--dry-run"], [], ["empty.yaml", "empty"]),
    "s5-fe-yaml-empty": ("vla_rl.cli", ["fit-encoder", "{assets}/empty.yaml", "--dry-run"], [], ["empty.yaml"]),
    "s5-t-yaml-empty": ("diffusion_rl.cli", ["toy", "{assets}/empty.yaml", "--dry-run"], [], ["empty.yaml", "empty"]),
    "s5-l-near-progress-2": (*L, ["data.near_progress=[0.5, 2]"], ["data.near_progress", "high <= 1"]),
    "s5-l-imagined-fraction-neg": (*L, ["models.success_imagined_fraction=-1"],
                                   ["models.success_imagined_fraction", ">= 0"]),
    "s5-fe-shift-neg": (*FE, ["train.shift=-1"], ["train.shift", ">= 0"]),
    "s5-p-size-odd": (*PS, ["--size", "9"], ["height=9", "multiples of 2"]),
    "s5-p-save-every-neg": (*PS, ["--save-every", "-1"], ["--save-every=-1", ">= 0"]),
    "s5-r-drop-prob-nan": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--drop-prob",
                                          "nan"], [], ["--drop-prob=nan", "[0, 1]"]),
    "s5-r-camera-unknown": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--cameras",
                                           "nosuchcam"], [], ["nosuchcam"]),
    "s5-r-camera-twice": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r.hdf5", "--cameras",
                                         "wrist", "wrist"], [], ["cameras must not repeat"]),
    "s5-lb-env-names-count": ("vla_rl.cli", ["libero-demos", "{assets}/lb.hdf5", "{assets}/a_file", "--env-names",
                                             "a", "b"], [], ["--env-names has 2 names for 1 inputs"]),
    "s5-v-robot-flag-on-train": (*V, ["--robot.type", "so100_follower"], ["train takes no --robot.<field> flags"]),
    "s5-l-plan-gpus-0": ("vla_rl.cli", ["loop", L_CFG, "--plan"], ["--gpus", "0"], ["--gpus='0'", "positive"]),
    "s5-l-plan-mfu-neg": ("vla_rl.cli", ["loop", L_CFG, "--plan"], ["--mfu", "-1"], ["--mfu=-1.0", "(0, 1]"]),
    "s5-d-plan-without-architecture": (*D, ["--plan"], ["model.path=None", "--arch"]),
    "s5-fe-plan": (*FE, ["--plan"], ["unrecognized arguments: --plan"]),
    "s5-t-plan": (*T, ["--plan"], ["unrecognized arguments: --plan"]),
}
# the sixth misuse sweep: YAML values PyYAML cannot build, overrides that silently undid an earlier one, symlink loops,
# FIFOs, an output directory inside another run (or a checkpoint), weights of another kind, the launcher's and the
# renderer's environment variables. "was:" marks the cases that failed before this sweep; the others were already
# refused and cover an input class no earlier sweep touched
S6_SRPO = ["rl.reward=srpo", "srpo.encoder=small"]
SWEEP_6 = {
    # was: PyYAML's IndexError traceback (an empty !!float / !!int), or its bare ValueError naming no key or file
    "s6-d-yaml-tag-empty": ("diffusion_rl.cli", ["train", "{assets}/tag_empty.yaml", "--dry-run"], [],
                            ["tag_empty.yaml", "not valid YAML", "tagged value", "IndexError"]),
    "s6-v-yaml-tag-empty": ("vla_rl.cli", ["train", "{assets}/tag_empty.yaml", "--dry-run"], [],
                            ["tag_empty.yaml", "tagged value"]),
    "s6-d-yaml-tag-timestamp": ("diffusion_rl.cli", ["train", "{assets}/tag_timestamp.yaml", "--dry-run"], [],
                                ["tag_timestamp.yaml", "tagged value", "month must be in 1..12"]),
    "s6-d-override-tag-empty": (*D, ["seed=!!float"], ["override 'seed=!!float'", "tagged value"]),
    "s6-d-override-tag-int-abc": (*D, ["seed=!!int abc"], ["override 'seed=!!int abc'", "invalid literal for int()"]),
    "s6-v-override-tag-empty": (*V, ["rl.iterations=!!int"], ["override 'rl.iterations=!!int'", "tagged value"]),
    "s6-l-override-tag-empty": (*L, ["cycles=!!int"], ["override 'cycles=!!int'", "tagged value"]),
    "s6-fe-override-tag-empty": (*FE, ["seed=!!float"], ["override 'seed=!!float'", "tagged value"]),
    "s6-t-override-tag-empty": (*T, ["seed=!!float"], ["override 'seed=!!float'", "tagged value"]),
    # was: accepted, the earlier override silently dropped (a mapping override replaced the section the earlier
    # key=value had set; over the YAML file's section it merges)
    "s6-d-override-section-after-leaf": (*D, ["train.lr=-1", "train={iterations: 1}"], ["train.lr must be > 0", "-1"]),
    "s6-v-override-section-after-leaf": (*V, ["rl.lr=nan", "rl={iterations: 1}"], ["rl.lr", "finite", "nan"]),
    "s6-l-override-section-after-leaf": (*L, ["data.noise=-1", "data={horizon: 8}"], ["data.noise", ">= 0"]),
    # was: pathlib's "Symlink loop" RuntimeError traceback
    "s6-d-output-symlink-loop": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir={assets}/loop1", *D_TINY],
                                 ["output_dir=", "loop1", "symlink that leads nowhere"]),
    "s6-v-output-symlink-loop": ("vla_rl.cli", ["train", V_CFG], ["output_dir={assets}/loop1/run", *V_TINY],
                                 ["output_dir=", "loop1", "symlink that leads nowhere"]),
    "s6-t-output-symlink-loop": ("diffusion_rl.cli", ["toy", T_CFG],
                                 ["output_dir={assets}/loop2", "train.iterations=1"],
                                 ["output_dir=", "loop2", "symlink that leads nowhere"]),
    "s6-l-output-symlink-loop": ("vla_rl.cli", ["loop", L_CFG], ["output_dir={assets}/loop1", "cycles=1"],
                                 ["output_dir=", "loop1", "symlink that leads nowhere"]),
    "s6-d-export-out-symlink-loop": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/loop1"], [],
                                     ["OUT=", "loop1", "symlink that leads nowhere"]),
    "s6-d-report-run-symlink-loop": ("diffusion_rl.cli", ["report", "{assets}/loop1", "--out", "{assets}/r_loop.html"],
                                     [], ["loop1", "a symlink loop"]),
    "s6-p-out-symlink-loop": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/loop1", "--steps", "1"], [],
                              ["--out=", "loop1", "symlink that leads nowhere"]),
    "s6-fe-output-symlink-loop": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output={assets}/loop1/e.safetensors"],
                                  ["loop1", "symlink that leads nowhere"]),
    "s6-r-out-symlink-loop": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/loop1/d.hdf5"], [],
                              ["loop1", "symlink that leads nowhere"]),
    # was: the run written into the other run's checkpoint / policy folder, or into a saved policy
    "s6-d-output-in-checkpoint": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir={drun_copy_ck}", *D_TINY],
                                  ["step_000001", "is inside the run directory", "drun_copy"]),
    "s6-d-output-in-vla-policy": ("diffusion_rl.cli", ["train", D_CFG], ["output_dir={vrun_copy_dir}/policy", *D_TINY],
                                  ["/policy", "is inside the run directory", "vrun_copy"]),
    "s6-d-output-saved-policy": ("diffusion_rl.cli", ["train", D_CFG],
                                 ["output_dir=vla_rl/assets/tabletop_base", *D_TINY],
                                 ["tabletop_base", "holds config.json", "not a run directory"]),
    "s6-v-output-in-checkpoint": ("vla_rl.cli", ["train", V_CFG], ["output_dir={vrun_copy_ck}", *V_TINY],
                                  ["is inside the run directory", "vrun_copy"]),
    "s6-t-output-in-checkpoints": ("diffusion_rl.cli", ["toy", T_CFG],
                                   ["output_dir={trun_copy_dir}/checkpoints", "train.iterations=1"],
                                   ["/checkpoints", "is inside the run directory"]),
    "s6-l-output-in-checkpoints": ("vla_rl.cli", ["loop", L_CFG], ["output_dir={vrun_copy_dir}/checkpoints/wm",
                                                                   "cycles=1"],
                                   ["checkpoints/wm", "is inside the run directory"]),
    # was: fit-encoder --force replaced the run's policy weights with an encoder
    "s6-fe-output-in-checkpoint": ("vla_rl.cli", ["fit-encoder", FE_CFG, "--force"],
                                   ["output={vrun_copy_ck}/model.safetensors"],
                                   ["model.safetensors", "inside the checkpoint directory"]),
    "s6-r-out-in-checkpoint": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{vrun_copy_ck}/demos.hdf5"], [],
                               ["demos.hdf5", "inside the checkpoint directory"]),
    # was: a hang (h5py's / read_text's open of a FIFO blocks until a writer comes); prompts.file: "does not exist"
    "s6-v-demo-fifo": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "sft.demo_path={assets}/fifo.hdf5"],
                       ["sft.demo_path", "fifo.hdf5", "not a regular file"]),
    "s6-l-demo-fifo": ("vla_rl.cli", ["loop", L_CFG], ["vla.sft.demo_path={assets}/fifo.hdf5", "cycles=1"],
                       ["vla.sft.demo_path", "fifo.hdf5", "not a regular file"]),
    "s6-fe-demo-fifo": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["data.demo_paths=[{assets}/fifo.hdf5]",
                                                                "output={assets}/e_fifo.safetensors"],
                        ["data.demo_paths", "fifo.hdf5", "not a regular file"]),
    "s6-d-prompts-fifo": (*D, ["prompts.source=file", "prompts.file={assets}/fifo.yaml"],
                          ["prompts.file", "fifo.yaml", "not a regular file"]),
    "s6-d-config-fifo": ("diffusion_rl.cli", ["train", "{assets}/fifo.yaml", "--dry-run"], [],
                         ["fifo.yaml", "not a regular file"]),
    "s6-fe-config-fifo": ("vla_rl.cli", ["fit-encoder", "{assets}/fifo.yaml", "--dry-run"], [],
                          ["fifo.yaml", "not a regular file"]),
    "s6-l-config-symlink-loop": ("vla_rl.cli", ["loop", "{assets}/loop1", "--dry-run"], [], ["loop1", "not found"]),
    "s6-d-lora-init-fifo": (*D, ["model.lora_init={assets}/fifo.yaml"], ["model.lora_init", "fifo.yaml"]),
    # was: torch's load_state_dict traceback (every key listed) after the SFT stage: a file that is no small encoder
    "s6-v-srpo-small-wrong-keys": ("vla_rl.cli", ["train", V_CFG],
                                   [*V_TINY, *S6_SRPO, "srpo.encoder_path={assets}/wrongkeys.safetensors"],
                                   ["srpo.encoder_path", "not the weights of srpo.encoder=small", "'foo'"]),
    "s6-v-srpo-small-diffusion-lora": ("vla_rl.cli", ["train", V_CFG],
                                       [*V_TINY, *S6_SRPO,
                                        "srpo.encoder_path={drun}/checkpoints/step_000001/trainable.safetensors"],
                                       ["srpo.encoder_path", "not the weights of srpo.encoder=small"]),
    "s6-v-srpo-small-junk": ("vla_rl.cli", ["train", V_CFG],
                             [*V_TINY, *S6_SRPO, "srpo.encoder_path={assets}/junk.safetensors"],
                             ["srpo.encoder_path", "not a readable safetensors file"]),
    "s6-v-srpo-progress-diffusion-lora": ("vla_rl.cli", ["train", V_CFG],
                                          [*V_TINY, "rl.reward=srpo", "srpo.encoder=progress",
                                           "srpo.encoder_path={drun}/checkpoints/step_000001/trainable.safetensors"],
                                          ["srpo.encoder_path", "expected 'progress'"]),
    # the launcher's environment (was: int()'s message naming no variable; RANK=5 of 2 waited for a rendezvous that
    # never comes; RANK without WORLD_SIZE ran as one process) and MuJoCo's (was: mujoco's RuntimeError traceback)
    "s6-d-env-world-size-abc": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY], ["WORLD_SIZE='abc'", "integer >= 1"]),
    "s6-d-env-rank-beyond-world": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY],
                                   ["RANK=5 with WORLD_SIZE=2", "0 <= RANK < WORLD_SIZE"]),
    "s6-t-env-world-without-rank": ("diffusion_rl.cli", ["toy", T_CFG], ["train.iterations=1"],
                                    ["WORLD_SIZE=2 but RANK is not set", "torchrun"]),
    "s6-v-env-rank-without-world": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["RANK=1 with WORLD_SIZE=1"]),
    "s6-v-env-local-rank-neg": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["LOCAL_RANK='-1'", "integer >= 0"]),
    "s6-v-env-mujoco-gl": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["MUJOCO_GL='nonsense'", "egl, osmesa"]),
    "s6-r-env-mujoco-gl": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r_gl.hdf5"], [],
                           ["MUJOCO_GL='nonsense'", "egl, osmesa"]),
    # (was: torch's "set_num_threads expects a positive integer" traceback; in a fresh process libgomp's own warning
    # about the value comes first, at torch's import)
    "s6-p-env-omp-0": (*PS, [], ["OMP_NUM_THREADS='0'", "positive integer"]),
    "s6-v-env-omp-abc": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["OMP_NUM_THREADS='abc'", "positive integer"]),
    # was: a hang (a FIFO where a run keeps state.json, run_info.json or its latest pointer: the open blocked)
    "s6-d-eval-state-fifo": ("diffusion_rl.cli", ["eval", "{drun_fifostate_dir}"], [],
                             ["state.json", "not a regular file"]),
    "s6-d-export-state-fifo": ("diffusion_rl.cli", ["export", "{drun_fifostate_dir}", "{assets}/exp_fifo"], [],
                               ["state.json", "not a regular file"]),
    "s6-v-resume-state-fifo": ("vla_rl.cli", ["train", V_CFG], ["{vrun_fifostate}", *V_TINY, "rl.iterations=2"],
                               ["resume:", "state.json", "not a regular file", "left untouched"]),
    "s6-t-resume-state-fifo": ("diffusion_rl.cli", ["toy", T_CFG], ["{trun_fifostate}", "train.iterations=2"],
                               ["resume:", "state.json", "not a regular file"]),
    "s6-d-resume-run-info-fifo": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_fifoinfo}", *D_TINY,
                                                                         "train.iterations=2"],
                                  ["run_info.json", "not a regular file"]),
    "s6-v-eval-latest-fifo": ("vla_rl.cli", ["eval", "{vrun_fifolatest_dir}"], [], ["latest", "not a regular file"]),
    # was: accepted and ignored (eval writes no run: an output_dir / resume / training key of eval did nothing)
    "s6-d-eval-output-dir-override": ("diffusion_rl.cli", ["eval", "{drun}", "output_dir={assets}/eval_out"], [],
                                      ["output_dir does nothing in eval", "model, sampler, prompts"]),
    "s6-d-eval-iterations-override": ("diffusion_rl.cli", ["eval", "{drun}", "train.iterations=5"], [],
                                      ["train.iterations does nothing in eval"]),
    "s6-d-eval-resume-override": ("diffusion_rl.cli", ["eval", "{drun}", "resume=false"], [],
                                  ["resume does nothing in eval"]),
    # was: accepted (a policy never rolled out), or refused only after the expert episodes were recorded
    "s6-fe-policy-without-episodes": (*FE, ["data.policy=builtin:tabletop_base"],
                                      ["data.policy='builtin:tabletop_base' does nothing", "data.policy_per_task=0"]),
    "s6-fe-policy-not-a-policy": ("vla_rl.cli", ["fit-encoder", FE_CFG],
                                  ["data.policy={drun}", "data.policy_per_task=1", "output={assets}/e_pol.safetensors"],
                                  ["data.policy=", "no saved policy there", "config.json"]),
    # already refused, a new class: damaged safetensors headers (a length beyond the file, an empty file), weights and
    # models of the other frontend, a device this machine does not have, YAML of several documents / a python tag /
    # comments only, a deep typo, a date where a string goes, and values of the wrong shape
    "s6-d-eval-header-huge": ("diffusion_rl.cli", ["eval", "{drun_hdrhuge_dir}"], [],
                              ["trainable.safetensors", "corrupt safetensors"]),
    "s6-v-eval-header-huge": ("vla_rl.cli", ["eval", "{vrun_hdrhuge_dir}"], [],
                              ["model.safetensors", "corrupt safetensors"]),
    "s6-d-export-header-zero": ("diffusion_rl.cli", ["export", "{drun_hdrzero_dir}", "{assets}/exp_zero"], [],
                                ["trainable.safetensors", "corrupt safetensors", "0 bytes"]),
    "s6-d-resume-header-zero": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_hdrzero}", *D_TINY, "train.iterations=2"],
                                ["corrupt safetensors", "left untouched"]),
    "s6-v-resume-header-huge": ("vla_rl.cli", ["train", V_CFG], ["{vrun_hdrhuge}", *V_TINY, "rl.iterations=2"],
                                ["model.safetensors", "corrupt safetensors", "left untouched"]),
    "s6-d-lora-init-vla-weights": (*D, ["model.lora_init={vrun}/checkpoints/step_000001/model.safetensors"],
                                   ["model.lora_init", "only the denoiser (transformer) LoRA"]),
    "s6-d-model-path-vla-policy": (*D, ["model.path={vrun}/policy"], ["model.path", "no diffusers pipeline"]),
    "s6-v-base-policy-diffusion-checkpoint": ("vla_rl.cli", ["train", V_CFG],
                                              [*V_TINY, "sft.base_policy={drun}/checkpoints/step_000001"],
                                              ["sft.base_policy", "no saved policy there"]),
    "s6-d-eval-weights-file": ("diffusion_rl.cli", ["eval", "{drun}/checkpoints/step_000001/trainable.safetensors"],
                               [], ["trainable.safetensors", "holds no checkpoint"]),
    "s6-v-eval-weights-file": ("vla_rl.cli", ["eval", "{vrun}/checkpoints/step_000001/model.safetensors"], [],
                               ["model.safetensors", "holds no checkpoint"]),
    "s6-d-device-mps": ("diffusion_rl.cli", ["train", D_CFG], ["model.device=mps", *D_TINY], ["'mps'", "MPS"]),
    "s6-v-eval-device-mps": ("vla_rl.cli", ["eval", "{vrun}", "--device", "mps"], [], ["'mps'", "MPS"]),
    "s6-d-yaml-multidoc": ("diffusion_rl.cli", ["train", "{assets}/multidoc.yaml", "--dry-run"], [],
                           ["multidoc.yaml", "another document"]),
    "s6-d-yaml-python-tag": ("diffusion_rl.cli", ["train", "{assets}/pyobj.yaml", "--dry-run"], [],
                             ["pyobj.yaml", "could not determine a constructor"]),
    "s6-t-yaml-comments-only": ("diffusion_rl.cli", ["toy", "{assets}/comments.yaml", "--dry-run"], [],
                                ["comments.yaml", "empty"]),
    "s6-d-yaml-deep-typo": ("diffusion_rl.cli", ["train", "{assets}/deep_typo.yaml", "--dry-run"], [],
                            ["model.lora.rnak", "did you mean 'rank'"]),
    "s6-v-yaml-date-for-string": ("vla_rl.cli", ["train", "{assets}/date.yaml", "--dry-run"], [],
                                  ["log.run_name", "expects str", "date"]),
    "s6-d-override-python-name": (*D, ["seed=!!python/name:os.system"], ["could not determine a constructor"]),
    "s6-d-lr-neg-zero": (*D, ["train.lr=-0.0"], ["train.lr must be > 0", "-0.0"]),
    "s6-v-success-band-3": (*V, ["rl.success_band=[0.1, 0.5, 0.9]"], ["rl.success_band", "expects 2 items, got 3"]),
    "s6-d-lora-targets-nested": (*D, ["model.lora.targets=[[to_q]]"], ["model.lora.targets[0]", "expects str"]),
    "s6-d-group-size-exp": (*D, ["grpo.group_size=1e3"], ["grpo.group_size", "'1e3'"]),
    "s6-v-env-image-size-float": (*V, ["env.kwargs={image_size: 32.0}"], ["image_size", "32.0"]),
    "s6-v-device-upper": (*V, ["device=CPU"], ["device 'CPU'", "not a torch device"]),
    "s6-fe-output-dir-is-run": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["output={vrun}"],
                                ["output=", "expected a path ending in .safetensors"]),
}
# environment variables of a SWEEP_6 case (set for it alone)
ENV_OF = {"s6-d-env-world-size-abc": {"WORLD_SIZE": "abc"},
          "s6-d-env-rank-beyond-world": {"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "127.0.0.1",
                                         "MASTER_PORT": "29533"},
          "s6-t-env-world-without-rank": {"WORLD_SIZE": "2"},
          "s6-v-env-rank-without-world": {"RANK": "1"},
          "s6-v-env-local-rank-neg": {"LOCAL_RANK": "-1"},
          "s6-v-env-mujoco-gl": {"MUJOCO_GL": "nonsense"},
          "s6-r-env-mujoco-gl": {"MUJOCO_GL": "nonsense"},
          "s6-p-env-omp-0": {"OMP_NUM_THREADS": "0"},
          "s6-v-env-omp-abc": {"OMP_NUM_THREADS": "abc"},
          "s7-t-env-master-port-abc": {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                       "MASTER_PORT": "abc"},
          "s7-d-env-master-port-huge": {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                        "MASTER_PORT": "99999"},
          "s7-v-env-master-port-zero": {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"},
          "s7-t-env-world-size-0": {"WORLD_SIZE": "0"},
          "s7-d-env-rank-neg": {"WORLD_SIZE": "2", "RANK": "-1"},
          "s8-v-env-local-rank-beyond-rank": {"LOCAL_RANK": "3"},
          "s8-d-env-local-rank-beyond-rank": {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "1",
                                              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29534"},
          "s8-v-env-world-size-empty": {"WORLD_SIZE": ""},
          "s8-v-env-rank-empty": {"RANK": ""},
          "s8-d-env-rank-float": {"WORLD_SIZE": "2", "RANK": "1.0"},
          "s8-t-env-local-rank-word": {"LOCAL_RANK": "abc"},
          "s8-v-env-pyopengl-platform": {"PYOPENGL_PLATFORM": "nonsense", "MUJOCO_GL": "egl"},
          "s8-r-env-pyopengl-platform-mismatch": {"PYOPENGL_PLATFORM": "osmesa", "MUJOCO_GL": "egl"}}
# the seventh misuse sweep: values of a builder's / sampler's own options (model.tiny, prompts.shapes), sizes and
# rates no run can use (1e9 ODE steps, a learning rate of 1e300), keys the command reads nowhere (eval's rollout and
# training keys, the loop's vla: keys it sets itself), outputs written into another run, a saved model or a checkpoint
# (export --force, report --out), a run with nothing to learn (the toy with no noise), tasks without the expert a
# command drives. "was:" marks the cases that failed before this sweep; the others were already refused
SWEEP_7 = {
    # was: a TypeError / ZeroDivisionError traceback from the tiny builder, a dry run that hung on 1e9 layers, or a line
    # about LoRA targets naming no model.tiny key
    "s7-d-tiny-hidden-string": (*D, ["model.tiny={hidden: abc}"], ["model.tiny.hidden", "expects int", "'abc'"]),
    "s7-d-tiny-layers-float": (*D, ["model.tiny={layers: 2.5}"], ["model.tiny.layers", "expects int", "2.5"]),
    "s7-d-tiny-patch-0": (*D, ["model.tiny={patch_size: 0}"], ["model.tiny.patch_size=0", "[1, 8192]"]),
    "s7-d-tiny-sample-size-0": (*D, ["model.tiny={sample_size: 0}"], ["model.tiny.sample_size=0", "[1, 8192]"]),
    "s7-d-tiny-latent-0": (*D, ["model.tiny={latent_channels: 0}"], ["model.tiny.latent_channels=0"]),
    "s7-d-tiny-layers-huge": (*D, ["model.tiny={layers: 1000000000}"], ["model.tiny.layers=1000000000", "[1, 256]"]),
    "s7-d-tiny-layers-0": (*D, ["model.tiny={layers: 0}"], ["model.tiny.layers=0", "[1, 256]"]),
    "s7-d-tiny-hidden-heads": (*D, ["model.tiny={hidden: 50}"], ["model.tiny.hidden=50", "attention heads"]),
    "s7-d-tiny-seed-neg": (*D, ["model.tiny={seed: -1}"], ["model.tiny.seed=-1", "[0, 4294967295]"]),
    "s7-d-tiny-with-vae-string": (*D, ["model.tiny={with_vae: maybe}"], ["model.tiny.with_vae", "expects bool"]),
    "s7-d-tiny-wan22-ratio": (*D, ["model.kind=wan22", "model.num_frames=5", "model.tiny={boundary_ratio: 1.5}"],
                              ["model.tiny.boundary_ratio=1.5", "(0, 1)"]),
    # was: accepted (a probability of 2 or nan, a colour or shape the renderer and the verifier do not know, a string
    # split into its letters)
    "s7-d-shapes-p-relation-2": (*D, ["prompts.shapes={p_relation: 2}"],
                                 ["prompts.shapes.p_relation=2", "probability in [0, 1]"]),
    "s7-d-shapes-p-relation-nan": (*D, ["prompts.shapes={p_relation: .nan}"],
                                   ["prompts.shapes.p_relation", "finite"]),
    "s7-d-shapes-colour-unknown": (*D, ["prompts.shapes={colors: [mauve]}"],
                                   ["prompts.shapes.colors", "['mauve']", "'red'"]),
    "s7-d-shapes-colors-string": (*D, ["prompts.shapes={colors: red}"], ["prompts.shapes.colors='red'", "a list"]),
    "s7-d-shapes-shape-unknown": (*D, ["prompts.shapes={shapes: [hexagon]}"],
                                  ["prompts.shapes.shapes", "['hexagon']", "'circle'"]),
    "s7-d-shapes-p-relation-string": (*D, ["prompts.shapes={p_relation: often}"],
                                      ["prompts.shapes.p_relation", "expects float", "'often'"]),
    # was: accepted; the evaluation (before training, and eval's) then ran 1e9 ODE steps
    "s7-d-eval-steps-huge": (*D, ["train.eval_steps=1000000000"], ["train.eval_steps=1000000000", "at most 10000"]),
    "s7-d-eval-eval-steps-huge": ("diffusion_rl.cli", ["eval", "{drun}", "train.eval_steps=1000000000"], [],
                                  ["train.eval_steps=1000000000", "at most 10000"]),
    # was: a float32 overflow traceback from AdamW's first step (the run directory written first)
    "s7-d-lr-huge": ("diffusion_rl.cli", ["train", D_CFG], ["train.lr=1e300", *D_TINY], ["train.lr=1e+300",
                                                                                       "at most 1.0"]),
    "s7-v-lr-huge": (*V, ["rl.lr=2"], ["rl.lr=2.0", "at most 1.0"]),
    "s7-t-lr-huge": (*T, ["train.lr=1e300"], ["train.lr=1e+300", "at most 1.0"]),
    "s7-p-lr-huge": (*PS, ["--lr", "1e300"], ["--lr=1e+300", "(0, 1]"]),
    # was: accepted and ignored (eval draws ODE samples: no rollout SDE, tree, pool, GRPO or optimizer setting)
    "s7-d-eval-grpo-override": ("diffusion_rl.cli", ["eval", "{drun}", "grpo.group_size=4"], [],
                                ["grpo.group_size does nothing in eval", "of train: eval_steps"]),
    "s7-d-eval-num-steps-override": ("diffusion_rl.cli", ["eval", "{drun}", "sampler.num_steps=4"], [],
                                     ["sampler.num_steps does nothing in eval"]),
    "s7-d-eval-pool-override": ("diffusion_rl.cli", ["eval", "{drun}", "pool.enabled=true"], [],
                                ["pool.enabled does nothing in eval"]),
    "s7-d-eval-weight-decay-override": ("diffusion_rl.cli", ["eval", "{drun}", "train.weight_decay=0.1"], [],
                                        ["train.weight_decay does nothing in eval"]),
    # was: --force wrote pytorch_lora_weights.safetensors and export.json among another run's files, into a saved
    # policy, into a saved pipeline
    "s7-d-export-force-into-run": ("diffusion_rl.cli", ["export", "{drun}", "{vrun_copy_dir}", "--force"], [],
                                   ["OUT=", "is a run directory", "run_info.json"]),
    "s7-d-export-force-into-policy": ("diffusion_rl.cli", ["export", "{drun}", "{vrun_copy_dir}/policy", "--force"],
                                      [], ["OUT=", "is inside the run directory"]),
    "s7-d-export-force-into-pipeline": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/pipe", "--force"], [],
                                        ["OUT=", "holds model_index.json", "a saved model"]),
    # was: the page written among a checkpoint's files
    "s7-d-report-out-in-checkpoint": ("diffusion_rl.cli", ["report", "{drun_copy_dir}", "--out",
                                                           "{drun_copy_ck}/r.html"], [],
                                      ["--out=", "inside the checkpoint directory"]),
    "s7-v-report-out-in-checkpoints": ("vla_rl.cli", ["report", "{vrun_copy_dir}", "--out",
                                                      "{vrun_copy_dir}/checkpoints/r.html"], [],
                                       ["--out=", "inside the checkpoint directory"]),
    # was: accepted (every log-prob 0: GRPO had no gradient), or a 128 GB embedding table's traceback
    "s7-t-sde-ode": (*T, ["sampler.sde=ode"], ["sampler.sde=ode", "no gradient", "flow_grpo"]),
    "s7-t-eta-0": (*T, ["sampler.eta=0"], ["sampler.eta=0", "no gradient"]),
    "s7-t-num-prompts-huge": (*T, ["model.num_prompts=1000000000"], ["model.num_prompts=1000000000", "at most 100000"]),
    "s7-t-num-modes-huge": (*T, ["model.num_modes=1000000000"], ["model.num_modes=1000000000", "at most 100000"]),
    # was: accepted and ignored (the loop sets them in every VLA run it starts; its one task is data.task)
    "s7-l-vla-iterations": (*L, ["vla.rl.iterations=5"], ["vla.rl.iterations", "does nothing", "rl_iterations"]),
    "s7-l-vla-output-dir": (*L, ["vla.output_dir={assets}/elsewhere"], ["vla.output_dir", "does nothing"]),
    "s7-l-vla-resume": (*L, ["vla.resume=false"], ["vla.resume", "does nothing"]),
    "s7-l-vla-eval-every": (*L, ["vla.rl.eval_every=2"], ["vla.rl.eval_every", "does nothing", "real_eval_episodes"]),
    "s7-l-vla-num-videos": (*L, ["vla.rl.num_videos=1"], ["vla.rl.num_videos", "does nothing"]),
    "s7-l-vla-other-task": (*L, ["vla.env.tasks=[tabletop/push]"],
                            ["vla.env.tasks", "does nothing", "data.task='tabletop/reach_one'"]),
    # was: accepted by the dry run; the run then built 1e9 layers / recorded 1e9-step episodes / rolled out for days
    "s7-l-wm-layers-huge": (*L, ["models.wm.layers=1000000000"], ["wm.layers=1000000000", "at most 256"]),
    "s7-l-wm-sampling-steps-huge": (*L, ["models.wm.sampling_steps=1000000000"],
                                    ["wm.sampling_steps=1000000000", "at most 10000"]),
    "s7-l-idm-hidden-huge": (*L, ["models.idm.hidden=1000000000"], ["idm.hidden=1000000000", "at most 8192"]),
    "s7-l-horizon-huge": (*L, ["data.horizon=1000000000"], ["data.horizon=1000000000", "at most 100000"]),
    "s7-l-real-eval-huge": (*L, ["real_eval_episodes=1000000000"],
                            ["real_eval_episodes=1000000000", "at most 1000000"]),
    "s7-l-rollouts-huge": (*L, ["rollouts_per_cycle=1000000000"], ["rollouts_per_cycle=1000000000", "at most 1000000"]),
    "s7-v-max-episode-steps-huge": (*V, ["env.max_episode_steps=1000000000"],
                                    ["env.max_episode_steps=1000000000", "at most 100000"]),
    "s7-v-srpo-frame-size-huge": (*V, ["srpo.frame_size=100000"], ["srpo.frame_size=100000", "at most 1024"]),
    "s7-v-sft-batch-huge": (*V, ["sft.batch_size=1000000000"], ["sft.batch_size=1000000000", "at most 100000"]),
    "s7-fe-hidden-huge": (*FE, ["model.hidden=1000000000"], ["model.hidden=1000000000", "at most 8192"]),
    "s7-fe-channels-huge": (*FE, ["model.channels=[16,1000000000]"], ["model.channels=[16, 1000000000]",
                                                                      "at most 8192"]),
    # was: an AttributeError traceback from the tabletop expert, after the simulator was built
    "s7-r-robosuite-task": ("vla_rl.cli", ["record-demos", "robosuite/Lift", "1", "{assets}/r_rs.hdf5"], [],
                            ["'robosuite/Lift' has no scripted expert here", "tabletop/*"]),
    "s7-r-libero-task": ("vla_rl.cli", ["record-demos", "libero/libero_spatial/0", "1", "{assets}/r_lb.hdf5"], [],
                         ["'libero/libero_spatial/0' has no scripted expert here", "libero-demos"]),
    # was: demos of the one object recorded as wrong-object failures; with --only-success a RuntimeError traceback
    # after 3 n episodes (also when a noisy expert succeeds too rarely)
    "s7-r-wrong-object-one-object": ("vla_rl.cli", ["record-demos", "tabletop/reach_one", "1", "{assets}/r_w1.hdf5",
                                                    "--wrong-object"], [], ["--wrong-object", "tabletop/reach_one",
                                                                            "one object"]),
    "s7-r-wrong-object-only-success": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r_ws.hdf5",
                                                      "--wrong-object", "--only-success"], [],
                                       ["--wrong-object", "--only-success", "never succeeds"]),
    "s7-r-only-success-too-noisy": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r_ns.hdf5",
                                                   "--only-success", "--noise", "50", "--image-size", "16",
                                                   "--cameras", "none"], [],
                                    ["only 0/1 successful tabletop/reach demos in 3 tries", "lower noise"]),
    # the other learning rates (was: accepted; AdamW's float32 overflow after the data / SFT)
    "s7-v-sft-lr-huge": (*V, ["sft.lr=1e300"], ["sft.lr=1e+300", "at most 1.0"]),
    "s7-l-wm-lr-huge": (*L, ["models.wm_lr=5"], ["models.wm_lr=5.0", "at most 1.0"]),
    "s7-fe-lr-huge": (*FE, ["train.lr=1e300"], ["train.lr=1e+300", "at most 1.0"]),
    # the launcher's rendezvous port (was: int()'s "invalid literal for int() with base 10: 'abc'", naming no variable,
    # or torch's line after the logs opened); a world size of 0 / a negative rank (already refused)
    "s7-t-env-master-port-abc": ("diffusion_rl.cli", ["toy", T_CFG], ["train.iterations=1"],
                                 ["MASTER_PORT='abc'", "1..65535"]),
    "s7-d-env-master-port-huge": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY], ["MASTER_PORT='99999'", "1..65535"]),
    "s7-v-env-master-port-zero": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["MASTER_PORT='0'", "1..65535"]),
    "s7-t-env-world-size-0": ("diffusion_rl.cli", ["toy", T_CFG], ["train.iterations=1"],
                              ["WORLD_SIZE='0'", "integer >= 1"]),
    "s7-d-env-rank-neg": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY], ["RANK='-1'", "integer >= 0"]),
    # was: "cannot use '.../eval': File exists" after the episodes ran
    "s7-v-eval-video-dir-file": ("vla_rl.cli", ["eval", "{vrun_evalfile_dir}", "--video"], [],
                                 ["--video (RUN/eval)=", "is a file, not a directory"]),
    # tasks without a scripted expert where one records the data (was: NotImplementedError's traceback once the env
    # was built: after the run directory was written, or after the other tasks' episodes)
    "s7-v-task-without-expert": ("vla_rl.cli", ["train", "configs/vla/robosuite_lift.yaml", "--dry-run"],
                                 ["env.tasks=[robosuite/Door]"],
                                 ["env.tasks ['robosuite/Door']", "no scripted expert", "sft.demo_path"]),
    "s7-v-libero-goal-without-demos": ("vla_rl.cli", ["train", "configs/vla/libero_spatial.yaml", "--dry-run"],
                                       ["env.tasks=[libero/libero_goal/0]"],
                                       ["env.tasks ['libero/libero_goal/0']", "libero/libero_spatial/*"]),
    "s7-fe-expert-task-without-expert": (*FE, ["data.expert_tasks=[robosuite/Door]"],
                                         ["data.expert_tasks", "'robosuite/Door' has no scripted expert",
                                          "robosuite/Lift"]),
    "s7-fe-expert-task-libero-object": (*FE, ["data.expert_tasks=[libero/libero_object/0]"],
                                        ["data.expert_tasks", "'libero/libero_object/0' has no scripted expert"]),
    # libero-demos: env names that are no LIBERO task (was: stored as the demos' env names, any string), a replay size
    # no camera renders (was: the env's line, naming no flag), an out inside a checkpoint (as record-demos refuses)
    "s7-lb-env-names-not-libero": ("vla_rl.cli", ["libero-demos", "{assets}/lb7.hdf5", "{demo}", "--env-names",
                                                  "tabletop/reach"], [],
                                   ["--env-names ['tabletop/reach']", "libero/<suite>/<i>"]),
    "s7-lb-env-names-unknown-suite": ("vla_rl.cli", ["libero-demos", "{assets}/lb8.hdf5", "{demo}", "--env-names",
                                                     "libero/nosuch/0"], [], ["--env-names ['libero/nosuch/0']"]),
    "s7-lb-image-size-huge": ("vla_rl.cli", ["libero-demos", "{assets}/lb9.hdf5", "{demo}", "--env-names",
                                             "libero/libero_spatial/0", "--replay", "--image-size", "100000"], [],
                              ["--image-size=100000", "[16, 1024]"]),
    "s7-lb-image-size-without-replay": ("vla_rl.cli", ["libero-demos", "{assets}/lb10.hdf5", "{demo}", "--env-names",
                                                       "libero/libero_spatial/0", "--image-size", "64"], [],
                                        ["--image-size=64", "with --replay"]),
    "s7-lb-out-in-checkpoint": ("vla_rl.cli", ["libero-demos", "{vrun_copy_ck}/lb.hdf5", "{demo}", "--env-names",
                                               "libero/libero_spatial/0"], [], ["inside the checkpoint directory"]),
}
# the eighth misuse sweep: the newest options (srpo.encoder: proprio and srpo.state_dims, rl.reward: sim_progress,
# grpo.std_mode, rl.success_band, rl.eval_split, the pool / branch / lookahead keys), wrong types inside nested lists,
# YAML sections that are not mappings, the launcher's variables, runs of the other frontend. "was:" marks the cases
# that failed before this sweep; the others were already refused and cover an input class no earlier sweep touched
S8_PROPRIO = ["rl.reward=srpo", "srpo.encoder=proprio", "srpo.encoder_path=null"]
S8_PROPRIO_L = ["vla.rl.reward=srpo", "vla.srpo.encoder=proprio", "vla.srpo.encoder_path=null"]
SWEEP_8 = {
    # was: accepted (training on the held-out states the run is evaluated on), or numpy's OverflowError traceback at
    # the first draw of a training state, after the SFT and the run directory
    "s8-v-train-seeds-validation-state": (*V, ["rl.train_seeds=[1000000]"],
                                          ["rl.train_seeds=[1000000]", "expected seeds below 1000000"]),
    "s8-v-train-seeds-test-state": (*V, ["rl.eval_seed_offset=2000000", "rl.train_seeds=[5000003]"],
                                    ["rl.train_seeds=[5000003]", "expected seeds below 2000000"]),
    "s8-v-train-seeds-huge": (*V, ["rl.train_seeds=[18446744073709551616]"],
                              ["rl.train_seeds=[18446744073709551616]", "expected seeds below"]),
    "s8-l-train-seeds-validation-state": (*L, ["vla.rl.train_seeds=[1000003]"],
                                          ["rl.train_seeds=[1000003]", "expected seeds below 1000000"]),
    "s8-v-train-seed-range-huge": (*V, ["rl.train_seed_range=18446744073709551616",
                                        "rl.eval_seed_offset=18446744073709551617",
                                        "rl.test_seed_offset=18446744073709561617"],
                                   ["rl.train_seed_range=18446744073709551616", "at most 4294967296"]),
    # was: accepted (every GDPO component weighted 0: every advantage 0, a run that trains on nothing)
    "s8-v-gdpo-weights-all-zero": (*V, ["rl.reward=srpo", "grpo.advantage=gdpo",
                                        "grpo.reward_weights={success: 0, progress: 0}"],
                                   ["grpo.reward_weights=", "every component", "weighted 0"]),
    "s8-v-gdpo-binary-weight-zero": (*V, ["rl.reward=binary", "grpo.advantage=gdpo",
                                          "grpo.reward_weights={success: 0}"],
                                     ["grpo.reward_weights=", "rl.reward=binary ['success'] weighted 0"]),
    "s8-l-gdpo-weight-zero": (*L, ["vla.grpo.advantage=gdpo", "vla.grpo.reward_weights={success: 0}"],
                              ["grpo.reward_weights=", "weighted 0"]),
    # was: accepted by the dry run (1e9 candidates per prompt projected), a run filled the memory
    "s8-d-pool-size-huge": (*PF, ["pool.pool_size=1000000000"], ["pool.pool_size=1000000000", "at most 100000"]),
    "s8-d-tree-pool-size-huge": (*TP, ["pool.pool_size=1000000000"],  # (here already refused: not the tree's leaves)
                                 ["pool.pool_size=1000000000", "at most 100000"]),
    # was: the loop's metrics.jsonl, run_info.json and TensorBoard written before the VLA trainer refused the dims
    "s8-l-proprio-state-dims-beyond": ("vla_rl.cli", ["loop", L_CFG],
                                       [*S8_PROPRIO_L, "vla.srpo.state_dims=[0,99]", "cycles=1"],
                                       ["srpo.state_dims=[0, 99]", "has 12 entries", "below 12"]),
    # was: accepted (one process with LOCAL_RANK=3 ran, on a GPU machine on cuda:3; a rank-0 process with LOCAL_RANK=1)
    "s8-v-env-local-rank-beyond-rank": ("vla_rl.cli", ["train", V_CFG], [*V_TINY],
                                        ["LOCAL_RANK=3 with RANK=0", "LOCAL_RANK <= RANK"]),
    "s8-d-env-local-rank-beyond-rank": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY],
                                        ["LOCAL_RANK=1 with RANK=0", "LOCAL_RANK <= RANK"]),
    # was: transformers' OSError traceback (a folder without the model's files as a DINOv2 / V-JEPA 2 encoder), or 1e9
    # SRPO frames per episode accepted
    "s8-v-srpo-dinov2-empty-dir": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "rl.reward=srpo", "srpo.encoder=dinov2",
                                                                    "srpo.encoder_path={assets}/empty_dir"],
                                   ["srpo.encoder_path=", "empty_dir", "not a save_pretrained directory",
                                    "config.json"]),
    "s8-v-srpo-vjepa2-config-only": ("vla_rl.cli", ["train", V_CFG],
                                     [*V_TINY, "rl.reward=srpo", "srpo.encoder=vjepa2",
                                      "srpo.encoder_path={assets}/config_only"],
                                     ["srpo.encoder_path=", "srpo.encoder=vjepa2", "model.safetensors"]),
    "s8-v-srpo-num-frames-huge": (*V, ["srpo.num_frames=1000000000"], ["srpo.num_frames=1000000000",
                                                                       "at most 100001"]),
    # was: a hang (the type checks walked the 4e8 values of nine nested lists of nine YAML aliases)
    "s8-v-yaml-alias-bomb": ("vla_rl.cli", ["train", "{assets}/alias_bomb.yaml", "--dry-run"], [],
                             ["alias_bomb.yaml", "aliases expand to 435848054 values", "at most 1000000"]),
    "s8-d-override-alias-bomb": (*D, [f"prompts.prompts={ALIAS_BOMB}"],
                                 ["override", "aliases expand to", "alias bomb"]),
    # was: accepted; a run whose updates did nothing (no action had a log-prob: as diffusion-rl train and toy refuse
    # sampler.eta=0), or the tiny denoiser NaN before the first update (a LoRA scale of inf in float32) and NaN
    # checkpoints saved with exit 0
    "s8-v-flow-eta-0": (*V, ["policy.flow.eta=0"], ["policy.flow.eta=0", "no action has a log-prob", "eta > 0"]),
    "s8-v-flow-sde-ode": (*V, ["policy.flow.sde_kind=ode"], ["policy.flow.sde_kind=ode", "GRPO has no gradient"]),
    "s8-l-flow-eta-0": (*L, ["vla.policy.flow.eta=0"], ["policy.flow.eta=0", "no gradient"]),
    "s8-d-lora-alpha-huge": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY, "model.lora.alpha=1e300"],
                             ["lora.alpha=1e+300", "at most 1000 x lora.rank"]),
    # was: mujoco's ImportError at its import (a PYOPENGL_PLATFORM that is not the MuJoCo backend), then a
    # RenderingUnavailable traceback at the first renderer
    "s8-v-env-pyopengl-platform": ("vla_rl.cli", ["train", V_CFG], [*V_TINY],
                                   ["PYOPENGL_PLATFORM='nonsense'", "MUJOCO_GL=egl", "expected 'egl'"]),
    "s8-r-env-pyopengl-platform-mismatch": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1",
                                                           "{assets}/r_gl8.hdf5"], [],
                                            ["PYOPENGL_PLATFORM='osmesa' with MUJOCO_GL=egl", "or unset it"]),
    # was: accepted (a 1e9-wide progress latent, 1e9 episodes a step: the memory, once built; a 1e5-px input was
    # already refused as other than data.image_size)
    "s8-fe-dim-huge": (*FE, ["model.head=distance", "model.dim=1000000000"], ["model.dim=1000000000", "at most 8192"]),
    "s8-fe-aux-dim-huge": (*FE, ["model.aux_dim=1000000000"], ["model.aux_dim=1000000000", "at most 8192"]),
    "s8-fe-image-size-huge": (*FE, ["model.image_size=100000"], ["model.image_size=100000", "at most 1024"]),
    "s8-fe-batch-episodes-huge": (*FE, ["train.batch_episodes=1000000000"],
                                  ["train.batch_episodes=1000000000", "at most 100000"]),
    # already refused: srpo.encoder proprio and its state_dims (values, types, the env's state width in a run)
    "s8-v-state-dims-empty": (*V, [*S8_PROPRIO, "srpo.state_dims=[]"],
                              ["srpo.state_dims=[]", "non-empty list of distinct state indices"]),
    "s8-v-state-dims-repeated": (*V, [*S8_PROPRIO, "srpo.state_dims=[0,0]"], ["srpo.state_dims=[0, 0]", "distinct"]),
    "s8-v-state-dims-neg": (*V, [*S8_PROPRIO, "srpo.state_dims=[-1]"], ["srpo.state_dims=[-1]", ">= 0"]),
    "s8-v-state-dims-float": (*V, [*S8_PROPRIO, "srpo.state_dims=[0.5]"],
                              ["srpo.state_dims", "expects list[int] or None", "[0.5]"]),
    "s8-v-state-dims-bool": (*V, [*S8_PROPRIO, "srpo.state_dims=[true]"], ["srpo.state_dims", "[True]"]),
    "s8-v-state-dims-scalar": (*V, [*S8_PROPRIO, "srpo.state_dims=3"], ["srpo.state_dims", "got 3 (int)"]),
    "s8-v-state-dims-nested": (*V, [*S8_PROPRIO, "srpo.state_dims=[[0]]"], ["srpo.state_dims", "[[0]]"]),
    "s8-v-state-dims-without-proprio": (*V, ["srpo.state_dims=[0,1]"],
                                        ["srpo.state_dims=[0, 1] with srpo.encoder='random_conv'", "expected null"]),
    "s8-v-proprio-with-path": (*V, ["srpo.encoder=proprio", "srpo.encoder_path=/x.safetensors"],
                               ["srpo.encoder_path='/x.safetensors' with srpo.encoder=proprio", "expected null"]),
    "s8-v-encoder-case": (*V, ["srpo.encoder=Proprio"], ["srpo.encoder", "'proprio'", "got 'Proprio'"]),
    "s8-v-yaml-state-dims-string-item": ("vla_rl.cli", ["train", "{assets}/state_dims_str.yaml", "--dry-run"], [],
                                         ["state_dims_str.yaml", "srpo.state_dims", "[0, '1']"]),
    "s8-v-proprio-state-dims-beyond-run": ("vla_rl.cli", ["train", V_CFG],
                                           [*V_TINY, *S8_PROPRIO, "srpo.state_dims=[0,1000000000]"],
                                           ["srpo.state_dims=[0, 1000000000]", "has 9 entries"]),
    "s8-v-plan-state-dims-repeated": ("vla_rl.cli", ["train", "configs/vla/smolvla_reach_one.yaml", "--plan"],
                                      [*S8_PROPRIO, "srpo.state_dims=[1,1]"], ["srpo.state_dims=[1, 1]", "distinct"]),
    "s8-l-state-dims-repeated": (*L, [*S8_PROPRIO_L, "vla.srpo.state_dims=[0,0]"], ["srpo.state_dims=[0, 0]"]),
    # rl.reward sim_progress and its noise
    "s8-v-sim-progress-mixed-tasks": (*V, ["rl.reward=sim_progress", "env.tasks=[tabletop/reach,robosuite/Lift]"],
                                      ["rl.reward=sim_progress", "['robosuite/Lift']", "tabletop/*"]),
    "s8-v-sim-progress-case": (*V, ["rl.reward=SIM_PROGRESS"], ["rl.reward='SIM_PROGRESS'", "sim_progress"]),
    "s8-v-sim-progress-noise-inf": (*V, ["rl.reward=sim_progress", "rl.sim_progress_noise=.inf"],
                                    ["rl.sim_progress_noise", "finite", "inf"]),
    "s8-v-sim-progress-noise-bool": (*V, ["rl.reward=sim_progress", "rl.sim_progress_noise=true"],
                                     ["rl.sim_progress_noise", "expects float", "True"]),
    "s8-l-sim-progress": (*L, ["vla.rl.reward=sim_progress"], ["vla.rl.reward=sim_progress", "no simulator progress"]),
    # grpo.std_mode
    "s8-v-std-mode-case": (*V, ["grpo.std_mode=GLOBAL"], ["grpo.std_mode", "'global'", "got 'GLOBAL'"]),
    "s8-v-std-mode-null": (*V, ["grpo.std_mode=null"], ["grpo.std_mode", "got None"]),
    "s8-d-std-mode-case": (*D, ["grpo.std_mode=Global"], ["grpo.std_mode", "got 'Global'"]),
    "s8-d-eval-std-mode": ("diffusion_rl.cli", ["eval", "{drun}", "grpo.std_mode=global"], [],
                           ["grpo.std_mode does nothing in eval"]),
    "s8-v-resume-std-mode": ("vla_rl.cli", ["train", V_CFG], ["{vrun_copy}", *V_TINY, "rl.iterations=2",
                                                              "grpo.std_mode=global"],
                             ["refusing to resume", "grpo.std_mode: 'group' != 'global'"]),
    "s8-d-resume-std-mode": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_copy}", *D_TINY, "train.iterations=2",
                                                                    "grpo.std_mode=global"],
                             ["refusing to resume", "grpo.std_mode"]),
    # rl.success_band
    "s8-v-success-band-empty-interval": (*V, ["rl.success_band=[0.5,0.5]"], ["rl.success_band", "[0.5, 0.5]"]),
    "s8-v-success-band-infinite": (*V, ["rl.success_band=[-.inf,.inf]"], ["rl.success_band[0]", "finite", "-inf"]),
    "s8-v-success-band-one-item": (*V, ["rl.success_band=[0.5]"], ["rl.success_band", "expects 2 items, got 1"]),
    "s8-v-success-band-string": (*V, ["rl.success_band='0.1,0.9'"], ["rl.success_band", "'0.1,0.9'"]),
    "s8-v-success-band-null-item": (*V, ["rl.success_band=[null,1]"], ["rl.success_band[0]", "got None"]),
    "s8-v-success-band-unused": (*V, ["rl.dynamic_sampling=false", "rl.success_band=[0.1,0.9]"],
                                 ["rl.success_band", "does nothing", "rl.dynamic_sampling=false"]),
    "s8-v-yaml-success-band-string-item": ("vla_rl.cli", ["train", "{assets}/band_str.yaml", "--dry-run"], [],
                                           ["band_str.yaml", "rl.success_band[1]", "'x'"]),
    # rl.eval_split
    "s8-v-eval-split-case": (*V, ["rl.eval_split=TEST"], ["rl.eval_split", "'test'", "got 'TEST'"]),
    "s8-v-eval-split-empty": (*V, ["rl.eval_split="], ["rl.eval_split", "got ''"]),
    "s8-v-eval-split-list": (*V, ["rl.eval_split=[test]"], ["rl.eval_split", "['test']"]),
    "s8-l-eval-split-unknown": (*L, ["vla.rl.eval_split=nope"], ["vla.rl.eval_split", "'nope'"]),
    "s8-v-resume-eval-split": ("vla_rl.cli", ["train", V_CFG], ["{vrun_copy}", *V_TINY, "rl.iterations=2",
                                                                "rl.eval_split=test"],
                               ["refusing to resume", "rl.eval_split: 'validation' != 'test'"]),
    "s8-v-resume-reward-proprio": ("vla_rl.cli", ["train", V_CFG], ["{vrun_copy}", *V_TINY, "rl.iterations=2",
                                                                    *S8_PROPRIO],
                                   ["refusing to resume", "srpo.encoder: 'random_conv' != 'proprio'"]),
    # wrong types inside nested lists, a section that is a list (in a YAML file)
    "s8-v-tasks-int-item": (*V, ["env.tasks=[tabletop/reach,3]"], ["env.tasks[1]", "expects str", "3"]),
    "s8-v-yaml-tasks-int-item": ("vla_rl.cli", ["train", "{assets}/tasks_int.yaml", "--dry-run"], [],
                                 ["tasks_int.yaml", "env.tasks[1]", "expects str"]),
    "s8-v-cameras-int-item": (*V, ["policy.cameras=[1]"], ["policy.cameras[0]", "expects str"]),
    "s8-v-train-seeds-bool-item": (*V, ["rl.train_seeds=[true]"], ["rl.train_seeds[0]", "expects int", "True"]),
    "s8-v-yaml-section-list": ("vla_rl.cli", ["train", "{assets}/rl_list.yaml", "--dry-run"], [],
                               ["rl_list.yaml", "config key 'rl' expects a mapping", "[1, 2]"]),
    "s8-d-pool-patterns-int-item": (*PF, ["pool.quant.skip.extra_patterns=[1]"],
                                    ["pool.quant.skip.extra_patterns[0]", "expects str"]),
    "s8-d-pool-patterns-string": (*PF, ["pool.quant.skip.extra_patterns=attn"],
                                  ["pool.quant.skip.extra_patterns", "'attn'"]),
    "s8-d-split-steps-bool-item": (*BR, ["branch.split_steps=[true]"], ["branch.split_steps[0]", "expects int"]),
    "s8-d-branch-string-item": (*BR, ["branch.branch=[two]"], ["branch.branch[0]", "'two'"]),
    # the pool / branch / lookahead keys
    "s8-d-pool-train-size-0": (*PF, ["pool.train_size=0"], ["pool.train_size", ">= 1", "0"]),
    "s8-d-pool-enabled-string": (*PF, ["pool.enabled=maybe"], ["pool.enabled", "expects bool", "'maybe'"]),
    "s8-d-lookahead-float": (*LA, ["branch.lookahead_candidates=2.5"], ["branch.lookahead_candidates", "2.5"]),
    "s8-d-branch-width-prune-unknown": (*BR, ["branch.width_prune=random"], ["branch.width_prune", "'random'"]),
    "s8-d-branch-factors-null": (*BR, ["branch.branch=null"], ["branch.branch", "got None"]),
    "s8-d-tree-pool-no-factors": (*TP, ["branch.branch=[]"], ["branch.branch needs 1 factor", "got []"]),
    "s8-d-branch-window-huge": (*BR, ["branch.depth_window=1000000000"],
                                ["branch.depth_window=1000000000", "the tree has 3 depths"]),
    # the launcher's variables: empty, a float, a word
    "s8-v-env-world-size-empty": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["WORLD_SIZE=''", "integer >= 1"]),
    "s8-v-env-rank-empty": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["RANK=''", "integer >= 0"]),
    "s8-d-env-rank-float": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY], ["RANK='1.0'", "integer >= 0"]),
    "s8-t-env-local-rank-word": ("diffusion_rl.cli", ["toy", T_CFG], ["train.iterations=1"],
                                 ["LOCAL_RANK='abc'", "integer >= 0"]),
    # a run directory of the other frontend / the toy
    "s8-v-output-toy-run": ("vla_rl.cli", ["train", V_CFG], ["{trun_copy}", *V_TINY],
                            ["another job", "not a VLARLConfig run"]),
    "s8-t-output-vla-run": ("diffusion_rl.cli", ["toy", T_CFG], ["{vrun_copy}", "train.iterations=2"],
                            ["another job", "not a ToyConfig run", "env, policy, sft"]),
    "s8-l-output-toy-run": ("vla_rl.cli", ["loop", L_CFG], ["{trun_copy}", "cycles=1"],
                            ["another job", "not a WorldLoopConfig run"]),
    "s8-d-export-toy-run": ("diffusion_rl.cli", ["export", "{trun}", "{assets}/exp8"], [],
                            ["holds no LoRA weights to export", "trainable.safetensors"]),
    "s8-d-eval-toy-run": ("diffusion_rl.cli", ["eval", "{trun}"], [], ["is not a diffusion-rl checkpoint"]),
    "s8-v-eval-toy-run": ("vla_rl.cli", ["eval", "{trun}"], [], ["is not a vla-rl train checkpoint"]),
    "s8-v-base-policy-toy-run": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, "sft.base_policy={trun}"],
                                 ["sft.base_policy=", "no saved policy there"]),
    # empty / unicode names, a directory where a file goes
    "s8-v-plugin-empty-name": (*V, ["env.plugins=['']"], ["env.plugins", "got ''"]),
    "s8-v-encoder-empty": (*V, ["srpo.encoder="], ["srpo.encoder", "got ''"]),
    "s8-r-task-unicode": ("vla_rl.cli", ["record-demos", "tabletop/r\u0435ach", "1", "{assets}/r8.hdf5"], [],
                          ["unknown task 'tabletop/r\u0435ach'"]),
    "s8-fe-expert-tasks-int-item": (*FE, ["data.expert_tasks=[3]"], ["data.expert_tasks[0]", "expects str"]),
    "s8-fe-demo-path-dir": ("vla_rl.cli", ["fit-encoder", FE_CFG], ["data.demo_paths=[{assets}/empty_dir]",
                                                                    "output={assets}/e8.safetensors"],
                            ["data.demo_paths=", "empty_dir", "a directory"]),
    "s8-fe-config-dir": ("vla_rl.cli", ["fit-encoder", "{assets}/a_dir.yaml", "--dry-run"], [],
                         ["a_dir.yaml", "is a directory"]),
}
S9_SRPO = ["rl.reward=srpo"]
SWEEP_9 = {
    # optimizer settings that turn the weights to NaN
    "s9-v-sft-weight-decay-huge": (*V, ["sft.weight_decay=5000"], ["sft.weight_decay=5000.0"]),
    "s9-l-sft-weight-decay-huge": (*L, ["vla.sft.weight_decay=5000"], ["sft.weight_decay=5000.0"]),
    "s9-d-weight-decay-huge": (*D, ["train.weight_decay=1e12"], ["train.weight_decay=1000000000000.0"]),
    # sampler values whose float32 schedule / guidance overflows
    "s9-d-shift-huge": (*D, ["sampler.shift=1e300"], ["sampler.shift=1e+300"]),
    "s9-d-shift-tiny": (*D, ["sampler.shift=1e-50"], ["sampler.shift=1e-50"]),
    "s9-d-cfg-huge": (*D, ["sampler.cfg_scale=1e30"], ["sampler.cfg_scale=1e+30"]),
    "s9-t-pretrain-lr-huge": (*T, ["model.pretrain_lr=1e300"], ["model.pretrain_lr=1e+300"]),
    "s9-t-radius-huge": (*T, ["model.radius=1e300"], ["model.radius=1e+300", "at most 100"]),
    "s9-t-mode-std-huge": (*T, ["model.mode_std=1e300"], ["model.mode_std=1e+300"]),
    "s9-d-tree-shift-huge": (*BR, ["sampler.shift=1e300"], ["sampler.shift=1e+300"]),
    # model keys of another family
    "s9-d-guidance-sd3": (*D, ["model.guidance=7"], ["model.guidance", "flux"]),
    "s9-d-num-frames-sd3": (*D, ["model.num_frames=17"], ["model.num_frames", "wan"]),
    "s9-d-wan-num-frames-huge": (*D, ["model.kind=wan", "model.num_frames=1000000001"],
                                 ["model.num_frames=1000000001"]),
    # SFT augmentation / seeds
    "s9-v-sft-image-shift-beyond": (*V, ["sft.image_shift=1000000"], ["sft.image_shift=1000000", "policy.image_size"]),
    "s9-v-sft-image-shift-equal": (*V, ["sft.image_shift=64"], ["sft.image_shift=64", "policy.image_size=64"]),
    "s9-l-sft-image-shift-beyond": (*L, ["vla.sft.image_shift=1000"], ["sft.image_shift=1000"]),
    "s9-v-demo-seeds-validation": (*V, ["sft.demo_seed_offset=1000000"], ["sft.demo_seed_offset=1000000"]),
    "s9-v-demo-seeds-run-into-validation": (*V, ["sft.demo_seed_offset=999998"], ["sft.demo_seed_offset=999998"]),
    "s9-v-demo-seeds-test": (*V, ["sft.demo_seed_offset=5000000", "rl.eval_seed_offset=6000000"],
                             ["sft.demo_seed_offset=5000000"]),
    # the loop: its data's seeds, its VLA section
    "s9-l-data-train-test-overlap": (*L, ["data.train_seed_offset=300000"], ["data.train_seed_offset=300000"]),
    "s9-l-data-test-in-train": (*L, ["data.test_seed_offset=200010"], ["data.test_seed_offset=200010"]),
    "s9-l-policy-seeds-validation": (*L, ["policy_seed_offset=1000000"], ["policy_seed_offset=1000000"]),
    "s9-l-vla-seed-neg": (*L, ["vla.seed=-1"], ["vla.seed", "-1"]),
    "s9-l-vla-image-size-0": (*L, ["vla.policy.image_size=0"], ["vla.policy.image_size", "0"]),
    "s9-l-vla-image-size-huge": (*L, ["vla.policy.image_size=100000"], ["vla.policy.image_size", "100000"]),
    "s9-l-wm-batch-huge": (*L, ["models.wm_batch=1000000000"], ["models.wm_batch=1000000000"]),
    "s9-l-reward-pool-huge": (*L, ["models.wm.reward_pool=1000000000"], ["reward_pool=1000000000"]),
    "s9-l-env-sampling-steps-huge": (*L, ["models.env_sampling_steps=1000000000"],
                                     ["models.env_sampling_steps=1000000000"]),
    "s9-l-imagined-rollouts-huge": (*L, ["models.success_imagined_rollouts=1000000000"],
                                    ["models.success_imagined_rollouts=1000000000"]),
    "s9-l-wm-state-dim-huge": (*L, ["models.wm.state_dim=1000000000"], ["wm.state_dim=1000000000", "at most 8192"]),
    "s9-l-srpo-encoder-missing": ("vla_rl.cli", ["loop", L_CFG],
                                  ["cycles=1", "vla.rl.reward=srpo", "vla.srpo.encoder=progress",
                                   "vla.srpo.encoder_path={assets}/none.safetensors"],
                                  ["srpo.encoder_path", "{assets}/none.safetensors"]),
    # SRPO encoders and their weights
    "s9-v-random-conv-with-path": (*V, ["srpo.encoder=random_conv", "srpo.encoder_path=/x.safetensors"],
                                   ["srpo.encoder_path", "random_conv"]),
    "s9-v-small-path-dir": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, *S9_SRPO, "srpo.encoder=small",
                                                            "srpo.encoder_path={assets}/empty_dir"],
                            ["srpo.encoder_path", "empty_dir"]),
    "s9-v-dinov2-path-file": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, *S9_SRPO, "srpo.encoder=dinov2",
                                                              "srpo.encoder_path={assets}/wrongkeys.safetensors"],
                              ["srpo.encoder_path", "wrongkeys.safetensors"]),
    "s9-v-progress-path-dir": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, *S9_SRPO, "srpo.encoder=progress",
                                                               "srpo.encoder_path={assets}/empty_dir"],
                               ["srpo.encoder_path", "empty_dir"]),
    "s9-v-progress-path-junk": ("vla_rl.cli", ["train", V_CFG], [*V_TINY, *S9_SRPO, "srpo.encoder=progress",
                                                                "srpo.encoder_path={assets}/junk.safetensors"],
                                ["srpo.encoder_path", "junk.safetensors"]),
    "s9-v-progress-path-wrong-keys": ("vla_rl.cli", ["train", V_CFG],
                                      [*V_TINY, *S9_SRPO, "srpo.encoder=progress",
                                       "srpo.encoder_path={assets}/wrongkeys.safetensors"],
                                      ["srpo.encoder_path", "wrongkeys.safetensors"]),
    "s9-v-srpo-reference-case": (*V, ["srpo.reference=Group"], ["srpo.reference", "'Group'"]),
    "s9-v-srpo-pooling-list": (*V, ["srpo.pooling=[mean]"], ["srpo.pooling", "['mean']"]),
    "s9-v-srpo-min-samples-string": (*V, ["srpo.min_samples=two"], ["srpo.min_samples", "'two'"]),
    "s9-v-srpo-eps-bool": (*V, ["srpo.dbscan_eps=yes"], ["srpo.dbscan_eps", "expects float", "True (bool)"]),
}
SWEEP_9.update({
    # wrong types in every section
    "s9-v-env-kwargs-null": (*V, ["env.kwargs=null"], ["env.kwargs", "None"]),
    "s9-v-tasks-null": (*V, ["env.tasks=null"], ["env.tasks", "None"]),
    "s9-v-cameras-string": (*V, ["policy.cameras=agentview"], ["policy.cameras", "'agentview'"]),
    "s9-d-lora-targets-string": (*D, ["model.lora.targets=to_q"], ["model.lora.targets", "'to_q'"]),
    "s9-d-seed-list": (*D, ["seed=[1]"], ["seed", "[1]"]),
    "s9-d-resume-quoted-yes": (*D, ["resume='yes'"], ["resume", "'yes'"]),
    "s9-d-lr-percent": (*D, ["train.lr=1%"], ["train.lr", "'1%'"]),
    "s9-d-dtype-case": (*D, ["model.dtype=BF16"], ["model.dtype", "'BF16'"]),
    "s9-d-reward-kwargs-null": (*D, ["reward.kwargs=null"], ["reward.kwargs", "None"]),
    "s9-t-model-section-list": (*T, ["model=[1]"], ["model", "[1]"]),
    "s9-l-models-wm-string": (*L, ["models.wm=big"], ["models.wm", "'big'"]),
    "s9-fe-train-lr-string": (*FE, ["train.lr=fast"], ["train.lr", "'fast'"]),
    "s9-fe-demo-paths-null-item": (*FE, ["data.demo_paths=[null]"], ["data.demo_paths[0]", "None"]),
    # unknown keys in nested sections
    "s9-v-unknown-nested-flow": (*V, ["policy.flow.hiden=8"], ["policy.flow.hiden", "did you mean"]),
    "s9-d-unknown-nested-lora": (*D, ["model.lora.alpah=8"], ["model.lora.alpah", "did you mean"]),
    "s9-l-unknown-nested-idm": (*L, ["models.idm.chanels=[8]"], ["models.idm.chanels", "did you mean"]),
    "s9-d-unknown-nested-pool-quant": (*PF, ["pool.quant.formatt=fp8"], ["pool.quant.formatt", "did you mean"]),
    # the run directory's own files damaged or of another kind
    "s9-d-resume-latest-empty": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_latestempty}", *D_TINY,
                                                                        "train.iterations=2"], ["latest"]),
    "s9-v-eval-latest-empty": ("vla_rl.cli", ["eval", "{vrun_latestempty_dir}"], [], ["latest"]),
    "s9-d-export-latest-outside": ("diffusion_rl.cli", ["export", "{drun_latestoutside_dir}", "{assets}/exp9"], [],
                                   ["latest"]),
    "s9-v-resume-metrics-dir": ("vla_rl.cli", ["train", V_CFG], ["{vrun_metricsdir}", *V_TINY, "rl.iterations=2"],
                                ["metrics.jsonl"]),
    "s9-d-resume-checkpoints-file": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_ckfile}", *D_TINY,
                                                                            "train.iterations=2"], ["checkpoints"]),
    "s9-d-eval-checkpoints-file": ("diffusion_rl.cli", ["eval", "{drun_ckfile_dir}"], [], ["checkpoints"]),
    "s9-v-resume-state-zero-bytes": ("vla_rl.cli", ["train", V_CFG], ["{vrun_statezero}", *V_TINY,
                                                                      "rl.iterations=2"], ["state.json"]),
    "s9-d-export-weights-ema-without-ema": ("diffusion_rl.cli", ["export", "{drun}", "{assets}/exp9e", "--weights",
                                                                  "ema"], [], ["--weights ema", "ema_decay"]),
    "s9-v-eval-device-cuda-word": ("vla_rl.cli", ["eval", "{vrun}", "--device", "cuda:x"], [], ["cuda:x"]),
    # record-demos / libero-demos / pretrain-shapes flags
    "s9-r-drop-prob-2": ("vla_rl.cli", ["record-demos", "tabletop/pick_place", "1", "{assets}/r9a.hdf5",
                                        "--drop-prob", "2"], [], ["--drop-prob", "2"]),
    "s9-r-drop-prob-neg": ("vla_rl.cli", ["record-demos", "tabletop/pick_place", "1", "{assets}/r9b.hdf5",
                                          "--drop-prob", "-0.5"], [], ["--drop-prob", "-0.5"]),
    "s9-r-drop-prob-reach": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r9c.hdf5",
                                            "--drop-prob", "0.5"], [], ["--drop-prob", "tabletop/reach"]),
    "s9-r-cameras-unknown-empty": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r9d.hdf5",
                                                  "--cameras", ""], [], ["unknown camera ''", "agentview"]),
    "s9-r-seed-offset-neg": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r9e.hdf5",
                                            "--seed-offset", "-1"], [], ["--seed-offset", "-1"]),
    "s9-lb-per-task-neg": ("vla_rl.cli", ["libero-demos", "{assets}/lb9.hdf5", "{demo}", "--env-names",
                                          "libero/libero_spatial/0", "--per-task", "-1"], [], ["--per-task", "-1"]),
    "s9-lb-suite-unknown": ("vla_rl.cli", ["libero-demos", "{assets}/lb9.hdf5", "{demo}", "--suite", "libero_nosuch"],
                            [], ["unknown LIBERO suite 'libero_nosuch'", "installed"]),
    "s9-lb-suite-and-env-names": ("vla_rl.cli", ["libero-demos", "{assets}/lb9.hdf5", "{demo}", "--suite",
                                                 "libero_spatial", "--env-names", "libero/libero_spatial/0"], [],
                                  ["--suite", "--env-names"]),
    "s9-p-layers-0": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps9", "--steps", "1", "--layers",
                                           "0"], [], ["--layers", "0"]),
    "s9-p-seed-huge": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps9", "--steps", "1", "--seed",
                                            str(2**64)], [], ["--seed"]),
    "s9-p-init-is-file": ("diffusion_rl.cli", ["pretrain-shapes", "--out", "{assets}/ps9", "--init",
                                               "{assets}/a_file"], [], ["init=", "a_file", "model_index.json"]),
    # serve-reward
    "s9-d-serve-delay-per-item-neg": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "0",
                                                           "--delay-per-item-s", "-1"], [],
                                      ["--delay-per-item-s", "-1"]),
    "s9-v-serve-kwargs-unknown-arg": ("vla_rl.cli", ["serve-reward", "rewards.success:success_reward", "--port", "0",
                                                     "--kwargs", '{"nosuch": 1}'], [], ["nosuch"]),
    "s9-d-serve-port-float": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--port", "80.5"], [],
                              ["--port", "80.5"]),
    # report
    "s9-v-report-run-twice-different-spelling": ("vla_rl.cli", ["report", "{assets}/metrics_only",
                                                                "{assets}/metrics_only/", "--out",
                                                                "{assets}/r9v.html"], [], ["metrics_only"]),
    # the launcher's variables, combined
    "s9-v-env-world-size-huge": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["MASTER_ADDR expected"]),
    "s9-d-env-rank-equals-world": ("diffusion_rl.cli", ["train", D_CFG], [*D_TINY], ["RANK=2", "WORLD_SIZE=2"]),
    "s9-t-env-world-size-neg": ("diffusion_rl.cli", ["toy", T_CFG], ["train.iterations=1"], ["WORLD_SIZE='-2'"]),
    "s9-v-env-rank-space": ("vla_rl.cli", ["train", V_CFG], [*V_TINY], ["MASTER_ADDR expected"]),
    # output_dir into the other frontend's run / loop's stage
    "s9-v-output-loop-vla-stage": ("vla_rl.cli", ["train", V_CFG], ["{vrun_copy}", *V_TINY, "rl.iterations=2",
                                                                    "seed=1"], ["refusing to resume", "seed"]),
    "s9-d-eval-export-dir": ("diffusion_rl.cli", ["eval", "{assets}/prev_export"], [], ["prev_export"]),
    "s9-v-eval-policy-dir": ("vla_rl.cli", ["eval", "{vrun}/policy"], [], ["policy"]),
})
SWEEP_9.update({
    # the policy's own image encoder where the policy has none (was: a dry run accepted it)
    "s9-v-srpo-policy-encoder-no-images": (*V, ["srpo.encoder=policy", "policy.use_images=false",
                                                "policy.use_state=true"],
                                           ["srpo.encoder=policy with policy.use_images=false", "no image encoder"]),
    "s9-v-scene-encoder-policy-no-images": (*V, ["srpo.reference=predicted", "srpo.scene_encoder=policy",
                                                 "policy.use_images=false", "policy.use_state=true"],
                                            ["srpo.scene_encoder=policy", "no image encoder",
                                             "srpo.scene_encoder=random_conv"]),
    # fit-encoder: a loss weight whose float32 loss is inf (a NaN encoder saved, exit 0), episodes of 1e12 steps
    "s9-fe-rank-weight-huge": (*FE, ["train.rank_weight=1e300"], ["train.rank_weight=1e+300", "at most 1000.0"]),
    "s9-fe-distance-weight-huge": (*FE, ["train.distance_weight=1e300"], ["train.distance_weight=1e+300",
                                                                          "at most 1000.0"]),
    "s9-fe-max-steps-huge": (*FE, ["data.max_steps=1000000000000"], ["data.max_steps=1000000000000",
                                                                     "at most 100000"]),
    "s9-fe-hold-steps-huge": (*FE, ["data.hold_steps=1000000000000"], ["data.hold_steps=1000000000000",
                                                                       "at most 100000"]),
    "s9-fe-policy-max-steps-huge": (*FE, ["data.policy_max_steps=1000000000000"],
                                    ["data.policy_max_steps=1000000000000", "at most 100000"]),
    "s9-fe-policy-image-size-huge": (*FE, ["data.policy_image_size=100000"], ["data.policy_image_size=100000",
                                                                              "at most 1024"]),
    # already refused: srpo.reference=predicted's own settings
    "s9-v-predictor-memory-1": (*V, ["srpo.reference=predicted", "srpo.predictor_memory=1"],
                                ["srpo.predictor_memory=1", "[2, 100000]"]),
    "s9-v-predictor-layouts-over-memory": (*V, ["srpo.reference=predicted", "srpo.predictor_memory=8",
                                                "srpo.predictor_min_layouts=9"],
                                           ["srpo.predictor_min_layouts=9", "srpo.predictor_memory=8"]),
    "s9-v-predictor-ridge-0": (*V, ["srpo.reference=predicted", "srpo.predictor_ridge=0"],
                               ["srpo.predictor_ridge=0", "(0, 1e6]"]),
    "s9-v-predictor-min-r2-2": (*V, ["srpo.reference=predicted", "srpo.predictor_min_r2=2"],
                                ["srpo.predictor_min_r2=2", "<= 1"]),
    "s9-v-scene-encoder-unknown": (*V, ["srpo.reference=predicted", "srpo.scene_encoder=dinov2"],
                                   ["srpo.scene_encoder", "'dinov2'"]),
    "s9-v-reference-case": (*V, ["srpo.reference=Predicted"], ["srpo.reference", "'Predicted'"]),
})
SWEEP_9.update({
    # width pruning that prunes nothing (was: accepted; every leaf trained in a "pruned" run)
    "s9-d-prune-k-all-children": (*TP, ["branch.prune_k=4"],
                                  ["branch.prune_k=4 with branch.width_prune=topk_per_parent", "4 children",
                                   "expected prune_k < 4"]),
    "s9-d-prune-k-huge": (*TP, ["branch.prune_k=1000000000000"], ["branch.prune_k=1000000000000", "none is pruned"]),
    "s9-d-best-worst-all-leaves": (*BR, ["branch.width_prune=best_worst", "branch.prune_k=4"],
                                   ["branch.prune_k=4 with branch.width_prune=best_worst", "of 8 leaves",
                                    "2 x prune_k < 8"]),
    "s9-d-lookahead-prune-k-all-children": (*LA, ["branch.prune_k=2"], ["branch.prune_k=2", "none is pruned"]),
})
S9_SUBPROCESS = {"s9-d-serve-delay-per-item-neg", "s9-v-serve-kwargs-unknown-arg", "s9-d-serve-port-float"}
S9_ENV = {"s9-v-env-world-size-huge": {"WORLD_SIZE": "1000000000", "RANK": "0"},
          "s9-d-env-rank-equals-world": {"WORLD_SIZE": "2", "RANK": "2"},
          "s9-t-env-world-size-neg": {"WORLD_SIZE": "-2", "RANK": "0"},
          "s9-v-env-rank-space": {"WORLD_SIZE": "2", "RANK": " 1"}}
# the eleventh misuse sweep: the newest options (srpo.reference=predicted's own keys, reward servers' client settings,
# fit-encoder's model.head / aux_dim, the loop's data counts and success_state_points), type confusion in YAML and on
# the command line, config files of another command, the planner's flags. "was:" marks the cases that failed before
# this sweep; the others were already refused and cover an input class no earlier sweep touched
S11_SRPO = ["rl.reward=srpo"]
S11_REMOTE = ["rl.reward=http://127.0.0.1:9"]
S11_D_REMOTE = ["reward.name=http://127.0.0.1:9"]
SWEEP_11 = {
    # srpo.reference=predicted's keys under another reference (was: accepted and read nowhere)
    "s11-v-scene-encoder-reference-group": (*V, [*S11_SRPO, "srpo.reference=group", "srpo.scene_encoder=random_conv"],
                                            ["srpo.scene_encoder", "does nothing", "srpo.reference='group'"]),
    "s11-v-min-r2-reference-task": (*V, [*S11_SRPO, "srpo.reference=task", "srpo.predictor_min_r2=0.9"],
                                    ["srpo.predictor_min_r2", "does nothing", "srpo.reference='task'"]),
    "s11-v-memory-reference-group": (*V, [*S11_SRPO, "srpo.reference=group", "srpo.predictor_memory=64"],
                                     ["srpo.predictor_memory", "does nothing", "srpo.reference=predicted"]),
    "s11-v-ridge-reference-group": (*V, [*S11_SRPO, "srpo.reference=group", "srpo.predictor_ridge=1"],
                                    ["srpo.predictor_ridge", "does nothing"]),
    "s11-v-gamma-reference-task": (*V, [*S11_SRPO, "srpo.reference=task", "srpo.predictor_gamma=0.5"],
                                   ["srpo.predictor_gamma", "does nothing"]),
    "s11-v-min-layouts-reference-group": (*V, [*S11_SRPO, "srpo.reference=group", "srpo.predictor_min_layouts=8"],
                                          ["srpo.predictor_min_layouts", "does nothing"]),
    "s11-l-gamma-reference-group": (*L, ["vla.rl.reward=srpo", "vla.srpo.reference=group",
                                         "vla.srpo.predictor_gamma=0.5"], ["vla.srpo.predictor_gamma", "does nothing"]),
    # a reward server's client settings (was: accepted; 1e9 retries waited for years then overflowed, 1e9 threads,
    # a timeout of 1e300 the socket's OverflowError at the first request, port 0 a server that cannot exist)
    "s11-v-remote-retries-huge": (*V, [*S11_REMOTE, "rl.remote.retries=1000000000"],
                                  ["rl.remote.retries=1000000000", "at most 20"]),
    "s11-d-remote-retries-21": (*D, [*S11_D_REMOTE, "reward.remote.retries=21"], ["reward.remote.retries=21",
                                                                                   "at most 20"]),
    "s11-v-remote-in-flight-huge": (*V, [*S11_REMOTE, "rl.remote.max_in_flight=1000000000"],
                                    ["rl.remote.max_in_flight=1000000000", "at most 1024"]),
    "s11-v-remote-timeout-huge": (*V, [*S11_REMOTE, "rl.remote.timeout_s=1e300"],
                                  ["rl.remote.timeout_s=1e+300", "at most 86400 seconds"]),
    "s11-d-remote-backoff-huge": (*D, [*S11_D_REMOTE, "reward.remote.backoff_s=1e300"],
                                  ["reward.remote.backoff_s=1e+300", "at most 86400 seconds"]),
    "s11-v-remote-port-0": (*V, ["rl.reward=http://127.0.0.1:0"], ["rl.reward='http://127.0.0.1:0'", "port 0",
                                                                   "1..65535"]),
    "s11-d-remote-port-0": (*D, ["reward.name=http://127.0.0.1:0/"], ["reward.name='http://127.0.0.1:0/'", "port 0"]),
    "s11-d-remote-url-port-0": (*D, ["reward.remote.url=http://localhost:0"], ["reward.remote.url", "port 0"]),
    # fit-encoder: keys of the other head, an order temperature float32 cannot hold, a detour for ever (was: accepted;
    # rank_tau=1e-300 trained a NaN encoder, saved with exit 0)
    "s11-fe-dim-time-to-go": (*FE, ["model.head=time_to_go", "model.dim=8"],
                              ["model.dim", "does nothing", "model.head='time_to_go'"]),
    "s11-fe-distance-weight-no-aux": (*FE, ["train.distance_weight=0.5"],
                                      ["train.distance_weight", "does nothing", "model.aux_dim=0"]),
    "s11-fe-rank-tau-tiny": (*FE, ["train.rank_tau=1e-300"], ["train.rank_tau=1e-300", "[1e-06, 1e+06]"]),
    "s11-fe-rank-tau-huge": (*FE, ["train.rank_tau=1e300"], ["train.rank_tau=1e+300", "[1e-06, 1e+06]"]),
    "s11-fe-detour-steps-huge": (*FE, ["data.detour_per_task=2", "data.detour_steps=[0, 1000000000]"],
                                 ["data.detour_steps=[0, 1000000000]", "at most 100000"]),
    "s11-fe-policy-tasks-no-policy": (*FE, ["data.policy_tasks=[tabletop/reach]"],
                                      ["data.policy_tasks=['tabletop/reach']", "data.policy is empty"]),
    # was: exit 0 and an encoder written -- the tabletop policy's 4-d actions went to robosuite's 7-d arm, every
    # episode raised at step 0 and was counted as a failure; refused before any episode is recorded
    "s11-fe-policy-action-size": ("vla_rl.cli", ["fit-encoder", FE_CFG],
                                  ["data.policy=builtin:tabletop_base", "data.policy_per_task=1",
                                   "data.policy_tasks=[robosuite/Lift]", "output={assets}/e_lift.safetensors"],
                                  ["data.policy='builtin:tabletop_base'", "acts in 4 dimensions", "robosuite/Lift",
                                   "actions of size 7"]),
    # the loop: data of no episode, success_state_points the head cannot read (was: accepted, refused after the data
    # or read nowhere)
    "s11-l-train-no-episodes": (*L, ["data.train={success: 0, near: 0, failure: 0, random: 0}"],
                                ["data.train=", "no episode at all"]),
    "s11-l-test-no-episodes": (*L, ["data.test={success: 0, near: 0, failure: 0, random: 0}"],
                               ["data.test=", "no episode at all"]),
    "s11-l-success-points-repeated": (*L, ["models.success_state_points=[0, 0]"],
                                      ["models.success_state_points=[0, 0]", "at least 2 distinct"]),
    "s11-l-success-points-one": (*L, ["models.success_state_points=[9]"],
                                 ["models.success_state_points=[9]", "at least 2 distinct"]),
    "s11-l-success-points-beyond": (*L, ["models.success_state_points=[0, 999]"],
                                    ["models.success_state_points=[0, 999]", "has 12 entries", "at most 9"]),
    "s11-l-success-points-past-edge": (*L, ["models.success_state_points=[0, 10]"],
                                       ["models.success_state_points=[0, 10]", "at most 9"]),
    "s11-l-success-points-no-state-head": (*L, ["models.success_state=false", "models.success_state_points=[0, 9]"],
                                           ["models.success_state_points=[0, 9]", "models.success_state=false"]),
    # the toy's grpo: keys of another advantage (was: accepted; only the frontends' own inactive_keys added them)
    "s11-t-std-mode-median": (*T, ["grpo.advantage=median", "grpo.std_mode=none"],
                              ["grpo.std_mode", "does nothing", "grpo.advantage='median'"]),
    "s11-t-reward-weights-mean-std": (*T, ["grpo.reward_weights={a: 1}"], ["grpo.reward_weights", "does nothing"]),
    "s11-l-std-mode-median": (*L, ["vla.grpo.advantage=median", "vla.grpo.std_mode=none"],
                              ["vla.grpo.std_mode", "does nothing"]),
    # the planner: a GPU count twice (was: its table row printed twice)
    "s11-v-plan-gpus-twice": ("vla_rl.cli", ["train", V_CFG, "--plan"], ["--gpus", "1,1"],
                              ["--gpus='1,1'", "positive integers", "each once"]),
    "s11-d-plan-gpus-twice": ("diffusion_rl.cli", ["train", "configs/diffusion/sd35m_pickscore.yaml", "--plan"],
                              ["--gpus", "8,1,8"], ["--gpus='8,1,8'", "each once"]),
}
SWEEP_11.update({
    # already refused: type confusion in the newest keys (strings, lists, booleans, null, 1e309, -0)
    "s11-v-memory-float-string": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_memory=1e3"],
                                  ["srpo.predictor_memory", "expects int", "'1e3'"]),
    "s11-v-memory-bool": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_memory=true"],
                          ["srpo.predictor_memory", "True (bool)"]),
    "s11-v-memory-list": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_memory=[8]"],
                          ["srpo.predictor_memory", "[8] (list)"]),
    "s11-v-memory-quoted": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_memory='64'"],
                            ["srpo.predictor_memory", "'64' (str)"]),
    "s11-v-min-layouts-neg-zero": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_min_layouts=-0"],
                                   ["srpo.predictor_min_layouts=0", "[2, 100000]"]),
    "s11-v-min-r2-quoted-nan": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_min_r2='nan'"],
                                ["srpo.predictor_min_r2", "finite"]),
    "s11-v-min-r2-neg-overflow": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_min_r2=-1e309"],
                                  ["srpo.predictor_min_r2", "finite", "-1e309"]),
    "s11-v-ridge-overflow": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_ridge=1e309"],
                             ["srpo.predictor_ridge", "finite", "1e309"]),
    "s11-v-gamma-neg-zero": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_gamma=-0.0"],
                             ["srpo.predictor_gamma=-0.0", "(0, 1e6]"]),
    "s11-v-gamma-list": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.predictor_gamma=[0.3]"],
                         ["srpo.predictor_gamma", "[0.3] (list)"]),
    "s11-v-scene-encoder-empty": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.scene_encoder=''"],
                                  ["srpo.scene_encoder", "'policy', 'random_conv'", "'' (str)"]),
    "s11-v-scene-encoder-null": (*V, [*S11_SRPO, "srpo.reference=predicted", "srpo.scene_encoder=null"],
                                 ["srpo.scene_encoder", "None"]),
    "s11-v-state-dims-scalar": (*V, [*S11_SRPO, "srpo.encoder=proprio", "srpo.state_dims=0"],
                                ["srpo.state_dims", "list[int] or None", "0 (int)"]),
    "s11-v-state-dims-csv": (*V, [*S11_SRPO, "srpo.encoder=proprio", "srpo.state_dims='0,1'"],
                             ["srpo.state_dims", "'0,1' (str)"]),
    "s11-v-state-dims-overflow": (*V, [*S11_SRPO, "srpo.encoder=proprio", "srpo.state_dims=[1e309]"],
                                  ["srpo.state_dims", "1e309"]),
    "s11-v-state-dims-mapping": (*V, [*S11_SRPO, "srpo.encoder=proprio", "srpo.state_dims={a: 1}"],
                                 ["srpo.state_dims", "(dict)"]),
    "s11-v-sim-noise-list": (*V, ["rl.reward=sim_progress", "rl.sim_progress_noise=[0.1]"],
                             ["rl.sim_progress_noise", "[0.1] (list)"]),
    "s11-v-sim-noise-overflow": (*V, ["rl.reward=sim_progress", "rl.sim_progress_noise=1e309"],
                                 ["rl.sim_progress_noise", "finite", "1e309"]),
    "s11-v-sim-noise-binary": (*V, ["rl.reward=binary", "rl.sim_progress_noise=0.1"],
                               ["rl.sim_progress_noise", "does nothing", "rl.reward='binary'"]),
    "s11-v-reward-case": (*V, ["rl.reward=Sim_Progress"], ["rl.reward='Sim_Progress'", "sim_progress"]),
    "s11-v-reward-two": (*V, ["rl.reward=sim_progress,binary"], ["rl.reward='sim_progress,binary'"]),
    "s11-v-reward-empty": (*V, ["rl.reward=''"], ["rl.reward=''", "binary, srpo, sim_progress"]),
    "s11-v-reward-list": (*V, ["rl.reward=[binary]"], ["rl.reward", "['binary'] (list)"]),
    "s11-v-std-mode-case": (*V, ["grpo.std_mode=Group"], ["grpo.std_mode", "'group', 'global', 'none'", "'Group'"]),
    "s11-v-std-mode-list": (*V, ["grpo.std_mode=[group]"], ["grpo.std_mode", "['group'] (list)"]),
    "s11-v-std-mode-empty": (*V, ["grpo.std_mode=''"], ["grpo.std_mode", "'' (str)"]),
    "s11-d-std-mode-gdpo": (*D, ["grpo.advantage=gdpo", "grpo.std_mode=group"],
                            ["grpo.std_mode", "does nothing", "gdpo"]),
    "s11-v-band-one": (*V, ["rl.success_band=[0.5]"], ["rl.success_band", "2 items, got 1"]),
    "s11-v-band-three": (*V, ["rl.success_band=[0.1, 0.2, 0.3]"], ["rl.success_band", "2 items, got 3"]),
    "s11-v-band-scalar": (*V, ["rl.success_band=0.5"], ["rl.success_band", "0.5 (float)"]),
    "s11-v-band-csv": (*V, ["rl.success_band='0,1'"], ["rl.success_band", "'0,1' (str)"]),
    "s11-v-band-bools": (*V, ["rl.success_band=[true, false]"], ["rl.success_band[0]", "True (bool)"]),
    "s11-v-band-overflow": (*V, ["rl.success_band=[-0.0, 1e309]"], ["rl.success_band[1]", "finite"]),
    "s11-v-band-null": (*V, ["rl.success_band=null"], ["rl.success_band", "None"]),
    "s11-v-band-empty-width": (*V, ["rl.success_band=[0.5, 0.5]"], ["rl.success_band", "low < high", "[0.5, 0.5]"]),
    "s11-v-band-file-scalar": ("vla_rl.cli", ["train", "{assets}/band_scalar.yaml", "--dry-run"], [],
                               ["band_scalar.yaml", "rl.success_band", "0.5 (float)"]),
    "s11-v-eval-split-case": (*V, ["rl.eval_split=Test"], ["rl.eval_split", "'validation', 'test'", "'Test'"]),
    "s11-v-eval-split-list": (*V, ["rl.eval_split=[test]"], ["rl.eval_split", "['test'] (list)"]),
    "s11-v-eval-split-empty": (*V, ["rl.eval_split=''"], ["rl.eval_split", "'' (str)"]),
    "s11-v-test-offset-overflow": (*V, ["rl.test_seed_offset=1e309"], ["rl.test_seed_offset", "'1e309'"]),
    "s11-v-remote-null": (*V, [*S11_REMOTE, "rl.remote=null"], ["rl.remote", "mapping", "None"]),
    "s11-v-remote-encoding-case": (*V, [*S11_REMOTE, "rl.remote.encoding=PNG"], ["rl.remote.encoding", "'PNG'"]),
    "s11-v-remote-url-twice": (*V, [*S11_REMOTE, "rl.remote.url=http://127.0.0.1:9"],
                               ["rl.remote.url", "name the server in rl.reward"]),
    "s11-v-remote-batch-float": (*V, [*S11_REMOTE, "rl.remote.batch_size=1e3"], ["rl.remote.batch_size", "'1e3'"]),
    "s11-v-reward-url-space": (*V, ["rl.reward=http://host name:80"], ["rl.reward=", "whitespace"]),
    "s11-v-reward-url-query": (*V, ["rl.reward=https://127.0.0.1:9/path?q=1"], ["rl.reward=", "?query"]),
    "s11-v-log-nosuch-backend": (*V, ["log.backends=[nosuch]"], ["log.backends[0]", "'nosuch'"]),
    "s11-v-log-project-blank": (*V, ["log.project='  '"], ["log.project", "must not be empty"]),
    "s11-v-log-wandb-mode-case": (*V, ["log.wandb_mode=Offline"], ["log.wandb_mode", "'Offline'"]),
    "s11-v-log-run-name-list": (*V, ["log.run_name=[x]"], ["log.run_name", "['x'] (list)"]),
    "s11-v-log-section-list": (*V, ["log=[]"], ["'log'", "mapping (LogConfig)"]),
    "s11-d-log-backend-case": (*D, ["log.backends=[tensorboard, Tensorboard]"], ["log.backends[1]", "'Tensorboard'"]),
    "s11-d-adv-clip-string": (*D, ["grpo.adv_clip='none'"], ["grpo.adv_clip", "'none'"]),
    "s11-d-clip-low-overflow": (*D, ["grpo.clip_low=1e309"], ["grpo.clip_low", "finite"]),
    "s11-d-group-size-float-string": (*D, ["grpo.group_size=1e1"], ["grpo.group_size", "'1e1'"]),
    "s11-d-group-size-bool": (*D, ["grpo.group_size=true"], ["grpo.group_size", "True (bool)"]),
    "s11-d-kl-overflow": (*D, ["grpo.kl_coef=1e309"], ["grpo.kl_coef", "finite"]),
    "s11-d-grpo-null": (*D, ["grpo=null"], ["'grpo'", "mapping (GRPOConfig)", "None"]),
    "s11-d-resume-quoted-true": (*D, ["resume='true'"], ["resume", "expects bool", "'true'"]),
    "s11-d-iterations-overflow": (*D, ["train.iterations=1e309"], ["train.iterations", "'1e309'"]),
    "s11-d-adv-clip-neg-zero": (*D, ["grpo.adv_clip=-0.0"], ["grpo.adv_clip", "> 0", "-0.0"]),
    # the loop's sections of the wrong type
    "s11-l-vla-null": (*L, ["vla=null"], ["'vla'", "mapping (VLARLConfig)"]),
    "s11-l-models-list": (*L, ["models=[]"], ["'models'", "mapping (ModelsConfig)"]),
    "s11-l-task-list": (*L, ["data.task=[tabletop/reach_one]"], ["data.task", "expects str"]),
    "s11-l-train-list": (*L, ["data.train=[1]"], ["data.train", "[1] (list)"]),
    "s11-l-threshold-zero": (*L, ["models.success_threshold=0"], ["models.success_threshold", "(0, 1)"]),
    "s11-l-state-dims-beyond": (*L, ["vla.rl.reward=srpo", "vla.srpo.encoder=proprio", "vla.srpo.state_dims=[500]"],
                                ["srpo.state_dims=[500]", "12 entries"]),
    "s11-l-log-backends-twice": (*L, ["vla.log.backends=[tensorboard, tensorboard]"],
                                 ["log.backends", "more than once"]),
    # fit-encoder: type confusion, keys of another command
    "s11-fe-head-case": (*FE, ["model.head=Distance"], ["model.head", "'time_to_go', 'distance'", "'Distance'"]),
    "s11-fe-dim-list": (*FE, ["model.head=distance", "model.dim=[16]"], ["model.dim", "[16] (list)"]),
    "s11-fe-context-list": (*FE, ["model.context=[first]"], ["model.context", "['first'] (list)"]),
    "s11-fe-context-null": (*FE, ["model.context=null"], ["model.context", "None"]),
    "s11-fe-aux-dim-bool": (*FE, ["model.aux_dim=true"], ["model.aux_dim", "True (bool)"]),
    "s11-fe-channels-scalar": (*FE, ["model.channels=16"], ["model.channels", "16 (int)"]),
    "s11-fe-hidden-overflow": (*FE, ["model.hidden=1e309"], ["model.hidden", "'1e309'"]),
    "s11-fe-rank-tau-nan": (*FE, ["train.rank_tau=nan"], ["train.rank_tau", "finite"]),
    "s11-fe-detour-steps-one": (*FE, ["data.detour_steps=[5]"], ["data.detour_steps=[5]", "[low, high]"]),
    "s11-fe-policy-failures-unknown": (*FE, ["data.policy_failures=keep"], ["data.policy_failures", "'keep'"]),
    "s11-fe-camera-empty": (*FE, ["data.camera=''"], ["data.camera", "unknown camera ''"]),
    "s11-fe-expert-tasks-string": (*FE, ["data.expert_tasks=tabletop/reach"], ["data.expert_tasks", "list[str]"]),
    "s11-fe-env-kwargs-list": (*FE, ["data.env_kwargs=[1]"], ["data.env_kwargs", "expects dict"]),
    "s11-fe-output-list": (*FE, ["output=[x]"], ["'output'", "['x'] (list)"]),
    "s11-fe-rl-key": (*FE, ["rl.iterations=1"], ["unknown config key 'rl'", "data, model, output, seed, train"]),
    "s11-fe-srpo-key": (*FE, ["srpo.encoder=progress"], ["unknown config key 'srpo'"]),
    # a config file of another command
    "s11-fe-train-config": ("vla_rl.cli", ["fit-encoder", V_CFG, "--dry-run"], [],
                            ["tabletop_reach.yaml", "unknown config key 'output_dir'", "did you mean 'output'"]),
    "s11-v-fit-encoder-config": ("vla_rl.cli", ["train", FE_CFG, "--dry-run"], [],
                                 ["fit_progress_encoder.yaml", "unknown config key"]),
    "s11-v-loop-config": ("vla_rl.cli", ["train", L_CFG, "--dry-run"], [],
                          ["loop_reach_one.yaml", "unknown config key"]),
    "s11-l-train-config": ("vla_rl.cli", ["loop", V_CFG, "--dry-run"], [], ["tabletop_reach.yaml",
                                                                            "unknown config key 'env'"]),
    "s11-d-vla-config": ("diffusion_rl.cli", ["train", V_CFG, "--dry-run"], [], ["tabletop_reach.yaml",
                                                                                 "unknown config key 'env'"]),
    "s11-t-diffusion-config": ("diffusion_rl.cli", ["toy", D_CFG, "--dry-run"], [],
                               ["tiny_sd3_flat.yaml", "unknown config key 'reward'"]),
    "s11-d-toy-config": ("diffusion_rl.cli", ["train", T_CFG, "--dry-run"], [], ["toy_flow.yaml",
                                                                                 "unknown config key 'model."]),
    "s11-v-robot-loop-config": ("vla_rl.cli", ["train", "configs/robot/loop_sims.yaml", "--dry-run"], [],
                                ["loop_sims.yaml", "unknown config key 'policy_path'"]),
    "s11-l-robot-loop-config": ("vla_rl.cli", ["loop", "configs/robot/loop_sims.yaml", "--dry-run"], [],
                                ["loop_sims.yaml", "unknown config key 'policy_path'"]),
    # other commands' flags
    "s11-r-noise-overflow": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r11.hdf5", "--noise",
                                            "1e309"], [], ["--noise=inf", "finite"]),
    "s11-r-seed-offset-huge": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r11.hdf5",
                                              "--seed-offset", "99999999999999999999"], [],
                               ["--seed-offset=99999999999999999999", "[0, 4294967295]"]),
    "s11-r-n-neg-zero": ("vla_rl.cli", ["record-demos", "tabletop/reach", "-0", "{assets}/r11.hdf5"], [],
                         ["n=0", ">= 1"]),
    "s11-r-cameras-twice": ("vla_rl.cli", ["record-demos", "tabletop/reach", "1", "{assets}/r11.hdf5", "--cameras",
                                           "agentview", "agentview"], [], ["cameras must not repeat"]),
    "s11-d-serve-kwargs-null": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--kwargs", "null", "--port",
                                                     "0"], [], ["--kwargs 'null'", "a JSON object"]),
    "s11-d-serve-kwargs-string": ("diffusion_rl.cli", ["serve-reward", "shapes_verifier", "--kwargs", '"x"', "--port",
                                                       "0"], [], ["--kwargs", "a JSON object"]),
    "s11-v-plan-peak-neg": ("vla_rl.cli", ["train", V_CFG, "--plan"], ["--peak-tflops", "-1"],
                            ["--peak-tflops=-1.0", "finite TFLOP/s > 0"]),
    "s11-l-plan-gpus-neg": ("vla_rl.cli", ["loop", L_CFG, "--plan"], ["--gpus", "-8"], ["--gpus='-8'"]),
    "s11-d-plan-gpus-float": ("diffusion_rl.cli", ["train", "configs/diffusion/sd35m_pickscore.yaml", "--plan"],
                              ["--gpus", "1e3"], ["--gpus='1e3'"]),
})
SWEEP_11.update({
    # damaged checkpoints (was: safetensors' "unknown variant" traceback, an AttributeError traceback, a step of
    # another number resumed / evaluated / exported as its directory's, "error: config" naming nothing, a latest
    # pointer naming best/ resumed from there)
    "s11-d-eval-hdr-dtype": ("diffusion_rl.cli", ["eval", "{drun_hdrdtype_ck}"], [],
                             ["trainable.safetensors", "dtype 'Q9'", "not a safetensors dtype"]),
    "s11-v-resume-hdr-dtype": ("vla_rl.cli", ["train", V_CFG], ["{vrun_hdrdtype}", *V_TINY, "rl.iterations=2"],
                               ["resume:", "model.safetensors", "dtype 'Q9'", "left untouched"]),
    "s11-d-export-hdr-list": ("diffusion_rl.cli", ["export", "{drun_hdrlist_dir}", "{assets}/exp11"], [],
                              ["trainable.safetensors", "header cannot be read"]),
    "s11-v-eval-hdr-list": ("vla_rl.cli", ["eval", "{vrun_hdrlist_dir}"], [], ["model.safetensors",
                                                                              "header cannot be read"]),
    "s11-d-resume-step-neg": ("diffusion_rl.cli", ["train", D_CFG], ["{drun_stepneg}", *D_TINY, "train.iterations=2"],
                              ["resume:", "state.json", "'step' is -5", "left untouched"]),
    "s11-v-eval-step-mismatch": ("vla_rl.cli", ["eval", "{vrun_stepmismatch_ck}"], [],
                                 ["state.json", "'step' is 7", "the number of step_"]),
    "s11-d-export-step-bool": ("diffusion_rl.cli", ["export", "{drun_stepbool_dir}", "{assets}/exp11"], [],
                               ["state.json", "'step' is True"]),
    "s11-t-resume-step-str": ("diffusion_rl.cli", ["toy", T_CFG], ["{trun_stepstr}", "train.iterations=2"],
                              ["state.json", "'step' 'one'"]),
    "s11-d-eval-no-config": ("diffusion_rl.cli", ["eval", "{drun_noconfig_ck}"], [],
                             ["state.json", "holds no 'config'"]),
    "s11-v-resume-no-config": ("vla_rl.cli", ["train", V_CFG], ["{vrun_noconfig}", *V_TINY, "rl.iterations=2"],
                               ["resume:", "holds no 'config'"]),
    "s11-t-resume-no-config": ("diffusion_rl.cli", ["toy", T_CFG], ["{trun_noconfig}", "train.iterations=2"],
                               ["resume:", "holds no 'config'"]),
    "s11-d-eval-latest-best": ("diffusion_rl.cli", ["eval", "{drun_latestbest_dir}"], [],
                               ["latest holds 'best'", "step_* directory"]),
    "s11-v-resume-latest-best": ("vla_rl.cli", ["train", V_CFG], ["{vrun_latestbest}", *V_TINY, "rl.iterations=2"],
                                 ["resume:", "latest holds 'best'"]),
})
SWEEP_11.update({
    # counts and waits without an end, a tracker URI of whitespace (was: accepted)
    "s11-v-inner-epochs-huge": (*V, ["rl.inner_epochs=1000000000"], ["rl.inner_epochs", "1000000000", "1000"]),
    "s11-d-inner-epochs-huge": (*D, ["train.inner_epochs=1001"], ["train.inner_epochs", "1001"]),
    "s11-t-inner-epochs-huge": (*T, ["train.inner_epochs=1000000000"], ["train.inner_epochs", "1000000000"]),
    "s11-l-inner-epochs-huge": (*L, ["vla.rl.inner_epochs=1000000000"], ["rl.inner_epochs", "1000000000"]),
    "s11-d-reward-retries-huge": (*D, ["reward.retries=1000000000"], ["reward.retries=1000000000", "at most 20"]),
    "s11-d-reward-backoff-huge": (*D, ["reward.retry_backoff_s=1e300"], ["reward.retry_backoff_s=1e+300",
                                                                         "at most 86400"]),
    "s11-v-mlflow-uri-blank": (*V, ["log.backends=[mlflow]", "log.mlflow_uri=' '"],
                               ["log.mlflow_uri=' '", "whitespace"]),
})
SWEEP_11.update({
    # already refused: eval's overrides of the wrong type or key, the LoRA of another rank
    "s11-d-eval-num-eval-list": ("diffusion_rl.cli", ["eval", "{drun}", "prompts.num_eval=[1]"], [],
                                 ["prompts.num_eval", "[1] (list)"]),
    "s11-d-eval-lora-rank": ("diffusion_rl.cli", ["eval", "{drun}", "model.lora.rank=8"], [],
                             ["has shape [4, 32]", "[8, 32]", "model.lora"]),
    "s11-d-eval-srpo-key": ("diffusion_rl.cli", ["eval", "{drun}", "srpo.encoder=proprio"], [],
                            ["unknown config key 'srpo'", "did you mean 'grpo'"]),
})
CASES.update(SWEEP_4)
CASES.update(SWEEP_5)
CASES.update(SWEEP_6)
CASES.update(SWEEP_7)
CASES.update(SWEEP_8)
CASES.update(SWEEP_9)
CASES.update(SWEEP_11)
ENV_OF.update(S9_ENV)
EXIT_2 = {c for c in CASES if c.startswith(("v-sim-", "v-robosuite-", "v-libero-", "l-sim-", "l-demo-", "v-eval-sim-"))
          } | set(SWEEP) | set(SWEEP_2) | set(SWEEP_3) | set(SWEEP_4) | set(SWEEP_5) | set(SWEEP_6) | set(SWEEP_7) \
    | set(SWEEP_8) | set(SWEEP_9) | set(SWEEP_11)
NEEDS = {"drun": "diffusion_run", "vrun": "vla_run", "trun": "toy_run", "demo": "demo_wrong_action"}
# Run as ``python -m <cli>`` in a subprocess (the real entry point and exit code of a fresh interpreter): one case of
# every subcommand of both CLIs, and every case whose command imports robosuite or LIBERO (their imports print to the
# process's stdout/stderr once, which a warm test process would not show again). The others run in this process.
SUBPROCESS = {"d-unknown-key", "t-unknown-key", "d-serve-unknown", "d-eval-missing", "d-export-missing",
              "d-report-existing", "p-zero-steps", "v-unknown-key", "l-unknown-key", "v-serve-bad-port",
              "v-eval-missing", "v-report-existing", "r-zero-n", "fe-unknown-key",
              # (they served forever before their checks: a subprocess times out, a call would hang)
              "d-serve-delay-nan", "v-serve-not-callable", "d-serve-empty-host", "d-tracker-cannot-start",
              "s4-d-serve-host-unknown", "s5-d-serve-delay-huge",
              # (MUJOCO_GL is read once per process, when the renderer is first chosen)
              "s6-v-env-mujoco-gl", "s6-r-env-mujoco-gl", "s8-v-env-pyopengl-platform",
              "s8-r-env-pyopengl-platform-mismatch",
              *S9_SUBPROCESS,
              *(c for c, (_, head, extra, _) in CASES.items()
                if c.startswith("lb-") or any(w in " ".join(head + extra) for w in ("robosuite", "libero")))}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input(case, assets, request, tmp_path, capfd, caplog, monkeypatch):
    module, head, extra, expect = CASES[case]
    subs = {"assets": str(assets)}
    text = " ".join(head + extra)
    for key, fixture in NEEDS.items():
        if "{" + key in text:
            subs[key] = str(request.getfixturevalue(fixture))
    if "{vrun_badenv_ck}" in text:  # a checkpoint whose saved config names a simulator option that does not exist
        dst = tmp_path / "vrun_badenv"
        shutil.copytree(request.getfixturevalue("vla_run"), dst, symlinks=True)
        ck = max((dst / "checkpoints").glob("step_*"))
        st = json.loads((ck / "state.json").read_text())
        kwargs = st["state"]["__dict__"]["config"]["__dict__"]["env"]["__dict__"]["kwargs"]["__dict__"]
        kwargs["bogus_opt"] = 1
        (ck / "state.json").write_text(json.dumps(st))
        subs["vrun_badenv_ck"] = str(ck)
    for kind in ("truncated", "nostate", "copy", "stalelatest", "nolora", "statelist", "stateempty", "latestbinary",
                 "shape", "nan", "policytrunc", "int", "wrongkeys", "garbled", "hdrhuge", "hdrzero",
                 "fifostate", "fifoinfo", "fifolatest", "evalfile", "latestempty", "latestoutside", "runinfolist",
                 "runinfoempty", "metricsdir", "ckfile", "statezero", "hdrdtype", "hdrlist", "stepneg", "stepmismatch",
                 "stepbool", "stepstr", "noconfig", "latestbest"):
        for key, fixture in (("drun", "diffusion_run"), ("vrun", "vla_run"), ("trun", "toy_run")):
            if f"{{{key}_{kind}" in text:
                src = request.getfixturevalue(fixture)
                dst = _corrupt_copy(src, tmp_path / f"{key}_{kind}", kind)
                subs[f"{key}_{kind}"] = f"output_dir={dst}"
                cks = (dst / "checkpoints").glob("step_*")
                subs[f"{key}_{kind}_ck"] = str(max(cks, default=dst / "checkpoints"))
                subs[f"{key}_{kind}_dir"] = str(dst)
    def fill(text: str) -> str:
        for k, v in subs.items():
            text = text.replace("{" + k + "}", v)
        return text

    head, extra, expect = [fill(a) for a in head], [fill(a) for a in extra], [fill(e) for e in expect]
    # the run directory of a dry run: watched too (a dry run writes nothing)
    has_out = any(a.startswith("output_dir=") for a in extra)
    if not has_out and any(a.endswith(".yaml") for a in head) and head[0] in ("train", "loop", "toy"):
        extra = [f"output_dir={tmp_path / 'run'}", *extra]
    for var, value in ENV_OF.get(case, {}).items():  # (run_cli passes os.environ on)
        monkeypatch.setenv(var, value)
    watched = [tmp_path, assets]
    before = [snapshot(w) for w in watched]
    if case in SUBPROCESS:
        r = run_cli(module, head + extra)
    else:
        r = run_in_process(module, head + extra, capfd, caplog, monkeypatch)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0, f"exit 0; stdout tail: {r.stdout[-500:]}"
    assert r.returncode == 2 or case not in EXIT_2, f"exit {r.returncode}, expected 2 (bad input)"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1, f"{len(lines)} stderr lines:\n" + "\n".join(lines[-15:])
    missing = [e for e in expect if e.lower() not in lines[0].lower()]
    assert not missing, f"error line lacks {missing}: {lines[0]}"
    after = [snapshot(w) for w in watched]
    for w, b, a in zip(watched, before, after):
        changed = sorted(set(b.items()) ^ set(a.items()))
        assert not changed, f"{w} changed: {changed[:10]}"


def test_vla_eval_video_goes_beside_the_evaluated_run(vla_run, tmp_path):
    """``vla-rl eval RUN --video`` of a moved (or copied) run writes its video under RUN/eval, not into the directory
    the run was trained in (the sweep 5 find: the original's directory got it, recreated when it was gone)."""
    moved = tmp_path / "moved"
    shutil.copytree(vla_run, moved, symlinks=True)
    before = snapshot(vla_run)
    r = run_cli("vla_rl.cli", ["eval", str(moved), "--video"], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    video = json.loads(r.stdout.strip().splitlines()[-1])["video"]
    assert Path(video).is_file() and moved / "eval" in Path(video).parents, video
    assert snapshot(vla_run) == before


# ---- SIGINT mid-run, then resume -----------------------------------------------------------------------------
def _interrupt_then_resume(module: str, args: list[str], ready, total_key: str, tmp_out: Path):
    """Start ``args``; once ``ready(out)`` holds send SIGINT; the run must exit 0 after saving ("stopped by SIGINT
    after iteration N"), and the same command with ``total_key=N+1`` must resume from it and finish."""
    import re
    import signal
    import time

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not ready(tmp_out) and p.poll() is None and time.time() - t0 < 240:
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    m = re.search(r"stopped by SIGINT after iteration (\d+); checkpoint saved", out)
    assert m, out[-2000:]
    n = int(m.group(1))
    assert (tmp_out / "checkpoints" / f"step_{n:06d}" / "state.json").exists()
    r = run_cli(module, [*args, f"{total_key}={n + 1}"], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "resumed from" in r.stdout + r.stderr and f"step_{n:06d}" in r.stdout + r.stderr
    assert (tmp_out / "checkpoints" / f"step_{n + 1:06d}" / "state.json").exists()


def _metrics_rows(out: Path) -> int:
    f = out / "metrics.jsonl"
    return sum('"reward/mean"' in ln for ln in f.read_text().splitlines()) if f.exists() else 0


def test_sigint_mid_run_then_resume_vla(tmp_path):
    out = tmp_path / "run"
    args = ["train", V_CFG, f"output_dir={out}", *V_TINY, "rl.iterations=200", "rl.save_every=100"]
    _interrupt_then_resume("vla_rl.cli", args, lambda o: _metrics_rows(o) >= 1, "rl.iterations", out)


def test_sigint_mid_run_then_resume_diffusion(tmp_path):
    out = tmp_path / "run"
    args = ["train", D_CFG, f"output_dir={out}", *D_TINY, "train.iterations=200", "train.save_every=100",
            "train.eval_every=0"]
    _interrupt_then_resume("diffusion_rl.cli", args, lambda o: _metrics_rows(o) >= 1, "train.iterations", out)


# the fourth misuse sweep's bench finds: each started the bench (then a traceback, or an unbounded run, or results
# written from nothing), or printed argparse's usage block (several lines) instead of one line
SWEEP_4_BENCH = [
    ("bench_tree_pool.py", ["--eval-prompts", "0"], None, ["--eval-prompts 0", "expected >= 1"]),
    ("bench_tree_pool.py", ["--target-area", "nan"], None, ["--target-area nan", "finite and > 0"]),
    ("bench_tree_pool.py", ["--overrun", "inf"], None, ["--overrun inf", "finite and >= 1"]),
    ("bench_tree_pool.py", ["--model-path", ""], None, ["--model-path ''", "builtin:<name>"]),
    ("bench_tree_pool.py", ["--format", "bf16"], None, ["--format", "'bf16'", "'fp8', 'nvfp4'"]),
    ("bench_srpo_regime.py", ["--out", ""], None, ["--out is empty", "a directory path"]),
    ("bench_srpo_regime.py", ["--seeds", "abc"], None, ["--seeds", "'abc'", "invalid int"]),
    ("bench_progress.py", ["--tasks", ""], None, ["--tasks []", "at least one"]),
    ("bench_progress.py", ["--eta", "nan"], None, ["--eta nan", "finite"]),
    ("bench_progress.py", ["--out", "{f}"], {}, ["--out", "is a file, not a directory"]),
    # runs of another task (and start, budget) were joined into one seed's table as "same seed, same start"
    ("bench_tree_pool.py", ["--report-from", "{f}", "--arms", "flat GRPO,tree+prune"],
     [{"seed": 0, "task": "big", "before": 0.1, "target": 0.2, "B": 10.0, "arms": {}},
      {"seed": 0, "task": "layout", "before": 0.3, "target": 0.5, "B": 99.0, "arms": {}}],
     ["seed 0: the runs differ in 'task' ('big' vs 'layout')", "one bench setting"]),
]

# the fifth misuse sweep's bench finds: a ZeroDivisionError or a config's traceback after the runs (bench_branch wrote
# its first mode's run first), a bench that started on values it cannot use, an empty table with exit 0; and
# argparse's usage block (several lines) of every bench that still printed it
SWEEP_5_BENCH = [
    ("bench_branch.py", ["--iterations", "0"], None, ["--iterations 0", "expected", ">= 1"]),
    ("bench_branch.py", ["--out", "{f}"], {}, ["--out=", "is a file, not a directory"]),
    ("bench_quant.py", ["--train", "20", "--pool", "4"], None, ["--train 20, --pool 4", "2 <= --train <= --pool"]),
    ("bench_sims.py", ["--seconds", "-1", "--no-robosuite"], None, ["--seconds -1.0", "a finite --seconds > 0"]),
    ("bench_vla.py", ["--iterations", "0"], None, ["--iterations 0", "expected >= 1"]),
    ("bench_vla.py", ["--config", "{f}"], None, ["config file not found", "runs.json"]),
    ("bench_windows.py", ["--episodes", "0"], None, ["--episodes 0", "expected --episodes >= 8"]),
    ("bench_world_models.py", ["--cycles", "-1"], None, ["cycles and rl_iterations must be >= 0", "-1"]),
    ("bench_remote_reward.py", ["--overlap", "0"], None, ["--overlap 0", "1..16"]),
    ("bench_distributed.py", ["--iterations", "0", "--skip-diffusion", "--skip-vla"], None,
     ["--iterations 0", "iteration counts >= 3"]),
    ("bench_onpolicy.py", ["--only", "nosuch"], None, ["--only 'nosuch'", "tiny_sd3_flat"]),
    ("bench_plan.py", ["--tolerance", "nan"], None, ["--tolerance nan", "finite fraction > 0"]),
    ("diag_tree_learning.py", ["--lr", "nan", "--small"], None, ["--lr nan", "finite numbers > 0"]),
    ("diag_progress_failures.py", ["{f}"], None, ["runs.json", "an existing .safetensors file"]),
    ("bench_branch_headroom.py", ["--seeds", "x"], None, ["--seeds", "invalid int value: 'x'"]),
    ("bench_libero.py", ["--nosuch"], None, ["unrecognized arguments: --nosuch"]),
]

# the sixth misuse sweep's bench finds ({fifo}: a FIFO, {loop}: a symlink loop): was a hang (a --report-from FIFO),
# pathlib's "Symlink loop" traceback, a bench that started its runs on an --out no run can write, or a FIFO reported as
# a file that "does not exist"
SWEEP_6_BENCH = [
    ("bench_tree_pool.py", ["--report-from", "{fifo}"], None, ["--report-from", "not a regular file"]),
    ("bench_lookahead.py", ["--report-from", "{fifo}"], None, ["--report-from", "not a regular file"]),
    ("bench_srpo_rule.py", ["--report-from", "{fifo}"], None, ["--report-from", "is not a regular file"]),
    ("bench_eva_seeds.py", ["--out", "{loop}"], None, ["--out=", "symlink that leads nowhere"]),
    ("bench_eva_seeds.py", ["--out", "{f}"], {}, ["--out=", "is a file, not a directory"]),
    ("bench_wm_loop_seeds.py", ["--out", "{loop}"], None, ["--out=", "symlink that leads nowhere"]),
    ("bench_branch_headroom.py", ["--out", "{loop}"], None, ["--out=", "symlink that leads nowhere"]),
    ("bench_lookahead.py", ["--out", "{loop}"], None, ["--out=", "symlink that leads nowhere"]),
    ("bench_tree_pool.py", ["--json-out", "{loop}/x.json"], None, ["--json-out", "existing folder"]),
    ("bench_progress.py", ["--out", "{loop}"], None, ["--out=", "symlink that leads nowhere"]),
    ("bench_vla.py", ["--config", "{fifo}"], None, ["config file", "not a regular file"]),
    ("gpu_check.py", ["--dry", "--no-plan", "--out", "{loop}"], None, ["--out", "symlink that leads nowhere"]),
]


# the seventh misuse sweep's bench finds: a nan learning rate's traceback after pretraining, a nan radius / noise scale
# or a zero count that started the runs, an option that exited 1 after the others were checked, a task of another
# simulator (a TypeError traceback), an output into another run, a JSON path that failed after the whole run
SWEEP_7_BENCH = [
    ("bench_gdpo.py", ["--lrs", "nan"], None, ["--lrs finite positive numbers", "'nan'"]),
    ("bench_gdpo.py", ["--hit-radius", "nan"], None, ["a finite --hit-radius > 0", "nan"]),
    ("bench_gdpo.py", ["--prompts", "0"], None, ["--prompts >= 1", "got 10, 8, 150, 0"]),
    ("bench_mcgrpo.py", ["--lr", "nan"], None, ["--lr nan", "a finite --lr > 0"]),
    ("bench_mcgrpo.py", ["--noise-scale", "nan"], None, ["--noise-scale nan", "a finite --noise-scale >= 0"]),
    ("bench_mcgrpo.py", ["--flip-groups", "0"], None, ["--flip-groups 0", "--flip-groups >= 1"]),
    ("bench_mcgrpo.py", ["--prompts", "0"], None, ["--prompts 0", "--prompts >= 1"]),
    ("bench_branch.py", ["--leaves", "3"], None, ["--leaves 3", "expected 16"]),
    ("bench_libero.py", ["--task", "tabletop/reach"], None, ["--task 'tabletop/reach'", "libero/<suite>/<i>"]),
    ("bench_vla.py", ["--config", str(REPO / V_CFG), "--json", "{f}/x.json"], {}, ["--json=", "is a file"]),
    ("bench_vla.py", ["--config", str(REPO / V_CFG), "--out", "{run}"], None, ["--out=", "is a run directory"]),
    ("bench_vla.py", ["--config", str(REPO / V_CFG), "--out", "{run}/checkpoints"], None,
     ["--out=", "is inside the run directory"]),
    # (was: the data and the world model, then "unknown task 'wm/reach_one'"'s traceback; the loop written into a run)
    ("bench_world_models.py", ["--cycles", "0"], None, ["--cycles 0", "expected >= 1"]),
    ("bench_world_models.py", ["--output-dir", "{run}"], None, ["--output-dir=", "is inside the run directory"]),
]


# the eighth misuse sweep's bench finds: a task or encoder named twice (its rows counted twice in the pooled Spearman),
# counts of 1e9 seeds / groups / episodes / frames that filled the memory or ran for ever after the first files were
# written, a frame size refused by a traceback after the tiny models were saved, a flag's config refused by a
# traceback after OUT was made, an --out that is a run directory (the bench's encoder and runs written among its
# files); then already-refused ones of the same flags
SWEEP_8_BENCH = [
    ("diag_progress_ceiling.py", ["--tasks", "reach,reach"], None, ["--tasks reach,reach", "reach more than once"]),
    ("diag_progress_ceiling.py", ["--groups", "1000000000"], None, ["--groups 1000000000", "at most 1000000"]),
    ("diag_progress_ceiling.py", ["--group-size", "1000000000"], None, ["--group-size 1000000000", "at most 1000000"]),
    ("diag_progress_ceiling.py", ["--num-frames", "1000000000"], None, ["--num-frames 1000000000", "at most 100001"]),
    ("bench_srpo_regime.py", ["--eval-episodes", "1000000000"], None,
     ["rl.eval_episodes=1000000000", "validation and test states overlap"]),
    ("bench_srpo_regime.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_srpo_regime.py", ["--out", "{run}"], None, ["--out=", "is a run directory"]),
    ("bench_srpo_regime.py", ["--out", "{run}/checkpoints/x"], None, ["--out=", "is inside the run directory"]),
    ("bench_srpo_vs_binary.py", ["--out", "{run}"], None, ["--out=", "is a run directory"]),
    ("bench_progress.py", ["--tasks", "push,push"], None, ["--tasks push,push", "names push more than once"]),
    ("bench_progress.py", ["--encoders", "small,small"], None, ["--encoders small,small", "more than once"]),
    ("bench_progress.py", ["--frame-size", "100000"], None, ["--frame-size 100000", "[1, 1024]"]),
    ("bench_progress.py", ["--groups", "1000000000"], None, ["--groups 1000000000", "at most 1000000"]),
    ("bench_progress.py", ["--expert-per-task", "1000000000"], None, ["--expert-per-task 1000000000", "at most"]),
    ("bench_progress.py", ["--out", "{run}"], None, ["--out=", "is a run directory"]),
    ("diag_progress_ceiling.py", ["--json-out", "{run}/checkpoints/x.json"], None,
     ["--json-out=", "inside the checkpoint directory"]),
    ("bench_srpo_regime.py", ["--arms", "binary,binary"], None, ["--arms 'binary,binary'", "distinct names"]),
    ("bench_srpo_regime.py", ["--arms", "binary, srpo_progress"], None, ["--arms 'binary, srpo_progress'"]),
    ("bench_srpo_regime.py", ["--task", "push"], None, ["--task", "invalid choice: 'push'"]),
    ("diag_progress_ceiling.py", ["--tasks", "lift"], None, ["--tasks ['lift']", "tabletop tasks"]),
    ("diag_progress_ceiling.py", ["--json-out", ""], None, ["--json-out is empty"]),
]


# the ninth misuse sweep's bench finds: all jobs skipped or no task (exit 0, nothing measured), an empty --out /
# --json-out (the report written into the working directory, or the results nowhere), counts of 1e9 seeds / samples /
# episodes that started the runs, a negative count taken as none, a flag of the trained config's traceback
SWEEP_9_BENCH = [
    ("bench_distributed.py", ["--skip-toy", "--skip-diffusion", "--skip-vla"], None,
     ["--skip-toy, --skip-diffusion and --skip-vla together", "no job to time"]),
    ("diag_progress_readout.py", ["{run}", "--tasks", ","], None, ["--tasks []", "at least one task"]),
    ("gpu_check.py", ["--dry", "--out", ""], None, ["--out ''", "is empty"]),
    ("bench_libero.py", ["--expert-states", "-1"], None, ["--expert-states -1", "0 (none) to 50"]),
    ("bench_quant.py", ["--samples", "1000000000"], None, ["--samples 1000000000", "at most 100000"]),
    ("bench_windows.py", ["--episodes", "1000000000"], None, ["--episodes 1000000000", "at most 100000"]),
    ("bench_eva_seeds.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_wm_loop_seeds.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_branch_headroom.py", ["--eval-steps", "0"], None, ["--eval-steps 0", "out of range"]),
    ("bench_branch_headroom.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_branch_headroom.py", ["--json-out", ""], None, ["--json-out ''", "is empty"]),
    ("bench_lookahead.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_lookahead.py", ["--json-out", ""], None, ["--json-out ''", "is empty"]),
    ("bench_tree_pool.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_tree_pool.py", ["--json-out", ""], None, ["--json-out ''", "is empty"]),
    ("bench_mcgrpo.py", ["--seeds", "1000000000"], None, ["--seeds 1000000000", "at most 10000"]),
    ("bench_branch.py", ["--reward", "nosuch_reward"], None, ["--reward 'nosuch_reward'", "redness or one of"]),
    ("bench_tree_pool.py", ["--txp-k", "100"], None, ["--txp-k 100 / --txp-width topk_per_parent", "none is pruned"]),
    # already refused: the same flags' other bad values
    ("bench_branch_headroom.py", ["--task", "nosuch"], None, ["--task 'nosuch'", "big, layout"]),
    ("bench_lookahead.py", ["--keep", "9", "--cands", "4"], None, ["--keep 9 / --cands 4", "2 <= keep < cands"]),
    ("bench_gdpo.py", ["--group-size", "1"], None, ["--group-size >= 2"]),
    ("bench_srpo_rule.py", ["--seed-list", "a"], None, ["--seed-list 'a'", "comma-separated list of integers"]),
    ("bench_srpo_vs_binary.py", ["--eval-every", "-1"], None, ["--eval-every >= 0", "-1"]),
    ("gpu_check.py", ["--dry", "--repeat", "0"], None, ["--repeat 0", "1 to 10"]),
    ("bench_libero.py", ["--workers", "0"], None, ["--workers >= 1"]),
]


# the eleventh misuse sweep's bench finds: iteration / step counts of 1e9 (runs that never end), a seed, task, learning
# rate, G or noise named twice (run twice, its rows counted twice), a config of another command (the runs started, each
# failed, exit 1), a --json-out no run could write (refused after every run), a negative object area (a traceback once
# the model was loaded); then already-refused ones of flags no earlier sweep fed
SWEEP_11_BENCH = [
    ("bench_srpo_regime.py", ["--iterations", "1000000000"], None, ["--iterations 1000000000", "at most 100000"]),
    ("bench_srpo_vs_binary.py", ["--eval-every", "1000000000"], None, ["--eval-every 1000000000", "at most 100000"]),
    ("bench_progress.py", ["--detour-steps", "1,1000000000", "--detour-per-task", "1"], None,
     ["--detour-steps 1,1000000000", "at most 100000"]),
    ("bench_progress.py", ["--encoder-steps", "1000000000"], None, ["--encoder-steps 1000000000", "at most 1000000"]),
    ("bench_progress.py", ["--tcn-steps", "1000000000"], None, ["--tcn-steps 1000000000", "optimizer steps"]),
    ("bench_remote_reward.py", ["--iterations", "1000000000"], None, ["--iterations 1000000000", "1..100000"]),
    ("bench_wm_loop_seeds.py", ["--config", V_CFG], None, ["--config", "unknown config key 'env'"]),
    ("bench_wm_loop_seeds.py", ["--control-of", "-1"], None, ["--control-of -1", "a seed >= 0"]),
    ("bench_srpo_rule.py", ["--seed-list", "0,0"], None, ["--seed-list", "distinct seeds", "'0,0'"]),
    ("bench_srpo_rule.py", ["--json-out", "{f}/x.json"], {}, ["--json-out=", "is a file, not a directory"]),
    ("bench_srpo_rule.py", ["--json-out", "{run}"], None, ["--json-out=", "is a directory"]),
    ("bench_gdpo.py", ["--tasks", "two_binary,two_binary"], None, ["--tasks", "distinct names", "two_binary"]),
    ("bench_gdpo.py", ["--lrs", "1e-3,1e-3"], None, ["--lrs finite positive numbers, each once", "'1e-3,1e-3'"]),
    ("bench_lookahead.py", ["--target-area", "-1"], None, ["--target-area -1.0", "out of range"]),
    ("bench_lookahead.py", ["--target-area", "inf"], None, ["--target-area inf", "out of range"]),
    ("bench_mcgrpo.py", ["--group-sizes", "4,4"], None, ["distinct G >= 2", "[4, 4]"]),
    ("bench_mcgrpo.py", ["--noises", "none,none"], None, ["distinct --noises", "['none', 'none']"]),
    # already refused (the other already-refused flags this sweep fed are left out: each case here is a subprocess)
    ("bench_sims.py", ["--tasks", "--no-robosuite"], None, ["--tasks", "expected at least one argument"]),
    ("bench_eva_seeds.py", ["--config", V_CFG], None, ["tabletop_reach.yaml", "unknown config key 'env'"]),
    ("bench_onpolicy.py", ["--only", ""], None, ["--only ''", "tiny_sd3_flat"]),
]


# ---- the benches' own flags (the misuse sweep 2): one line, exit 2, before any run -------------------------------
@pytest.mark.parametrize("script,args,data,expect", [
    ("bench_tree_pool.py", ["--seed-list=-1"], None, ["--seed-list '-1'", "distinct seeds >= 0"]),
    ("bench_tree_pool.py", ["--report-from", "{f}"], {"seed": 0, "arms": {}}, ["--report-from", "a --json-out file"]),
    ("bench_lookahead.py", ["--report-from", "{f}"], [{"seed": 0}], ["--report-from", "'seed' and 'arms'"]),
    ("bench_srpo_rule.py", ["--report-from", "{f}"], {"seed": 0}, ["--report-from file", "not a --json-out file"]),
    ("bench_srpo_regime.py", ["--out", "{f}/runs"], {}, ["--out", "is a file, not a directory"]),
    ("bench_srpo_vs_binary.py", ["--out", "{f}"], {}, ["--out", "is a file, not a directory"]),
    ("bench_pool_vs_plain.py", ["--out", "{f}/runs", "--seeds", "0"], {}, ["--out", "is a file, not a directory"]),
    # the misuse sweep 3: these started a run (an arm twice, 10^8 lookahead candidates, an empty --report-from), or a
    # --report-from file of other fields / seeds was a traceback or reported
    ("bench_tree_pool.py", ["--arms", "flat GRPO,lookahead@1,lookahead@1"], None, ["--arms", "more than once"]),
    ("bench_tree_pool.py", ["--cands", "100000000"], None, ["--cands 100000000", "expected in [3, 64]"]),
    ("bench_tree_pool.py", ["--report-from", ""], None, ["--report-from ''", "an empty file name"]),
    ("bench_lookahead.py", ["--report-from", "{f},"], [], ["--report-from", "an empty file name"]),
    ("bench_tree_pool.py", ["--report-from", "{f}", "--arms", "flat GRPO"], [{"seed": 0, "arms": {"flat GRPO": 5}}],
     ["--report-from", "seed 0, arm 'flat GRPO' is int"]),
    ("bench_tree_pool.py", ["--report-from", "{f}", "--arms", "flat GRPO"],
     [{"seed": 0, "arms": {"flat GRPO": {"iters": 2}}}], ["seed 0, arm 'flat GRPO'", "expected a number"]),
    ("bench_tree_pool.py", ["--report-from", "{f}"], [{"seed": True, "arms": {}}], ["--report-from", "integer >= 0"]),
    ("bench_tree_pool.py", ["--seed-list", "1" + "0" * 30], None, ["--seed-list", "at most 4294967295"]),
    ("bench_tree_pool.py", ["--eta", "0"], None, ["--eta 0.0", "expected > 0"]),
    *SWEEP_4_BENCH,
    *SWEEP_5_BENCH,
    *SWEEP_6_BENCH,
    *SWEEP_7_BENCH,
    *SWEEP_8_BENCH,
    *SWEEP_9_BENCH,
    *SWEEP_11_BENCH,
])
def test_bench_bad_input(script, args, data, expect, tmp_path):
    f = tmp_path / "runs.json"
    if data is not None:
        f.write_text(json.dumps(data))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop_b")
    (tmp_path / "loop_b").symlink_to(tmp_path / "loop")
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)  # a run directory (another job's output)
    (tmp_path / "run" / "run_info.json").write_text("{}\n")
    subs = {"{f}": str(f), "{fifo}": str(tmp_path / "fifo"), "{loop}": str(tmp_path / "loop"),
            "{run}": str(tmp_path / "run")}
    for k, v in subs.items():
        args = [a.replace(k, v) for a in args]
    before = snapshot(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(REPO / "bench" / script), *args],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and "Warning" not in ln and "warnings.warn" not in ln]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(lines) == 1 and all(e in lines[0] for e in expect), lines
    assert snapshot(tmp_path) == before


def test_bench_out_is_checked_apart_from_the_values(tmp_path, capsys):
    """bench/arm_runs.py: ``bad_out`` checks the output folder, ``bad_args`` only the values (each bench that takes
    --out calls both); either failure is one line."""
    from tests.bench.benchutil import load_bench

    arm_runs = load_bench("arm_runs")
    f = tmp_path / "runs.json"
    f.write_text("{}")
    args = argparse.Namespace(out=str(f), seeds=1, jobs=1)
    assert not arm_runs.bad_args(args, seeds=1, jobs=1)  # the values are fine: --out is not its business
    assert capsys.readouterr().err == ""
    assert arm_runs.bad_out(str(f)) and arm_runs.bad_out(str(f / "runs"))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(ln.startswith("error: --out") and "is a file, not a directory" in ln for ln in err)
    assert not arm_runs.bad_out(str(tmp_path / "new" / "runs")) and not (tmp_path / "new").exists()
    assert arm_runs.bad_args(argparse.Namespace(out=str(f), seeds=0, jobs=1), seeds=1, jobs=1)
    assert capsys.readouterr().err.strip() == "error: need --seeds >= 1 and --jobs >= 1, got 0 and 1"
