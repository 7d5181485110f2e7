"""Write every wheel this project needs into one folder, for a machine that has no internet (``make wheelhouse``).

On a machine that reaches the package registry::

    python bench/wheelhouse.py --out wheelhouse --python-version 311 --platform manylinux_2_28_x86_64 \
        --extras test --exclude torch

1. The requirements are read from ``pyproject.toml``: ``[project].dependencies``, the named optional extras and
   ``[build-system].requires`` (the node builds the editable install, so setuptools and wheel travel too); or given
   with ``--requirements`` (the test uses a small set).
2. pip resolves them for the *target* interpreter and platform, not this one (``pip install --dry-run --report
   --only-binary=:all: --python-version --platform --implementation cp --target``): wheels only, nothing installed.
3. Excluded packages (``--exclude``, default ``torch``: the GPU node already has its own CUDA build) are cut from the
   dependency graph: a package stays only when it is reachable from a requirement along a path that does not go
   through an excluded one (torch's own dependencies, nvidia-*, triton, sympy ..., are dropped when nothing else
   needs them; numpy stays, the project needs it). Markers are evaluated for the target platform. ``--resolve-with``
   pins an excluded package for the resolution (e.g. ``torch==2.5.1``, the node's version) so the other versions
   chosen are the ones that go with it.
4. ``pip download --no-deps`` fetches the kept pins (same target options) into ``--out``; ``wheelhouse.txt`` lists
   them (``name==version``) and ``wheelhouse.json`` records the target, the exclusions and what was dropped.

The node then installs with ``pip install --no-index --find-links wheelhouse ...`` (``bench/gpu_check.sh``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    from packaging.markers import Marker  # noqa: F401
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip always vendors it
    from pip._vendor.packaging.requirements import Requirement  # type: ignore
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore

ROOT = Path(__file__).resolve().parents[1]
PLATFORM_RE = re.compile(r"^(manylinux\w*|musllinux\w*|linux|macosx\w*|win)_?(.*)$")


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def marker_env(python_version: str, platform: str) -> dict[str, str]:
    """The PEP 508 marker environment of the target (``python_version`` '311' or '3.11'; a wheel platform tag)."""
    digits = python_version.replace(".", "")
    if not re.fullmatch(r"3\d{1,2}", digits):
        fail(f"--python-version {python_version!r} is not a CPython 3 version (expected e.g. 311 or 3.11)")
    pv = f"3.{digits[1:]}"
    m = PLATFORM_RE.match(platform)
    if not m:
        fail(f"--platform {platform!r} is not a wheel platform tag (expected e.g. manylinux_2_28_x86_64, "
             "macosx_11_0_arm64, win_amd64)")
    family = m.group(1)
    machine = platform.rsplit("_", 1)[-1] if "_" in platform else platform
    machine = {"amd64": "AMD64", "arm64": "arm64", "64": "x86_64"}.get(machine, machine)
    if family.startswith(("manylinux", "musllinux", "linux")):
        sys_platform, system = "linux", "Linux"
        if platform.endswith("aarch64"):
            machine = "aarch64"
        elif platform.endswith("x86_64"):
            machine = "x86_64"
    elif family.startswith("macosx"):
        sys_platform, system = "darwin", "Darwin"
    else:
        sys_platform, system = "win32", "Windows"
    return {"python_version": pv, "python_full_version": f"{pv}.0", "sys_platform": sys_platform,
            "platform_system": system, "platform_machine": machine, "os_name": "nt" if system == "Windows" else "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def project_requirements(pyproject: Path, extras: list[str]) -> list[str]:
    """``[project].dependencies`` + the named extras + ``[build-system].requires`` of ``pyproject``."""
    import tomllib

    data = tomllib.loads(pyproject.read_text())
    opt = data["project"].get("optional-dependencies", {})
    unknown = [e for e in extras if e not in opt]
    if unknown:
        fail(f"extras {unknown} are not in {pyproject.name} (expected some of {sorted(opt)})")
    reqs = list(data["project"]["dependencies"])
    for e in extras:
        reqs += opt[e]
    return reqs + list(data.get("build-system", {}).get("requires", []))


def platform_tags(platform: str) -> list[str]:
    """The wheel platform tags a ``platform`` interpreter accepts, newest first: pip takes ``--platform`` literally,
    so a manylinux_2_28 target must also be offered manylinux_2_27 ... manylinux_2_5 and the legacy aliases
    (manylinux2014 = 2_17, manylinux2010 = 2_12, manylinux1 = 2_5); musllinux_1_N down to 1_1; macOS down to 10.9
    (and universal2)."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if m:
        glibc, arch = int(m.group(1)), m.group(2)
        alias = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        out = []
        for v in range(glibc, 4, -1):
            out.append(f"manylinux_2_{v}_{arch}")
            if v in alias and (v == 17 or arch in ("x86_64", "i686")):
                out.append(f"{alias[v]}_{arch}")
        return out
    m = re.fullmatch(r"musllinux_1_(\d+)_(\w+)", platform)
    if m:
        return [f"musllinux_1_{v}_{m.group(2)}" for v in range(int(m.group(1)), 0, -1)]
    m = re.fullmatch(r"macosx_(\d+)_(\d+)_(\w+)", platform)
    if m:
        major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
        vers = [(v, 0) for v in range(major, 10, -1)] if major > 10 else []
        vers += [(10, v) for v in range(minor if major == 10 else 16, 8, -1)]
        return [f"macosx_{a}_{b}_{x}" for a, b in vers for x in (arch, "universal2")]
    return [platform]


def target_args(python_version: str, platform: str) -> list[str]:
    plats = [a for p in platform_tags(platform) for a in ("--platform", p)]
    return ["--only-binary=:all:", "--python-version", python_version, *plats, "--implementation", "cp"]


def resolve(reqs: list[str], python_version: str, platform: str, pip: list[str]) -> list[dict]:
    """pip's resolution of ``reqs`` for the target: the report's ``install`` entries (nothing is installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [*pip, "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
               "--target", str(Path(tmp) / "target"), *target_args(python_version, platform), *reqs]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
            fail(f"pip could not resolve the requirements for python {python_version} on {platform}:\n{tail}")
        return json.loads(report.read_text())["install"]


def keep_reachable(install: list[dict], reqs: list[str], exclude: set[str], env: dict[str, str]) -> dict[str, str]:
    """``{name: version}`` of the resolved packages reachable from ``reqs`` without passing through ``exclude``."""
    resolved = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in install}
    keep: dict[str, str] = {}
    todo = [Requirement(r) for r in reqs]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if name in exclude or (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        meta = resolved.get(name)
        if meta is None:
            fail(f"{req.name} is required but pip's resolution has no {name} "
                 f"(report names: {sorted(resolved)[:10]} ...)")
        keep[name] = meta["version"]
        for dep in meta.get("requires_dist") or []:
            d = Requirement(dep)
            if d.marker is None or any(d.marker.evaluate({**env, "extra": e}) for e in ["", *req.extras]):
                d.marker = None
                todo.append(d)
    return keep


def download(pins: dict[str, str], out: Path, python_version: str, platform: str, pip: list[str]) -> None:
    cmd = [*pip, "download", "--no-deps", "--quiet", "--dest", str(out), *target_args(python_version, platform),
           *[f"{n}=={v}" for n, v in sorted(pins.items())]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
        fail(f"pip download failed:\n{tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="wheelhouse", help="folder the wheels are written to")
    ap.add_argument("--python-version", default="311", help="the target interpreter, e.g. 311 or 3.11")
    ap.add_argument("--platform", default="manylinux_2_28_x86_64", help="the target's wheel platform tag")
    ap.add_argument("--extras", default="test", help="comma-separated extras of pyproject.toml to include")
    ap.add_argument("--exclude", default="torch", help="comma-separated packages the target already has (empty: none)")
    ap.add_argument("--resolve-with", default="", help="comma-separated pins used in the resolution only, e.g. "
                    "torch==2.5.1 (the target's own version of an excluded package)")
    ap.add_argument("--requirements", nargs="*", default=None,
                    help="requirement strings instead of pyproject.toml's (the test uses a small set)")
    ap.add_argument("--pip", default=f"{sys.executable} -m pip", help="the pip command (default: this python's)")
    args = ap.parse_args(argv)
    env = marker_env(args.python_version, args.platform)
    extras = [e for e in args.extras.split(",") if e]
    exclude = {canonicalize_name(x) for x in args.exclude.split(",") if x.strip()}
    pins = [p for p in args.resolve_with.split(",") if p.strip()]
    for p in pins:
        if canonicalize_name(Requirement(p).name) not in exclude:
            fail(f"--resolve-with {p!r} pins a package that is not excluded (it would be downloaded as resolved)")
    reqs = args.requirements if args.requirements is not None else project_requirements(ROOT / "pyproject.toml", extras)
    if not reqs:
        fail("no requirements to resolve")
    pip = args.pip.split()
    install = resolve(reqs + pins, args.python_version, args.platform, pip)
    keep = keep_reachable(install, reqs, exclude, env)
    names = {canonicalize_name(i["metadata"]["name"]) for i in install}
    dropped = sorted(names - set(keep) - exclude)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    download(keep, out, args.python_version, args.platform, pip)
    (out / "wheelhouse.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(keep.items())))
    (out / "wheelhouse.json").write_text(json.dumps(
        {"python_version": args.python_version, "platform": args.platform, "extras": extras, "exclude": sorted(exclude),
         "resolve_with": pins, "requirements": reqs, "wheels": keep, "dropped": dropped}, indent=1))
    size = sum(f.stat().st_size for f in out.glob("*.whl"))
    print(f"wheelhouse: {len(keep)} wheels ({size / 1e6:.0f} MB) for cp{env['python_version'].replace('.', '')} "
          f"{args.platform} in {out}; excluded {sorted(exclude) or 'nothing'} and {len(dropped)} packages only they "
          f"need{': ' + ', '.join(dropped[:8]) + (' ...' if len(dropped) > 8 else '') if dropped else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
