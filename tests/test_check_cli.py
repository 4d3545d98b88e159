"""The check command: exit codes, output formats, filters and configuration."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate_v3.cli import main

V2 = "from max.nn import Linear\n\nlayer = Linear(2, 2, None, None)\n"
V3 = "from max.experimental.nn import Linear\n\nlayer = Linear(2, 2)\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "v2.py").write_text(V2)
    (tmp_path / "pkg" / "v3.py").write_text(V3)
    (tmp_path / "pkg" / "plain.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["check", "--no-cache", *args])
    return result.exit_code, result.stdout, result.stderr


def test_exit_1_and_plain_lines_when_v2_found(tree: Path) -> None:
    code, out, err = run("pkg")
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert "pkg/v2.py:1:20: MV310 [auto] import Linear: Linear -> max.experimental.nn.Linear; V3 bias defaults to True" in lines
    assert any(line.startswith("pkg/v2.py:3:9: MV340 [auto]") for line in lines)
    assert lines[-1].startswith("Checked 3 files (v2 1, mixed 0, v3 1, neutral 1): 2 findings")


def test_exit_0_when_nothing_to_migrate(tree: Path) -> None:
    code, out, _ = run("pkg/v3.py", "pkg/plain.py")
    assert code == 0
    assert out.splitlines() == ["Checked 2 files (v2 0, mixed 0, v3 1, neutral 1): 0 findings (auto 0, unsafe 0, manual 0); 0 errors."]


def test_exit_zero_flag(tree: Path) -> None:
    assert run("--exit-zero", "pkg")[0] == 0


def test_select_and_ignore_by_prefix(tree: Path) -> None:
    _, out, _ = run("--select", "MV34", "pkg")
    assert [line.split()[1] for line in out.splitlines()[:-1]] == ["MV340"]
    code, out, _ = run("--ignore", "MV31,MV340", "pkg")
    assert code == 0 and "findings" in out


def test_exclude_glob(tree: Path) -> None:
    code, out, _ = run("--exclude", "v2.py", "pkg")
    assert code == 0 and "Checked 2 files" in out


def test_exclude_path_relative_to_dot(tree: Path) -> None:
    """From ``check .`` a nested path matches as written (``pkg/v2.py``, not ``g/v2.py``)."""
    (tree / "pkg" / "sub").mkdir()
    (tree / "pkg" / "sub" / "deep.py").write_text(V2)
    code, out, _ = run("--exclude", "pkg/sub/*", ".")
    assert code == 1 and "Checked 3 files" in out and "deep.py" not in out
    code, out, _ = run("--exclude", "pkg/*", ".")
    assert code == 0 and "Checked 0 files" in out


def test_json_format(tree: Path) -> None:
    code, out, _ = run("--format", "json", "pkg")
    data = json.loads(out)
    assert code == 1
    assert data["summary"]["kinds"] == {"v2": 1, "v3": 1, "neutral": 1}
    files = {Path(f["path"]).name: f for f in data["files"]}
    assert [x["code"] for x in files["v2.py"]["findings"]] == ["MV310", "MV340"]
    assert files["v2.py"]["findings"][0]["fix"] == "auto"
    assert files["v3.py"]["release"] == "26.7"


def test_github_format(tree: Path) -> None:
    _, out, _ = run("--format", "github", "pkg")
    assert out.splitlines()[0] == (
        "::warning file=pkg/v2.py,line=1,col=20,title=MV310::MV310 [auto] import Linear%3A Linear -> "
        "max.experimental.nn.Linear; V3 bias defaults to True"
    ) or out.splitlines()[0].startswith("::warning file=pkg/v2.py,line=1,col=20,title=MV310::")


def test_sarif_format(tree: Path) -> None:
    _, out, _ = run("--format", "sarif", "pkg")
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    run0 = sarif["runs"][0]
    assert [r["id"] for r in run0["tool"]["driver"]["rules"]] == ["MV310", "MV340"]
    first = run0["results"][0]
    assert first["ruleId"] == "MV310"
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 1, "startColumn": 20}


def test_settings_from_pyproject(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.migrate-v3]\nignore = ["MV31"]\nexclude = ["plain.py"]\n')
    _, out, _ = run("pkg")
    assert "MV310" not in out and "Checked 2 files" in out


def test_flags_override_pyproject(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.migrate-v3]\nselect = ["MV31"]\n')
    _, out, _ = run("--select", "MV340", "pkg")
    assert "MV340" in out and "MV310" not in out


def test_unknown_setting_is_a_usage_error(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.migrate-v3]\nselekt = ["MV31"]\n')
    code, _, err = run("pkg")
    assert code == 2 and "unknown setting [tool.migrate-v3] selekt" in err


def test_malformed_settings_are_a_usage_error(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.migrate-v3]\nselect = [\n')
    code, _, err = run("pkg")
    assert code == 2 and "pyproject.toml" in err and len(err.splitlines()) == 1


def test_a_pyproject_without_our_table_is_not_parsed(tree: Path) -> None:
    """Another tool's broken pyproject.toml is its business; check reads only [tool.migrate-v3]."""
    (tree / "pyproject.toml").write_text('[tool.other]\nx = [\n')
    code, out, err = run("pkg")
    assert code == 1 and err == "" and "Checked 3 files" in out


def test_usage_error_exits_2(tree: Path) -> None:
    assert CliRunner().invoke(main, ["check"]).exit_code == 2
    assert CliRunner().invoke(main, ["check", "--format", "xml", "pkg"]).exit_code == 2


def test_jobs_give_the_same_result(tree: Path) -> None:
    for i in range(80):  # above the threshold where workers are used
        shutil.copy(tree / "pkg" / "v2.py", tree / "pkg" / f"copy{i}.py")
    one = run("-j", "1", "--format", "json", "pkg")[1]
    two = run("-j", "2", "--format", "json", "pkg")[1]
    assert json.loads(one) == json.loads(two)
    assert json.loads(two)["summary"]["kinds"]["v2"] == 81


def test_rules_lists_every_code() -> None:
    from migrate_v3.rules import RULES

    result = CliRunner().invoke(main, ["rules", "--format", "json"])
    data = json.loads(result.stdout)
    assert [r["code"] for r in data] == list(RULES)
    assert all(r["before"] and r["after"] and r["fix"] in {"auto", "unsafe", "manual"} for r in data)
    text = CliRunner().invoke(main, ["rules"]).stdout
    assert "MV341 flipped-default [auto]" in text


def test_module_entry_point(tree: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "migrate_v3", "check", "--no-cache", "pkg"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert proc.returncode == 1 and "MV340" in proc.stdout
