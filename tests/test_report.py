"""The run report: `diffusion-rl report` and `vla-rl report` write one self-contained page for real runs (two
diffusion runs overlaid, a VLA run with rollout videos), and headless Chromium renders it: a screenshot that is not
blank, every image decoded, no console errors. Chromium comes from the system's packages (`make test` installs it)."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from diffusion_rl.cli import main as diffusion_main
from diffusion_rl.trainer import DiffusionGRPOTrainer
from grpo.config import load_config
from grpo.report import load_run
from vla_rl.cli import main as vla_main
from vla_rl.trainer import VLARLConfig, VLARLTrainer

from .diffusion_rl.conftest import redness
from .diffusion_rl.test_trainer import small_cfg
from .vla_rl.test_trainer_e2e import TINY

# appended to a copy of the page for the check only (the report itself has no scripts): after load, every <img>
# must be decoded, else a console error
PROBE = ("<script>window.addEventListener('load', () => { let n = 0; for (const i of document.images) { "
         "if (!i.complete || i.naturalWidth === 0) console.error('broken image: ' + i.alt); else n++; } "
         "console.log('images decoded: ' + n); });</script>")


def chromium(page, shot, tmp_path):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Chromium is missing: `make browser` (or apt-get install chromium)"
    probe = page.with_name(page.stem + "_probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}",
           "--enable-logging=stderr", "--v=0", "--window-size=1200,1600", f"--screenshot={shot}",
           probe.resolve().as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    console = [ln for ln in (res.stdout + res.stderr).splitlines() if ":CONSOLE" in ln]
    return res.returncode, console


def _diffusion_runs(tmp_path):
    for name, tree in (("flat", False), ("tree", True)):
        cfg = small_cfg(tmp_path, train__iterations=2, train__eval_every=1, train__log_images=True,
                        branch__enabled=tree,
                        branch__split_steps=[0, 2], branch__branch=[3, 2])
        cfg.output_dir = str(tmp_path / name)
        cfg.eval.monitors = ["colour_variance", "low_freq_ratio"]
        DiffusionGRPOTrainer(cfg, reward_fn=redness).train(progress=False)
    return [tmp_path / "flat", tmp_path / "tree"]


def test_report_renders_in_headless_chromium(tmp_path, capsys):
    runs = _diffusion_runs(tmp_path)
    vla = tmp_path / "vla"
    cfg = load_config(VLARLConfig, "configs/vla/tabletop_reach.yaml",
                      TINY + [f"output_dir={vla}", "rl.iterations=1", "rl.reward=binary", "rl.save_every=100"])
    VLARLTrainer(cfg, quiet=True).train()
    assert list((vla / "videos").glob("*.mp4"))

    out = tmp_path / "report.html"
    assert diffusion_main(["report", *map(str, runs), "--out", str(out)]) == 0
    page = out.read_text()
    assert not re.search(r"(src|href)=['\"](https?:|//)", page), "the page must not fetch anything"
    assert page.count("data:image/png;base64,") >= 6  # plots + 2 x (before, after) grids
    assert "<b>flat</b>" in page and "<b>tree</b>" in page and "On-policy gap" in page and "Monitors" in page
    assert "<td>a red circle</td>" in page and "<th>prompt</th><th>reward</th>" in page  # the grid cells' captions
    assert "samples before, iteration 0, eval reward" in page and "&quot;seed&quot;: 0" in page
    assert "version torch" in page
    info = json.loads((runs[0] / "run_info.json").read_text())
    assert info["config"]["eval"]["monitors"] == ["colour_variance", "low_freq_ratio"] and info["versions"]["torch"]

    vout = tmp_path / "vla_report.html"
    assert vla_main(["report", str(vla), "--out", str(vout)]) == 0
    vpage = vout.read_text()
    assert "data:image/gif;base64," in vpage and "task tabletop/reach" in vpage and "success" in vpage

    for name, pg in (("diffusion", out), ("vla", vout)):
        shot = tmp_path / f"{name}.png"
        rc, console = chromium(pg, shot, tmp_path)
        assert rc == 0 and shot.is_file(), (rc, console)
        errors = [c for c in console if "images decoded" not in c]
        assert not errors, errors
        assert any("images decoded" in c for c in console), console
        px = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
        assert px.std() > 10 and (px < 128).mean() > 0.005, "blank screenshot"  # text, lines and images drawn

    # bad input: one line, exit 2, nothing written
    assert diffusion_main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "x.html")]) == 2
    assert "has no metrics.jsonl" in capsys.readouterr().err and not (tmp_path / "x.html").exists()


def test_reference_metrics_file_overlays(tmp_path):
    ref = tmp_path / "ref" / "metrics.jsonl"
    ref.parent.mkdir()
    ref.write_text("\n".join(json.dumps({"step": i, "time": i * 2.0, "reward/mean": 0.1 * i}) for i in range(1, 5)))
    run = load_run(ref)
    assert run.series("reward/mean") == ([1, 2, 3, 4], [2.0, 4.0, 6.0, 8.0], pytest.approx([0.1, 0.2, 0.3, 0.4]))
    loop = tmp_path / "loop"  # a World-VLA-Loop run's per-cycle rows (vla_rl.wm_loop), overlaid with the reference
    loop.mkdir()
    (loop / "metrics.jsonl").write_text("\n".join(json.dumps({"step": c, "time": 60.0 * c,
                                                              "real_success": 0.3 + 0.1 * c,
                                                             "wm_success_after_rl": 0.5, "idm/heldout_mse": 0.01})
                                                 for c in range(3)))
    out = tmp_path / "loop.html"
    assert vla_main(["report", str(loop), str(ref), "--out", str(out)]) == 0
    page = out.read_text()
    assert "World-VLA-Loop: success" in page and "World model and IDM" in page and "<b>loop</b>" in page


@pytest.mark.parametrize("main", [diffusion_main, vla_main], ids=["diffusion-rl", "vla-rl"])
def test_report_goes_to_the_run_dir_and_never_replaces_a_file(tmp_path, monkeypatch, capsys, main):
    """Without --out the page goes into the (first) run's directory, not the working directory; an existing file is
    replaced only with --force (else one line, exit 2, the file untouched). Issue 36."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("\n".join(json.dumps({"step": i, "time": float(i), "reward/mean": 0.1 * i})
                                                 for i in range(3)))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "report.html").write_text("the user's own page\n")
    monkeypatch.chdir(cwd)
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") or "<html" in page
    assert (cwd / "report.html").read_text() == "the user's own page\n"
    capsys.readouterr()
    (run / "report.html").write_text("kept\n")
    for argv in (["report", str(run)], ["report", str(run / "metrics.jsonl")],
                 ["report", str(run), "--out", "report.html"]):
        assert main(argv) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and "report.html" in err[0] and "--force" in err[0], err
    assert (run / "report.html").read_text() == "kept\n"
    assert (cwd / "report.html").read_text() == "the user's own page\n"
    assert main(["report", str(run), "--force"]) == 0
    assert "<html" in (run / "report.html").read_text()


@pytest.mark.parametrize("row,expect", [
    ({"step": 1, "time": 1.0, "reward/mean": "0.5"}, "'reward/mean' is '0.5' (str), not a number"),
    ({"step": 1, "time": 1.0, "reward/mean": [0.1, 0.2]}, "'reward/mean' is [0.1, 0.2] (list), not a number"),
    ({"step": 1, "time": 1.0, "eval/success_rate": True}, "'eval/success_rate' is True (bool), not a number"),
    ({"step": 1, "time": None, "reward/mean": 0.5}, "'time' is None (NoneType), not a number"),
    ({"step": "one", "reward/mean": 0.5}, "'step' is 'one', not an integer >= 0"),
    ({"step": 1.5, "reward/mean": 0.5}, "'step' is 1.5, not an integer >= 0"),
    ({"time": 1.0, "reward/mean": 0.5}, "no 'step' in {'time': 1.0, 'reward/mean': 0.5}"),
    ([1, 0.5], "line 2 is list, not a JSON object"),
], ids=["str", "list-value", "bool", "null-time", "str-step", "float-step", "no-step", "list-row"])
def test_metrics_rows_of_the_wrong_type_are_refused(tmp_path, capsys, row, expect):
    """A metrics.jsonl row that MetricsLogger cannot have written (a value that is not a number, a step that is not
    an integer, a row that is not an object): one line naming the file, the line and the value, exit 2, no page."""
    run = tmp_path / "run"
    run.mkdir()
    metrics = run / "metrics.jsonl"
    metrics.write_text(json.dumps({"step": 0, "time": 0.0, "reward/mean": float("nan")}) + "\n" + json.dumps(row)
                       + "\n" + json.dumps({"step": 2, "time": 2.0, "reward/mean": 0.2}) + "\n")
    assert vla_main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and str(metrics) in err[0] and "line 2" in err[0] and expect in err[0], err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["metrics.jsonl", "run"]
