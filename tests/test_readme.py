"""README's two set-up commands stay true: CI runs the test command exactly."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", setup)


def test_readme_states_exactly_two_setup_commands() -> None:
    commands = _commands()
    assert len(commands) == 2
    assert "fixtures/models/" in commands[0]
    assert "max" in commands[1] or "verify" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci


def test_example_package_exists() -> None:
    target = _commands()[0].split()[-1] if "--out" not in _commands()[0] else _commands()[0].split("apply", 1)[1].split()[0]
    assert (ROOT / target).is_dir()
