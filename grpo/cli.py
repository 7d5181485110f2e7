"""What every console script of the project shares: bad input is one line on stderr and exit code 2.

    p = grpo.cli.ArgumentParser(prog="vla-rl", description=...)   # argparse; its errors are one line
    return grpo.cli.run_command(lambda: cmd(args))                 # a bad value raised at start -> one line, exit 2

A user's mistake (an unknown key, a missing file, a value out of range) stops the command before anything is
written, with one line that names the bad value and what was expected, and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from .config import ConfigError

BAD_INPUT = (ConfigError, ValueError, FileNotFoundError, KeyError)  # what a command raises on bad input


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line, ``<prog>: error: <message> (see <prog> --help)``, exit 2
    (subcommand parsers made with ``add_subparsers`` inherit it)."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def run_command(fn: Callable[[], int], bad_input: tuple[type[BaseException], ...] = BAD_INPUT) -> int:
    """``fn()``'s exit code; an exception of ``bad_input`` becomes ``error: <message>`` on stderr and exit code 2."""
    try:
        return fn()
    except bad_input as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {msg}", file=sys.stderr)
        return 2
