"""The progress display of `gpuprov scan` on a terminal: one line per stage with its counts.

The pipeline reports `Progress` events and never prints; this module turns them into a rich
live display on stderr. The CLI uses it only when stderr is a terminal and --quiet is off.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, TextIO

from scanner.model import Progress

if TYPE_CHECKING:
    from rich.progress import TaskID

_TITLES = {
    "walk": "walking files",
    "layers": "reading image layers",
    "catalog": "reading package databases",
    "hash": "hashing libraries",
    "verify": "checking signatures and catalogs",
}


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def describe(event: Progress) -> str:
    """One line saying what the stage is doing and how far it has got."""
    title = _TITLES.get(event.stage, event.stage)
    if event.unit == "bytes":
        counts = f"{_size(event.done)} of {_size(event.total or 0)}"
    elif event.unit and event.total is not None:
        counts = f"{event.done} of {event.total} {event.unit}"
    elif event.unit:
        counts = f"{event.done} {event.unit}"
    else:
        counts = ""
    found = f"{event.candidates} candidate{'' if event.candidates == 1 else 's'}"
    return f"{title}: {counts}, {found}" if counts else f"{title}: {found}"


class ProgressDisplay:
    """A transient rich display with one task per stage; a context manager around the scan."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(file=stream, markup=False, emoji=False, highlight=False)
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.stage: str | None = None
        self.task: TaskID | None = None

    def update(self, event: Progress) -> None:
        """Show ``event``: a new stage gets its own line, the previous one stays complete."""
        text = describe(event)
        if event.stage != self.stage or self.task is None:
            if self.task is not None:
                # The stage is over: a full bar, not an endless pulse.
                done = self.bar.tasks[-1].completed or 1
                self.bar.update(self.task, total=done, completed=done)
                self.bar.stop_task(self.task)
            self.stage = event.stage
            self.task = self.bar.add_task(text, total=event.total)
            # Draw now, not at the next tick: a fast stage would otherwise never be seen.
            self.bar.refresh()
        self.bar.update(self.task, description=text, completed=event.done, total=event.total)

    def __enter__(self) -> ProgressDisplay:
        self.bar.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.bar.refresh()
        self.bar.stop()
