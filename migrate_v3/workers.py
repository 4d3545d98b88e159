"""Worker processes for ``check -j`` and ``apply -j``, started safely.

Forking is the cheap way to start workers (they inherit the loaded modules
and the data), but forking a process that already runs MAX (its runtime
threads and compile-pool processes) breaks that process's compile pool:
the forked children run MAX's exit handlers. So fork only from a process
that has no other thread and has not imported MAX; otherwise spawn.

``check`` does not need a pool: ``fork_map`` forks one child per pile of
work, keeps the first pile for itself and reads each child's answer back
(marshal, through shared memory or a pipe), which costs a few milliseconds
where a pool's start-up, queues and pickling cost tens. The pool (``process_pool``) is
imported only when spawning is needed.
"""

from __future__ import annotations

import marshal
import mmap
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

T = TypeVar("T")


def fork_is_safe() -> bool:
    return hasattr(os, "fork") and threading.active_count() == 1 and not any(
        name == "max" or name.startswith("max.") for name in list(sys.modules)
    )


def process_pool(workers: int) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    method = "fork" if fork_is_safe() else "spawn"
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context(method))


#: Shared memory per child for its answer (pages are allocated only as written);
#: a larger answer goes through the pipe.
_SHARED_BYTES = 256 << 20


def _child(func: Callable[[T], Any], pile: T, read: int, write: int, shared: mmap.mmap | None) -> None:
    """Runs in the forked child: never returns into the caller's code.

    The answer goes into ``shared`` (the pipe then says b"m"): a pipe holds
    64 KiB, so a child writing megabytes to one would wait for the parent,
    which reads only after its own pile, and then hand them over 64 KiB at a
    time. Without room there, it follows b"p" down the pipe.
    """
    status = 1
    try:
        os.close(read)
        data = marshal.dumps(func(pile))
        if shared is not None and len(data) + 8 <= len(shared):
            shared[:8] = len(data).to_bytes(8, "little")
            shared[8 : 8 + len(data)] = data
            data = b"m"
        else:
            data = b"p" + data
        view = memoryview(data)
        while view:
            view = view[os.write(write, view) :]
        status = 0
    except BaseException:  # noqa: B036 - any failure: the parent redoes the pile
        pass
    finally:
        os._exit(status)


def _shared_memory() -> mmap.mmap | None:
    try:
        return mmap.mmap(-1, _SHARED_BYTES)
    except (OSError, ValueError):
        return None


def fork_map(func: Callable[[T], Any], piles: Sequence[T], consume: Callable[[int, Any], None]) -> None:
    """``consume(i, func(piles[i]))`` for every pile, the piles after the first in forked children.

    This process runs the first pile and consumes its result while the
    children still work. ``func`` must return marshal-able data. A child that
    fails (killed, an exception, data that cannot be marshalled) has its pile
    redone here, so the result never depends on whether forking worked. Call
    only when ``fork_is_safe()``.
    """
    children: list[tuple[int, int, mmap.mmap | None]] = []
    try:
        for pile in piles[1:]:
            read, write = os.pipe()
            shared = _shared_memory()
            try:
                pid = os.fork()
            except OSError:
                os.close(read)
                os.close(write)
                children.append((-1, -1, shared))
                continue
            if pid == 0:
                _child(func, pile, read, write, shared)
            os.close(write)
            children.append((pid, read, shared))
        if piles:
            consume(0, func(piles[0]))
        for i, pile in enumerate(piles[1:], start=1):
            pid, read, shared = children.pop(0)
            consume(i, _collect(func, pile, pid, read, shared))
    finally:
        for pid, read, shared in children:  # the parent failed: stop and reap the children
            if pid > 0:
                try:
                    os.close(read)
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
            if shared is not None:
                shared.close()


def _collect(func: Callable[[T], Any], pile: T, pid: int, read: int, shared: mmap.mmap | None) -> Any:
    try:
        if pid < 0:
            return func(pile)
        chunks = []
        with os.fdopen(read, "rb") as stream:
            while chunk := stream.read(1 << 20):
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return func(pile)
        data = b"".join(chunks)
        if data == b"m" and shared is not None:
            size = int.from_bytes(shared[:8], "little")
            return marshal.loads(shared[8 : 8 + size])
        if data[:1] == b"p":
            return marshal.loads(data[1:])
        return func(pile)
    except (EOFError, ValueError, TypeError):
        return func(pile)
    finally:
        if shared is not None:
            shared.close()
