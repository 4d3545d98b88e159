"""``verify``: prove a V2→V3 migration by numerics, weight keys and mypy.

Attributes are resolved lazily so importing the tool never imports ``max``
(or numpy); only running a verification does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from migrate_v3.verify.report import VerifyReport
    from migrate_v3.verify.runner import VerifyOptions, run_verify

__all__ = ["VerifyOptions", "VerifyReport", "run_verify"]


def __getattr__(name: str) -> Any:
    if name in ("run_verify", "VerifyOptions"):
        from migrate_v3.verify import runner

        return getattr(runner, name)
    if name == "VerifyReport":
        from migrate_v3.verify.report import VerifyReport

        return VerifyReport
    raise AttributeError(name)
