"""The survey's 'unflagged' metric: a finding counts unless its statement carries a TODO."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("whole_model_survey", ROOT / "bench" / "whole_model_survey.py")
assert _spec is not None and _spec.loader is not None
survey = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(survey)

CODE = '''\
# TODO(migrate-v3): MV381 use compiled = model.compile(*types, weights=state_dict)
compiled = session.load(
    graph, weights_registry=model.state_dict()
)
x = graph.inputs[0].tensor
'''


def test_multiline_statement_with_todo_above_is_flagged_other_line_is_not(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg_modulev3"
    pkg.mkdir()
    (pkg / "m.py").write_text(CODE)
    report = {
        "files": [
            {
                "path": str(pkg / "m.py"),
                "findings": [
                    {"line": 3, "code": "MV381", "message": "session.load(weights_registry=...)"},
                    {"line": 5, "code": "MV373", "message": ".tensor on a graph Value"},
                ],
            }
        ]
    }
    assert survey.unflagged(report, tmp_path) == ["pkg_modulev3/m.py:5: MV373 .tensor on a graph Value"]
