"""Progress while compiling: a rich bar on a terminal, plain lines otherwise.

A first CPU compile takes about a minute, so silence would look like a hang;
plain lines keep CI logs readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO


class Progress(Protocol):
    def set_total(self, total: int) -> None: ...

    def step(self, label: str) -> Any: ...

    def close(self) -> None: ...


class NullProgress:
    def set_total(self, total: int) -> None:
        pass

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass


class PlainProgress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0

    def set_total(self, total: int) -> None:
        self.total = total

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        start = time.perf_counter()
        print(f"[{self.done + 1}/{self.total}] {label} ...", file=self.stream, flush=True)
        try:
            yield
        finally:
            self.done += 1
            took = time.perf_counter() - start
            print(f"[{self.done}/{self.total}] {label} done in {took:.1f}s",
                  file=self.stream, flush=True)

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
    def step(self, label: str) -> Iterator[None]:
        self._bar.update(self._task, description=label)
        try:
            yield
        finally:
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
