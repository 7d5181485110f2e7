"""What every console script of the project shares: bad input is one line on stderr and exit code 2.

    p = grpo.cli.ArgumentParser(prog="vla-rl", description=...)      # argparse; its errors are one line
    args = grpo.cli.parse_args(p, argv, takes_overrides=("train",))   # key=value overrides may follow --dry-run
    return grpo.cli.run_command(lambda: commands[args.cmd](args))     # bad input raised at start -> one line, exit 2

    grpo.cli.config_command(MyConfig, path, overrides, dry_run, run)   # load a config; print it (--dry-run) or run it
    grpo.cli.add_config_help(train_parser, lambda: DiffusionRLConfig)   # --help-config: every key, type, default, help

A user's mistake (an unknown key, a missing file, a value out of range) stops the command before anything is
written, with one line that names the bad value and what was expected, and no traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, Callable, Sequence

from .config import ConfigError, dump_config, format_config_help, load_config

BAD_INPUT = (ConfigError, ValueError, FileNotFoundError, KeyError)  # what a command raises on bad input


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line, ``<prog>: error: <message> (see <prog> --help)``, exit 2
    (subcommand parsers made with ``add_subparsers`` inherit it)."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def format_help(self) -> str:  # noqa: D102 - argparse's hook
        return plain_text(super().format_help())


def plain_text(doc: str) -> str:
    """``doc`` as a terminal shows it: reStructuredText literals and roles (````x````, ``:func:`x```) become ``x``."""
    return re.sub(r"(?::[a-z]+:)?`{1,2}([^`]+?)`{1,2}", r"\1", doc)


class _ConfigHelp(argparse.Action):
    """``--help-config``: print every key of the command's config (dotted key, type, default, one-line help) and exit
    0, like ``--help`` (the positional arguments are not needed)."""

    def __init__(self, option_strings, dest, config_class: Callable[[], type], **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)
        self.config_class = config_class

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            print(format_config_help(self.config_class()), flush=True)
        except BrokenPipeError:  # `... --help-config | head`: the reader left; not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        parser.exit(0)


def add_config_help(parser: argparse.ArgumentParser, config_class: Callable[[], type]) -> None:
    """Give ``parser`` a ``--help-config`` option listing the keys of ``config_class()`` (a callable, so the config's
    module, which may import torch, loads only when the option is used)."""
    parser.add_argument("--help-config", action=_ConfigHelp, config_class=config_class,
                        help="list every config key with its type, default and a one-line description, then exit")


def add_config_command(sub, name: str, config_class: Callable[[], type], *, overrides: str, dry_run: str,
                       config: dict | None = None, **parser_kw) -> argparse.ArgumentParser:
    """The subcommand every YAML-driven job has, ``name CONFIG [key=value ...] [--dry-run] [--help-config]``:
    ``sub.add_parser(name, **parser_kw)`` with :func:`add_config_help`, the ``config`` positional (``config``: its
    extra arguments, e.g. ``help``, ``nargs``), the ``overrides`` (``overrides``: an example) and ``--dry-run``
    (``dry_run``: its help). Returns the parser for the job's own options."""
    p = sub.add_parser(name, **parser_kw)
    add_config_help(p, config_class)
    p.add_argument("config", **(config or {}))
    p.add_argument("overrides", nargs="*", help=f"key=value overrides, e.g. {overrides}")
    p.add_argument("--dry-run", action="store_true", help=dry_run)
    return p


OPTIONAL_PACKAGES = {  # top-level module -> how this project installs it (a command that needs one says so)
    "lerobot": "make lerobot, then run .venv-lerobot/bin/vla-rl (docs/LEROBOT.md)",
    "libero": "make install (python -m sims.libero_adapter setup; docs/LIBERO.md)",
    "robosuite": "pip install -e '.[test]' (robosuite==1.5.2)",
    "open_clip": "pip install -e '.[ocr]'",
    "scservo_sdk": "the Feetech motor SDK of LeRobot's SO-100/101, LeKiwi and HopeJR: make lerobot installs it "
                   "(feetech-servo-sdk, requirements/lerobot.txt)",
    "dynamixel_sdk": "the Dynamixel motor SDK of LeRobot's Koch and OMX arms: make lerobot installs it (dynamixel-sdk, "
                     "requirements/lerobot.txt)",
    "xformers": "xformers needs CUDA; use model.attention=sdpa on this machine",
    "flash_attn": "flash-attn needs CUDA; use model.attention=sdpa on this machine",
}
OWN_PACKAGES = ("grpo", "diffusion_rl", "vla_rl", "world_models", "rewards", "sims", "quant", "bench", "tests")


def omp_threads(default: int) -> int:
    """``OMP_NUM_THREADS`` as a thread count for ``torch.set_num_threads`` (``default`` when unset): a positive
    integer, else ``ValueError`` naming it (was: ``int()``'s message naming no variable, or torch's traceback for 0)."""
    raw = os.environ.get("OMP_NUM_THREADS")
    if raw is None or not raw.strip():
        return default
    try:
        n = int(raw.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"environment variable OMP_NUM_THREADS={raw!r}: expected a positive integer (the CPU threads "
                         "per process), or unset it")
    return n


def _sigterm_interrupts() -> None:
    """SIGTERM (a scheduler's or ``kill``'s stop) raises ``KeyboardInterrupt`` like Ctrl-C, so ``finally`` blocks run
    (a temporary file is removed, an atomic write is not completed) and the command ends with one line, not a bare
    kill; the training loops still take both signals themselves (grpo.signals.GracefulExit: finish the step, save)."""
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, interrupt)


def run_command(fn: Callable[[], int], bad_input: tuple[type[BaseException], ...] = BAD_INPUT) -> int:
    """``fn()``'s exit code, every failure a command can meet at the user's hands as one ``error: ...`` line on stderr:
    an exception of ``bad_input`` (exit 2; an OS error among them names its path), any other OS error (a path the OS
    refuses: exit 2), a third-party package this environment lacks (exit 2; a missing module of this project itself
    is a bug and is raised), Ctrl-C / SIGTERM (exit 130)."""
    _sigterm_interrupts()
    try:
        return fn()
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM outside a training loop (which stops gracefully on its own)
        print("error: interrupted (files being written were not completed; rerun the command)", file=sys.stderr)
        return 130
    except bad_input as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        if isinstance(e, OSError) and e.errno is not None and e.filename:  # the OS's own: name the path and why
            msg = f"cannot use {os.fsdecode(e.filename)!r}: {e.strerror}"
        print(f"error: {msg}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. a path the OS refuses (permissions, /proc, a full disk): one line, not a traceback
        if e.errno is None:
            raise
        where = f" {os.fsdecode(e.filename)!r}" if e.filename else ""
        print(f"error: cannot use{where}: {e.strerror or e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # pathlib (Python < 3.13) raises RuntimeError, not OSError(ELOOP), for a symlink loop
        if not str(e).startswith("Symlink loop from "):
            raise
        where = str(e).removeprefix("Symlink loop from ")
        print(f"error: cannot use {where}: a symlink loop (expected a file or directory path that resolves)",
              file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if not top or top in OWN_PACKAGES:
            raise
        how = OPTIONAL_PACKAGES.get(top, f"pip install {top} into {sys.prefix}")
        print(f"error: this command needs the package '{top}', which is not installed in {sys.prefix} ({how})",
              file=sys.stderr)
        return 2


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None, takes_overrides: Sequence[str] = ()
               ) -> argparse.Namespace:
    """``parser``'s arguments (subcommand in ``args.cmd``); for the subcommands in ``takes_overrides`` the ``key=value``
    overrides may also follow an option (``train cfg.yaml --dry-run lr=1``) and are appended to ``args.overrides``."""
    args, extra = parser.parse_known_args(argv)
    takes = getattr(args, "cmd", None) in takes_overrides
    bad = [x for x in extra if x.startswith("-") or not takes]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)}")
    if takes:
        args.overrides = list(args.overrides) + extra
    return args


def config_command(cls: type, path: str | None, overrides: Sequence[str], dry_run: bool, run: Callable[[Any], int],
                   describe: Callable[[Any], None] | None = None) -> int:
    """Load config ``cls`` from ``path`` + ``overrides`` (a bad one: one line, exit 2); with ``dry_run`` print it (and
    ``describe(cfg)``) and return 0; else ``run(cfg)``."""
    try:
        cfg = load_config(cls, path, list(overrides))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if dry_run:
        print(dump_config(cfg))
        if describe is not None:
            describe(cfg)
        return 0
    return run(cfg)
