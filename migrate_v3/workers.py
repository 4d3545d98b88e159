"""Worker processes for ``check -j`` and ``apply -j``, started safely.

Forking is the cheap way to start workers (they inherit the loaded modules
and the data), but forking a process that already runs MAX (its runtime
threads and compile-pool processes) breaks that process's compile pool:
the forked children run MAX's exit handlers. So fork only from a process
that has no other thread and has not imported MAX; otherwise spawn.

``check`` does not need a pool: ``fork_map`` forks the children, and every
process takes piles of work from a shared queue (a pipe) until none is
left; the children's answers come back at the end (marshal, through shared
memory or a pipe). That costs a few milliseconds where a pool's start-up,
queues and pickling cost tens. The pool (``process_pool``) is
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


def _take(queue: int) -> int | None:
    """The next pile index from the shared queue (a pipe of 2-byte indices), or None when empty.

    Every read asks for exactly 2 bytes of a pipe that holds only whole
    indices, so each read gets one whole index, and no two processes the same.
    """
    data = os.read(queue, 2)
    return int.from_bytes(data, "little") if len(data) == 2 else None


def _child(func: Callable[[T], Any], piles: Sequence[T], queue: int, read: int, write: int,
           shared: mmap.mmap | None) -> None:
    """Runs in the forked child: never returns into the caller's code.

    Takes piles from the queue until it is empty, then hands back
    [(index, answer), ...]: into ``shared`` (the pipe then says b"m"), since
    a pipe holds 64 KiB and a child writing megabytes to one would wait for
    the parent, which reads only when its own piles are done. Without room
    there, the answer follows b"p" down the pipe.
    """
    status = 1
    try:
        os.close(read)
        answers = []
        while (index := _take(queue)) is not None:
            answers.append((index, func(piles[index])))
        data = marshal.dumps(answers)
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
    except BaseException:  # noqa: B036 - any failure: the parent redoes the child's piles
        pass
    finally:
        os._exit(status)


def _shared_memory() -> mmap.mmap | None:
    try:
        return mmap.mmap(-1, _SHARED_BYTES)
    except (OSError, ValueError):
        return None


#: At most this many piles go through the queue (2 bytes each, all written before
#: any process reads: they must fit in a pipe's 64 KiB).
_MAX_QUEUED = 16384


def fork_map(
    func: Callable[[T], Any], piles: Sequence[T], consume: Callable[[int, Any], None], processes: int = 2
) -> None:
    """``consume(i, func(piles[i]))`` for every pile, in ``processes`` processes: this one
    and forked children.

    Every process takes the next pile from a shared queue when it is free, so
    piles of uneven cost still end together. This process consumes its own
    answers at once (while the children work), the children's at the end.
    ``func`` must return marshal-able data. A pile that a failed child took
    (killed, an exception, data that cannot be marshalled) is redone here,
    so the result never depends on whether forking worked. Call only when
    ``fork_is_safe()``.
    """
    if processes <= 1 or len(piles) <= 1 or len(piles) > _MAX_QUEUED:
        for index, pile in enumerate(piles):
            consume(index, func(pile))
        return
    queue, fill = os.pipe()
    try:
        os.write(fill, b"".join(i.to_bytes(2, "little") for i in range(len(piles))))
    finally:
        os.close(fill)
    children: list[tuple[int, int, mmap.mmap | None]] = []
    done: set[int] = set()
    try:
        for _ in range(processes - 1):
            read, write = os.pipe()
            shared = _shared_memory()
            try:
                pid = os.fork()
            except OSError:
                os.close(read)
                os.close(write)
                if shared is not None:
                    shared.close()
                continue
            if pid == 0:
                _child(func, piles, queue, read, write, shared)
            os.close(write)
            children.append((pid, read, shared))
        while (mine := _take(queue)) is not None:
            consume(mine, func(piles[mine]))
            done.add(mine)
        while children:
            pid, read, shared = children.pop(0)
            for theirs, answer in _collect(pid, read, shared):
                if theirs not in done:
                    consume(theirs, answer)
                    done.add(theirs)
        for missing, pile in enumerate(piles):  # taken by a child that failed
            if missing not in done:
                consume(missing, func(pile))
    finally:
        os.close(queue)
        for pid, read, shared in children:  # the parent failed: stop and reap the children
            try:
                os.close(read)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            if shared is not None:
                shared.close()


def _collect(pid: int, read: int, shared: mmap.mmap | None) -> list[tuple[int, Any]]:
    """A child's [(index, answer), ...]; [] when it failed (its piles are then redone)."""
    try:
        chunks = []
        with os.fdopen(read, "rb") as stream:
            while chunk := stream.read(1 << 20):
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return []
        data = b"".join(chunks)
        if data == b"m" and shared is not None:
            size = int.from_bytes(shared[:8], "little")
            answers = marshal.loads(shared[8 : 8 + size])
        elif data[:1] == b"p":
            answers = marshal.loads(data[1:])
        else:
            return []
        return [(index, answer) for index, answer in answers]
    except (EOFError, ValueError, TypeError):
        return []
    finally:
        if shared is not None:
            shared.close()
