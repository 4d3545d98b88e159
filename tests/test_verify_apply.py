"""verify after apply: the tool's own output on the example, and apply's TODOs
attached to the classes they explain. Static checks only (no compile)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from migrate_v3.apply import apply_paths
from migrate_v3.verify import run_verify
from migrate_v3.verify_cmd import verify

ROOT = Path(__file__).resolve().parent.parent
V2 = ROOT / "fixtures" / "models" / "tinylm"
V3 = ROOT / "fixtures" / "verify" / "tinylm_v3"


def test_apply_output_on_the_example_passes_static_checks(tmp_path: Path) -> None:
    pkg = tmp_path / "tinylm"
    shutil.copytree(V2, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    applied = apply_paths([pkg])
    report = run_verify(pkg, tmp_path / "tinylm_modulev3", compile=False, mypy=False,
                        apply_report=applied)
    assert report.exit_code == 0, report.to_json()
    tiny = report.by_name("TinyLM")
    assert tiny.alignment is not None and tiny.alignment.ok and tiny.hparams == []
    assert tiny.todos == []  # TODOs are attached to failing classes only


def test_apply_report_todos_explain_a_failing_class(tmp_path: Path) -> None:
    port = tmp_path / "port"
    shutil.copytree(V3, port, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "fixtures" / "verify" / "broken" / "bias_flipped" / "layers.py",
                port / "layers.py")
    todo = {"line": 17, "col": 8, "code": "MV341", "message": "Linear: has_bias not known"}
    apply_json = tmp_path / "apply.json"
    apply_json.write_text(json.dumps({"files": [
        {"source": str(V2 / "layers.py"), "dest": str(port / "layers.py"), "todos": [todo]},
        {"source": str(V2 / "model.py"), "dest": str(port / "model.py"), "todos": []},
    ]}))
    result = CliRunner().invoke(verify, [
        str(V2), str(port), "--no-compile", "--no-mypy", "--apply-report", str(apply_json),
        "--format", "json",
    ])
    assert result.exit_code == 1, result.output
    tiny = {c["name"]: c for c in json.loads(result.output)["classes"]}["TinyLM"]
    assert tiny["todos"] == ["layers.py:17: MV341 Linear: has_bias not known"]
    assert "apply TODO layers.py:17: MV341 Linear: has_bias not known" in tiny["causes"]


def test_missing_accelerator_is_could_not_run() -> None:
    from max.driver import accelerator_count

    result = CliRunner().invoke(verify, [str(V2), str(V3), "--device", "gpu:7", "--no-mypy",
                                         "--no-compile"])
    assert accelerator_count() <= 7
    assert result.exit_code == 2
    assert "device 'gpu:7' requested" in result.output
