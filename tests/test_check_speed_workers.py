"""fork_map: the forked workers of `check` give the same answers as doing the work here."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from migrate_v3 import workers
from migrate_v3.check import run_check
from migrate_v3.config import Settings

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _collect(func, piles):  # type: ignore[no-untyped-def]
    got: dict[int, object] = {}
    workers.fork_map(func, piles, got.__setitem__)
    return [got[i] for i in range(len(piles))]


def test_results_come_back_in_pile_order() -> None:
    piles = [list(range(k, 100, 3)) for k in range(3)]
    assert _collect(lambda p: [x * x for x in p], piles) == [[x * x for x in p] for p in piles]


def test_big_answers_come_back_whole_through_shared_memory_or_the_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    piles = [[k] * 3 for k in range(6)]

    def func(pile: list[int]) -> list[object]:
        if os.getpid() == parent:
            time.sleep(0.05)  # slow here: the child takes piles too
        return [os.getpid(), *(str(x) * 400_000 for x in pile)]  # 1.2 MB: more than a pipe holds

    def check() -> None:
        got = _collect(func, piles)
        assert [answer[1:] for answer in got] == [func(p)[1:] for p in piles]
        assert {answer[0] for answer in got} - {parent}  # some came back from the child

    check()  # through shared memory
    monkeypatch.setattr(workers, "_SHARED_BYTES", 1024)
    check()  # too big for it: down the pipe
    monkeypatch.setattr(workers, "_shared_memory", lambda: None)
    check()  # no shared memory at all


def test_free_processes_take_the_next_pile() -> None:
    """Uneven piles: the process that finishes early takes more of them."""
    parent = os.getpid()

    def func(pile: list[int]) -> int:
        time.sleep(0.2 if pile[0] == 0 else 0.002)  # pile 0 is slow
        return os.getpid()

    got = _collect(func, [[k] for k in range(20)])
    slow = got[0]
    # whoever took the slow pile did few others; the other process did the rest
    assert got.count(slow) <= 5 and len(set(got)) == 2 and parent in got


def test_a_failing_child_has_its_pile_redone_here() -> None:
    parent = os.getpid()

    def func(pile: list[int]) -> list[int]:
        if os.getpid() != parent:
            raise RuntimeError("child fails")
        return [x + 1 for x in pile]

    assert _collect(func, [[1], [2], [3]]) == [[2], [3], [4]]


def test_unmarshallable_answers_are_redone_here() -> None:
    parent = os.getpid()

    def func(pile: list[int]) -> object:
        return [object()] if os.getpid() != parent else list(pile)

    assert _collect(func, [[1], [2]]) == [[1], [2]]


def test_a_failing_parent_reaps_its_children(tmp_path: Path) -> None:
    parent = os.getpid()
    pid_file = tmp_path / "child.pid"

    def func(pile: list[int]) -> list[int]:
        if os.getpid() == parent:
            while not pid_file.exists():
                time.sleep(0.01)
            raise KeyError("parent fails")
        partial = pid_file.with_suffix(".partial")
        partial.write_text(str(os.getpid()))
        os.replace(partial, pid_file)
        time.sleep(30)
        return pile

    with pytest.raises(KeyError):
        workers.fork_map(func, [[1], [2]], lambda i, r: None)
    with pytest.raises(ChildProcessError):
        os.waitpid(int(pid_file.read_text()), os.WNOHANG)  # killed and reaped, not left running


def test_forked_and_serial_runs_agree(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    bodies = [
        "from max.nn import Linear\n\nlayer = Linear(2, 2, None, None)\n",
        "from max.experimental.nn import Linear\n",
        "from max.graph import ops\n\ny = ops.reshape(x, [1])\n",
        "x = 1\n",
        "from max.nn import Linear\ndef f(:\n",
    ]
    for i in range(90):
        (src / f"m{i}.py").write_text(bodies[i % len(bodies)])
    shutil.copy(src / "m0.py", src / "z.py")
    one = run_check([src], Settings(cache=False, jobs=1, root=tmp_path))
    two = run_check([src], Settings(cache=False, jobs=2, root=tmp_path))
    assert one == two
    assert len(one.errors) == 18 and one.findings_count > 50
