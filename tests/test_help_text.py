"""``--help`` of both console scripts and of every subcommand reads as plain terminal text: the module docstrings
they print carry reStructuredText (````vla-rl````, ``:func:`x```), which ``grpo.cli.ArgumentParser`` strips."""

import importlib
import re

import pytest

from grpo.cli import plain_text


def _help(capsys, script: str, *args: str) -> str:
    main = importlib.import_module(f"{script}.cli").main
    with pytest.raises(SystemExit) as e:
        main([*args, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def test_plain_text_strips_literals_and_roles_only():
    assert plain_text("``vla-rl`` and :func:`grpo.cli.run_command` with ``device=auto``") == \
        "vla-rl and grpo.cli.run_command with device=auto"
    assert plain_text("x = a * b; 'quoted' stays") == "x = a * b; 'quoted' stays"


@pytest.mark.parametrize("script", ["vla_rl", "diffusion_rl"])
def test_every_help_page_is_plain_text(script, capsys):
    top = _help(capsys, script)
    subcommands = re.search(r"\{([a-z,-]+)\}", top).group(1).split(",")
    assert len(subcommands) >= 6, subcommands
    for page, text in [("", top)] + [(s, _help(capsys, script, s)) for s in subcommands]:
        assert "`" not in text, f"{script} {page} --help: {[ln for ln in text.splitlines() if '`' in ln][:3]}"
