"""Worker processes for ``check -j`` and ``apply -j``, started safely.

Forking is the cheap way to start workers (they inherit the loaded modules
and the data), but forking a process that already runs MAX (its runtime
threads and compile-pool processes) breaks that process's compile pool:
the forked children run MAX's exit handlers. So fork only from a process
that has no other thread and has not imported MAX; otherwise spawn.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context


def fork_is_safe() -> bool:
    return threading.active_count() == 1 and not any(
        name == "max" or name.startswith("max.") for name in list(sys.modules)
    )


def process_pool(workers: int) -> ProcessPoolExecutor:
    method = "fork" if fork_is_safe() else "spawn"
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context(method))
