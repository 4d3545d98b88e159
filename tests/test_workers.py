"""Workers are forked only where forking cannot break a running MAX (see workers.py)."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from migrate_v3 import workers


def test_fork_unsafe_once_max_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.delitem(sys.modules, "max", raising=False)
    for name in [n for n in sys.modules if n.startswith("max.")]:
        monkeypatch.delitem(sys.modules, name)
    assert workers.fork_is_safe()
    monkeypatch.setitem(sys.modules, "max.engine", types.ModuleType("max.engine"))
    assert not workers.fork_is_safe()


def test_fork_unsafe_with_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not workers.fork_is_safe()
    with workers.process_pool(1) as pool:
        assert pool._mp_context.get_start_method() == "spawn"
