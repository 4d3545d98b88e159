"""Progress while compiling: a rich bar on a terminal, plain lines otherwise.

A first CPU compile takes one to several minutes, so silence would look like
a hang: every long step (loading both sides, each compile, waiting for mypy)
runs inside :meth:`Progress.step`. Plain lines keep CI logs readable, with a
``still ...`` line every :data:`HEARTBEAT` seconds of a step.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO


class Progress(Protocol):
    def set_total(self, total: int) -> None: ...

    def step(self, label: str, counted: bool = True) -> Any: ...

    def close(self) -> None: ...


class NullProgress:
    def set_total(self, total: int) -> None:
        pass

    @contextmanager
    def step(self, label: str, counted: bool = True) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass


#: Seconds between the ``still ...`` lines of a long plain step.
HEARTBEAT = 30.0


class PlainProgress:
    def __init__(self, stream: TextIO | None = None, heartbeat: float = HEARTBEAT) -> None:
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0
        self.heartbeat = heartbeat

    def set_total(self, total: int) -> None:
        self.total = total

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    @contextmanager
    def step(self, label: str, counted: bool = True) -> Iterator[None]:
        start = time.perf_counter()
        tag = f"[{self.done + 1}/{self.total}] " if counted else ""
        self._say(f"{tag}{label} ...")
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.heartbeat):
                self._say(f"{tag}{label}: still running ({time.perf_counter() - start:.0f}s)")

        ticker = threading.Thread(target=beat, daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
            if counted:
                self.done += 1
            took = time.perf_counter() - start
            self._say(f"{tag}{label} done in {took:.1f}s")

    def close(self) -> None:
        pass


class RichProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as _Progress

        self._bar = _Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
            MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
            transient=False,
        )
        self._task = self._bar.add_task("verify", total=None)
        self._bar.start()

    def set_total(self, total: int) -> None:
        self._bar.update(self._task, total=total)

    @contextmanager
    def step(self, label: str, counted: bool = True) -> Iterator[None]:
        self._bar.update(self._task, description=label)
        try:
            yield
        finally:
            if counted:
                self._bar.advance(self._task)

    def close(self) -> None:
        self._bar.update(self._task, description="verify")
        self._bar.stop()


def make_progress(enabled: bool, stream: TextIO | None = None) -> Progress:
    """Rich when the stream is a terminal, plain lines otherwise."""
    if not enabled:
        return NullProgress()
    stream = stream or sys.stderr
    if stream.isatty():
        return RichProgress()
    return PlainProgress(stream)
