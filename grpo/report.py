"""One self-contained HTML page per run (or several runs overlaid) that opens offline: ``diffusion-rl report`` /
``vla-rl report`` (:func:`add_report_command`; the page goes to ``report.html`` in the first run's directory unless
``--out`` names another file, and an existing file is replaced only with ``--force``).

    write_report(["runs/flat", "runs/tree"], "report.html")

What it reads from each run directory (what :class:`grpo.metrics.MetricsLogger` writes): ``metrics.jsonl`` (one row
per ``log`` call: ``step``, ``time`` in seconds since the logger started, scalars), ``run_info.json`` (config, seed,
versions, machine; :mod:`grpo.runinfo`), ``images/*.png`` (evaluation grids, ``<tag>_<step>.png``) and
``videos/*.mp4`` (rollout videos, ``<tag>_<step>.mp4``). A reference run's ``metrics.jsonl`` alone (e.g. shipped in
``docs/``) is a valid "run" too: give its file or directory.

The page: one figure per metric group (reward, evaluation reward / success, monitors, KL, clip fraction, on-policy
gap, grad norm, NFE / cost), each against iteration and against wall clock, every run a line (matplotlib, Agg,
embedded as base64 PNG); image grids with their captions (tag, iteration, the evaluation reward at that iteration);
rollout videos as inline animated GIFs with task / outcome captions; the resolved config and the run's seed,
versions and machine. Nothing is fetched: no scripts, no external URLs.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# metric groups: (title, regex over metric names); a metric joins the first group that matches
GROUPS = (
    ("Training reward", r"^(reward/mean|reward/std|rollout/success_rate)$"),
    ("Evaluation", r"^eval/(reward|success_rate)$"),
    ("Monitors (never trained on)", r"^monitor/"),
    ("KL", r"^loss/(kl|approx_kl)$"),
    ("Clip fraction", r"^loss/clip_frac$"),
    ("On-policy gap (max |Δ log p| before the first update)",
     r"^onpolicy/(max_abs_dlogp|mean_abs_dlogp|max_ratio_dev)$"),
    ("Grad norm", r"^(loss/)?grad_norm$"),
    ("NFE / cost per iteration", r"^cost/(nfe_rollout|nfe_train|backward)$|^rollout/env_steps$"),
    ("Loss", r"^loss/(loss|objective)$"),
    ("World-VLA-Loop: success in the real simulator and in the world model (per cycle)",
     r"^(real_success|wm_success_before_rl|wm_success_after_rl)$"),
    ("World model and IDM (held out)", r"^(wm_heldout|idm)/.*(mse|r2|error|psnr|acc)"),
)


@dataclass
class Run:
    name: str
    path: Path
    rows: list[dict[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)
    images: list[Path] = field(default_factory=list)
    videos: list[Path] = field(default_factory=list)

    def series(self, key: str) -> tuple[list[float], list[float], list[float]]:
        """``(iterations, wall-clock seconds, values)`` of metric ``key``."""
        pts = [(r["step"], r.get("time", float("nan")), r[key]) for r in self.rows if key in r]
        return [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts]

    def value_at(self, key: str, step: int) -> float | None:
        vals = [r[key] for r in self.rows if key in r and r.get("step") == step]
        return vals[-1] if vals else None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _bad_value(row: dict[str, Any]) -> str | None:
    """What is wrong in one ``metrics.jsonl`` row (``None``: nothing). :class:`grpo.metrics.MetricsLogger` writes
    ``step`` (an integer >= 0, the iteration), ``time`` (seconds) and scalars, all numbers (NaN and infinities
    included, as Python's ``json`` writes them)."""
    if "step" not in row:
        return f"no 'step' in {_short(row)}"
    step = row["step"]
    if not (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
        return f"'step' is {_short(step)}, not an integer >= 0"
    for k, v in row.items():
        if not _is_number(v):
            return f"{k!r} is {_short(v)} ({type(v).__name__}), not a number"
    return None


def _short(v: Any, n: int = 60) -> str:
    """``repr(v)``, cut to ``n`` characters (a long list or string stays one readable line)."""
    r = " ".join(repr(v).split())
    return r if len(r) <= n else r[: n - 3] + "..."


def load_run(path: str | Path) -> Run:
    """A run directory (or a ``metrics.jsonl`` file); raises ``FileNotFoundError`` naming what is missing and
    ``ValueError`` (one line: the file, the line number and the bad value) for a row that is not a JSON object of
    numbers with an integer ``step`` (:func:`_bad_value`)."""
    p = Path(path)
    metrics = p if p.is_file() else p / "metrics.jsonl"
    if not metrics.is_file():
        raise FileNotFoundError(f"report: {path} has no metrics.jsonl (expected a run directory or a metrics.jsonl)")
    rows = []
    lines = metrics.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                if i == len(lines) - 1 and rows:  # a run killed mid-write leaves its last row cut: the rows before it
                    break                         # stand
                raise ValueError(f"report: {metrics} line {i + 1} is not JSON ({e}); expected the metrics.jsonl of a "
                                 "run (one JSON object per line)") from e
            if not isinstance(row, dict):
                raise ValueError(f"report: {metrics} line {i + 1} is {type(row).__name__}, not a JSON object; expected "
                                 "the metrics.jsonl of a run")
            bad = _bad_value(row)
            if bad is not None:
                raise ValueError(f"report: {metrics} line {i + 1}: {bad}; expected the metrics.jsonl of a run (an "
                                 "integer 'step' and numbers)")
            rows.append(row)
    if not rows:
        raise ValueError(f"report: {metrics} holds no metrics rows (expected the metrics.jsonl of a run that logged at "
                         "least one iteration)")
    d = metrics.parent
    info = {}
    if (d / "run_info.json").is_file():
        try:
            info = json.loads((d / "run_info.json").read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"report: {d / 'run_info.json'} is not JSON ({e}); move it away to report the metrics "
                             "alone") from None
    name = d.name if d.name not in ("", ".") else str(d.resolve().name)
    return Run(name, d, rows, info, sorted((d / "images").glob("*.png")) if (d / "images").is_dir() else [],
               sorted((d / "videos").glob("*.mp4")) if (d / "videos").is_dir() else [])


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def plot_group(runs: list[Run], title: str, keys: list[str]) -> str:
    """One figure: the group's metrics against iteration (left) and wall clock (right), every run overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
    for run in runs:
        for key in keys:
            it, t, v = run.series(key)
            if not v:
                continue
            label = f"{run.name}: {key}" if len(runs) > 1 else key
            style = "o-" if len(v) < 30 else "-"
            axes[0].plot(it, v, style, ms=3, label=label)
            axes[1].plot(t, v, style, ms=3, label=label)
    axes[0].set_xlabel("iteration")
    axes[1].set_xlabel("wall clock (s)")
    if "gap" in title.lower():
        for ax in axes:
            ax.set_yscale("symlog", linthresh=1e-8)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].set_title(title, loc="left", fontsize=10)
    axes[1].legend(fontsize=7, loc="best")
    out = _png(fig)
    plt.close(fig)
    return out


def _gif(video: Path, max_frames: int = 120) -> str | None:
    """An mp4 as a base64 animated GIF (browsers play it without codecs or scripts); None when it cannot be read."""
    try:
        import imageio.v2 as imageio
        from PIL import Image

        frames = []
        for i, fr in enumerate(imageio.get_reader(str(video))):
            if i >= max_frames:
                break
            frames.append(Image.fromarray(fr))
    except Exception:  # noqa: BLE001 - a video that cannot be decoded is listed without a preview
        return None
    if not frames:
        return None
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=66, loop=0)
    return base64.b64encode(buf.getvalue()).decode()


def _tag_step(p: Path) -> tuple[str, int | None]:
    m = re.match(r"(.*)_(\d+)$", p.stem)
    return (m.group(1), int(m.group(2))) if m else (p.stem, None)


def _caption(run: Run, p: Path) -> str:
    tag, step = _tag_step(p)
    bits = [tag.replace("_", " ")]
    if step is not None:
        bits.append(f"iteration {step}")
        for key, label in (("eval/reward", "eval reward"), ("eval/success_rate", "success")):
            v = run.value_at(key, step)
            if v is not None:
                bits.append(f"{label} {v:.3f}")
    cfg = run.info.get("config", {})
    tasks = cfg.get("env", {}).get("tasks") if isinstance(cfg.get("env"), dict) else None
    if tasks and p.suffix == ".mp4":
        bits.append("task " + ", ".join(map(str, tasks)))
    return ", ".join(bits)


def _cells(grid: Path) -> str:
    """The grid's per-cell prompts and rewards (``<grid>.json``, :func:`grpo.runinfo.write_grid_captions`) as a
    small table, row by row as tiled; empty when the run did not write them."""
    side = grid.with_suffix(".json")
    if not side.is_file():
        return ""
    try:
        d = json.loads(side.read_text())
        cells, nrow = d["cells"], int(d["nrow"])
    except (ValueError, KeyError, TypeError):
        return ""
    rows = "".join(f"<tr><td>{i // nrow + 1},{i % nrow + 1}</td><td>{html.escape(str(c.get('prompt', '')))}</td>"
                   f"<td>{float(c.get('reward', float('nan'))):.3f}</td></tr>" for i, c in enumerate(cells))
    return f"<table class='cells'><tr><th>row,col</th><th>prompt</th><th>reward</th></tr>{rows}</table>"


CSS = """body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
figure{display:inline-block;margin:6px 12px 12px 0;vertical-align:top}figcaption{font-size:12px;color:#555;max-width:420px}
img.plot{max-width:100%}img.grid{image-rendering:pixelated;max-width:420px;min-width:160px;border:1px solid #ccc}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
table.cells{font-size:11px;margin-top:4px}pre{background:#f6f6f6;padding:8px;font-size:12px;overflow-x:auto}"""  # noqa: E501  (CSS rules, one line per selector group)


def _summary_table(runs: list[Run]) -> str:
    keys = ["reward/mean", "eval/reward", "eval/success_rate", "onpolicy/max_abs_dlogp"]
    head = "<tr><th>run</th><th>iterations</th><th>wall clock (s)</th><th>seed</th>" + "".join(
        f"<th>{html.escape(k)} (first → last)</th>" for k in keys) + "</tr>"
    body = []
    for r in runs:
        steps = [x["step"] for x in r.rows if "step" in x]
        times = [x.get("time", 0) for x in r.rows]
        cells = []
        for k in keys:
            _, _, v = r.series(k)
            cells.append(f"<td>{v[0]:.4g} → {v[-1]:.4g}</td>" if v else "<td>–</td>")
        body.append(f"<tr><td>{html.escape(r.name)}</td><td>{max(steps) if steps else 0}</td>"
                    f"<td>{max(times) if times else 0:.1f}</td><td>{html.escape(str(r.info.get('seed', '–')))}</td>"
                    + "".join(cells) + "</tr>")
    return f"<table>{head}{''.join(body)}</table>"


def render(runs: list[Run], title: str = "branchloop run report") -> str:
    """The page's HTML (self-contained)."""
    names = sorted({k for r in runs for row in r.rows for k in row if k not in ("step", "time")})
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>{len(runs)} run(s): " + ", ".join(f"<b>{html.escape(r.name)}</b> ({html.escape(str(r.path))})"
                                                   for r in runs) + "</p>", _summary_table(runs), "<h2>Metrics</h2>"]
    used: set[str] = set()
    for gtitle, pat in GROUPS:
        keys = [k for k in names if re.search(pat, k) and k not in used]
        if not keys:
            continue
        used.update(keys)
        parts.append(f"<figure><img class='plot' alt='{html.escape(gtitle)}' "
                     f"src='data:image/png;base64,{plot_group(runs, gtitle, keys)}'></figure>")
    for r in runs:
        if r.images:
            parts.append(f"<h2>Samples: {html.escape(r.name)}</h2>")
            for p in r.images:
                b64 = base64.b64encode(p.read_bytes()).decode()
                cap = html.escape(_caption(r, p))
                parts.append(f"<figure><img class='grid' alt='{cap}' src='data:image/png;base64,{b64}'>"
                             f"<figcaption>{cap}{_cells(p)}</figcaption></figure>")
        if r.videos:
            parts.append(f"<h2>Rollout videos: {html.escape(r.name)}</h2>")
            for p in r.videos:
                cap = html.escape(_caption(r, p))
                gif = _gif(p)
                media = (f"<img class='grid' alt='{cap}' src='data:image/gif;base64,{gif}'>" if gif
                         else f"<p>(could not decode {html.escape(p.name)})</p>")
                parts.append(f"<figure>{media}<figcaption>{cap}</figcaption></figure>")
    for r in runs:
        parts.append(f"<h2>Run: {html.escape(r.name)}</h2>")
        if not r.info:
            parts.append("<p>no run_info.json (config, versions and machine were not recorded)</p>")
            continue
        meta = {"seed": r.info.get("seed"), "started": r.info.get("started"),
                **{f"version {k}": v for k, v in r.info.get("versions", {}).items()},
                **{f"machine {k}": v for k, v in r.info.get("machine", {}).items()}}
        parts.append("<table>" + "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                                          for k, v in meta.items()) + "</table>")
        parts.append("<details open><summary>resolved config</summary><pre>"
                     + html.escape(json.dumps(r.info.get("config", {}), indent=1, default=str)) + "</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(run_dirs: list[str | Path], out: str | Path, title: str | None = None) -> Path:
    """Load every run (all checked before anything is written) and write the page to ``out`` (replaced when it
    exists: the CLI's :func:`report_path` refuses that without ``--force``)."""
    runs = [load_run(d) for d in run_dirs]
    names = [r.name for r in runs]
    for i, r in enumerate(runs):  # distinct labels for overlaid runs with the same folder name
        if names.count(r.name) > 1:
            r.name = f"{r.name}#{i + 1}"
    page = render(runs, title or "branchloop run report: " + ", ".join(r.name for r in runs))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out


def add_report_command(sub) -> argparse.ArgumentParser:
    """The ``report`` subcommand of a frontend's CLI (``sub``: its ``add_subparsers()``)."""
    r = sub.add_parser("report", help="write one self-contained HTML page (plots, samples, videos, config) for "
                                      "one or more runs, overlaid")
    r.add_argument("run_dirs", nargs="+", help="run directories (or metrics.jsonl files, e.g. a reference run's)")
    r.add_argument("--out", default=None, help=f"the HTML file to write (default: {REPORT_NAME} in the first run's "
                                               "directory)")
    r.add_argument("--force", action="store_true", help="replace the output file when it exists (refused otherwise)")
    r.add_argument("--title", default=None, help="the page's title")
    return r


REPORT_NAME = "report.html"


def report_path(run_dirs: list[str | Path], out: str | Path | None, force: bool) -> Path:
    """Where the page goes: ``out``, or ``report.html`` in the first run's directory (a ``metrics.jsonl`` argument:
    its folder). An existing file is refused unless ``force``; a path that cannot be written is refused."""
    from .preflight import check_new_output, check_not_in_a_checkpoint, check_writable_file

    if out is None:
        first = Path(run_dirs[0]).expanduser()
        out = (first.parent if first.is_file() else first) / REPORT_NAME
    p = check_writable_file(out, "--out")
    check_not_in_a_checkpoint(p, "--out")  # (was: written among a checkpoint's files)
    if p.suffix.lower() not in (".html", ".htm"):  # one self-contained HTML page
        raise ValueError(f"--out={str(p)!r}: expected an .html file (the report is one HTML page)")
    if p.exists() or p.is_symlink():
        check_new_output(p, "--out", force)
    return p


def check_report_args(run_dirs: list[str | Path], title: str | None) -> None:
    """The same run named twice (a directory and its ``metrics.jsonl`` count as one) and an empty ``--title``:
    ``ValueError`` (one line; the page would overlay a run on itself / have no title)."""
    if title is not None and not title.strip():
        raise ValueError("--title is empty (expected the page's title; leave --title out for the default)")
    seen: dict[Path, str] = {}
    for d in run_dirs:
        p = Path(d).expanduser().resolve()
        key = p.parent if p.name == "metrics.jsonl" else p
        if key in seen:
            raise ValueError(f"report: the run {key} is named twice ({seen[key]!r} and {str(d)!r}); expected "
                             "distinct runs to overlay")
        seen[key] = str(d)


def run_report(args: argparse.Namespace) -> int:
    """The ``report`` subcommand: bad input raises (the CLI prints one line, exit 2), before anything is written."""
    check_report_args(args.run_dirs, args.title)
    out = report_path(args.run_dirs, args.out, args.force)
    path = write_report(args.run_dirs, out, args.title)
    print(f"report: {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0
