"""What ``apply`` prints: every TODO it left, as check prints findings, with whole paths.

``path:line:col: MVxxx message`` per TODO (the output file and line), paths
spelled from the argument as given, plain lines (never cut) when stdout is
not a terminal; a rich table only on a terminal.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3.apply import apply_paths
from migrate_v3.apply_cmd import _summary, apply

TINYLM = Path(__file__).resolve().parent.parent / "fixtures" / "models" / "tinylm"
LONG = "a_package_directory_name_long_enough_that_an_eighty_column_table_must_cut_it"
TODO_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>MV\d{3}) (?P<message>.+)$")


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    dest = tmp_path / "models" / LONG
    shutil.copytree(TINYLM, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "extra.py").write_text('from max.graph import Graph, TensorValue\n\n\ndef build(x: TensorValue):\n    return Graph("x")\n')
    return dest


def test_every_todo_is_printed_like_check(pkg: Path) -> None:
    result = CliRunner().invoke(apply, [f"models/{LONG}"])
    assert result.exit_code == 1
    printed = [m for line in result.stdout.splitlines() if (m := TODO_LINE.match(line))]
    left = []
    for py in sorted((pkg.parent / f"{LONG}_modulev3").rglob("*.py")):
        for number, text in enumerate(py.read_text().splitlines(), start=1):
            if "# TODO(migrate-v3):" in text:
                left.append((f"models/{LONG}_modulev3/{py.name}", number, text.index("#") + 1, text.split(": ", 1)[1]))
    assert left, "the fixture leaves TODOs"
    assert [(m["path"], int(m["line"]), int(m["col"]), f"{m['code']} {m['message']}") for m in printed] == left
    summary = next(line for line in result.stdout.splitlines() if line.startswith("Wrote "))
    assert summary.startswith(f"Wrote models/{LONG}_modulev3: ") and f"{len(left)} TODOs" in summary


def test_piped_output_is_plain_lines_with_whole_paths(pkg: Path) -> None:
    result = CliRunner().invoke(apply, [f"models/{LONG}", "--diff"])
    assert result.exit_code == 1
    result = CliRunner().invoke(apply, [f"models/{LONG}"], terminal_width=80)
    lines = result.stdout.splitlines()
    assert not any(ch in result.stdout for ch in "…┃│━")  # no table, nothing cut
    assert f"models/{LONG}/model.py: rewrites " in "\n".join(lines)
    assert all(line.startswith(("models/", "Wrote ")) or "register" in line for line in lines), lines


def test_terminal_table_keeps_whole_paths(pkg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an 80-column terminal the file column wraps instead of cutting names to `…`."""
    report = apply_paths([Path(f"models/{LONG}")])
    monkeypatch.setenv("COLUMNS", "80")  # rich sizes its console from it
    out = io.StringIO()
    _summary(out, report, terminal=True)
    text = out.getvalue()
    assert "┃" in text and "…" not in text
    assert max(len(line) for line in text.splitlines() if "│" in line) <= 80
    cells = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
    assert f"models/{LONG}/model.py" in cells


def test_rewrite_positions_are_computed_only_for_a_report(pkg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ``--report`` prints where each rewrite was: without it, apply spends no codegen on that."""
    import json

    import migrate_v3.pipeline as pipeline

    calls: list[int] = []
    real = pipeline.positions

    def counted(module, nodes):  # type: ignore[no-untyped-def]
        calls.append(len(nodes))
        return real(module, nodes)

    monkeypatch.setattr(pipeline, "positions", counted)
    plain = CliRunner().invoke(apply, [f"models/{LONG}"])
    assert plain.exit_code == 1 and "Wrote " in plain.stdout
    assert calls == []
    shutil.rmtree(pkg.parent / f"{LONG}_modulev3")
    reported = CliRunner().invoke(apply, [f"models/{LONG}", "--report", "r.json"])
    assert reported.exit_code == 1 and calls
    rewrites = [r for f in json.loads(Path("r.json").read_text())["files"] for r in f["rewrites"]]
    assert rewrites and any(r["line"] > 0 for r in rewrites)
