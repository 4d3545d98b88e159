"""verify compiles a run's roots as one graph per side, and each alone when that graph fails.

No graph is compiled here: the compile functions are replaced by fakes that
record what they were given, so the orchestration is tested in seconds (the
real shared graphs run in ``tests/test_differential.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from migrate_v3.verify import run_verify, sides, together
from migrate_v3.verify.runner import run_verify_many

ROOT = Path(__file__).resolve().parent.parent
V2 = ROOT / "fixtures" / "models" / "tinylm"
V3 = ROOT / "fixtures" / "verify" / "tinylm_v3"

pytestmark = pytest.mark.needs_max


def _output() -> list[tuple[np.ndarray, str]]:
    return [(np.ones((2, 3), dtype=np.float32), "float32")]


class Fakes:
    """Stand-ins for the compilers: what each was given, and equal outputs on both sides."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, shared_fails: bool) -> None:
        self.shared: list[Any] = []
        self.alone: list[Any] = []
        self.shared_fails = shared_fails
        monkeypatch.setattr(together, "compile_together", self.compile_together)
        monkeypatch.setattr(sides, "compile_v2", self.compile_v2)
        monkeypatch.setattr(sides, "compile_v3", self.compile_v3)

    def compile_together(self, members: Sequence[together.Member], target: Any,
                         session: Any) -> list[tuple[list[Any], list[Any]]]:
        self.shared.extend(m.v2 for m in members)
        if self.shared_fails:
            raise RuntimeError("boom")
        return [(_output(), _output()) for _ in members]

    def compile_v2(self, module: Any, *args: Any) -> Any:
        self.alone.append(module)
        return lambda arrays: _output()

    def compile_v3(self, module: Any, *args: Any) -> Any:
        return lambda arrays: _output()


def _numeric(report: Any) -> list[Any]:
    return [c for c in report.classes if c.compared == "numeric"]


def test_the_roots_of_a_run_share_one_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, shared_fails=False)
    report = run_verify(V2, V3, all_classes=True, mypy=False)
    compared = _numeric(report)
    assert len(compared) >= 2 and all(c.status == "pass" for c in compared)
    assert {c.graph_shared_by for c in compared} == {len(compared)}
    assert len(fakes.shared) == len(compared) and fakes.alone == []
    assert report.graphs_compiled == 2


def test_a_failing_shared_graph_compiles_each_class_alone_on_fresh_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fakes = Fakes(monkeypatch, shared_fails=True)
    report = run_verify(V2, V3, all_classes=True, mypy=False)
    compared = _numeric(report)
    assert len(compared) >= 2 and all(c.status == "pass" for c in compared)
    assert all(c.graph_shared_by == 1 for c in compared)
    assert all(f"the graph shared by {len(compared)} classes failed (RuntimeError: boom); compiled alone"
               == c.reason for c in compared)
    assert len(fakes.alone) == len(compared)
    # tracing binds a V2 module to its graph: the classes are rebuilt, not re-traced
    assert not {id(m) for m in fakes.alone} & {id(m) for m in fakes.shared}


def test_graph_per_class_and_greedy_compile_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, shared_fails=False)
    report = run_verify(V2, V3, all_classes=True, mypy=False, one_graph=False)
    assert fakes.shared == [] and all(c.graph_shared_by == 1 for c in _numeric(report))
    fakes.alone.clear()
    greedy = run_verify(V2, V3, mypy=False, greedy=2)
    assert fakes.shared == [] and [c.graph_shared_by for c in _numeric(greedy)] == [1]


def test_several_runs_share_one_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, shared_fails=False)
    reports = run_verify_many([(V2, V3, {"mypy": False}), (V2, V3, {"mypy": False, "seed": 1})])
    assert [[c.graph_shared_by for c in _numeric(r)] for r in reports] == [[2], [2]]
    assert [r.graphs_compiled for r in reports] == [2, 2] and fakes.alone == []


def test_roots_whose_inputs_bind_a_dim_differently_get_separate_graphs() -> None:
    """One graph binds a dim name to one value, and model code names its dims: pack, never rename."""
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    def binding(batch: int, seq: int) -> dict[str, int]:
        t = TensorType(DType.float32, ["batch", "seq", 4], device=DeviceRef.CPU())
        return together.dim_values([t], [np.zeros((batch, seq, 4))])

    assert binding(2, 5) == {"batch": 2, "seq": 5}
    assert together.pack([binding(2, 5), binding(1, 5), binding(2, 5), {"tokens": 6}, binding(1, 3)]) == [
        [0, 2, 3], [1], [4]]
