from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def pytest_configure(config: pytest.Config) -> None:
    """Import max's KV-cache ops once, in the controller, before xdist starts its workers.

    A fresh install compiles them into ``max/_kv_cache_ops/__mojocache__`` on first import; two
    workers importing at once race on that file, and one reads it half-written ("file too short":
    a brand-new venv's first run failed collecting tests/test_weights_max.py so). Without max
    (the apply-only job) there is nothing to build.
    """
    if hasattr(config, "workerinput"):
        return  # (a worker: the controller built it)
    try:
        import max._kv_cache_ops  # noqa: F401
    except ImportError:
        pass


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a ``slow`` test (MAX compiles, whole-ladder runs) run first.

    The workers take whole files in collection order (``--dist loadfile``):
    started last, one long file keeps a worker busy while the other idles
    (a cold-cache run's tail); started first, the short files fill the gaps.
    """
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # (stable: file and test order kept)
