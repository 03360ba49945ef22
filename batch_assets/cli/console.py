"""What the command line shows on a terminal: rich tables and progress bars, and nothing fancy elsewhere.

- Progress bars go to stderr, only when stderr is a terminal (or FORCE_COLOR / TTY_COMPATIBLE=1 say
  to treat it as one). BATCH_ASSETS_PROGRESS=0 turns them off; =1 shows them even when stderr is not
  a terminal. Library code reports through `batch_assets.progress`; `bars()` installs the reporter.
- Tables: a rich table when the stream they go to is a terminal, cut to the terminal's width (the
  columns left out are named; `--wide` keeps them), else the plain aligned text of
  `batch_assets.formatting.format_table` (every column, stable for scripts, no ANSI codes). JSON and
  CSV never come here.

rich is imported inside the functions, so `--help` stays fast.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from batch_assets import progress

PROGRESS_ENV = "BATCH_ASSETS_PROGRESS"


def _env_switch() -> bool | None:
    value = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if value in ("0", "false", "no", "never", "off"):
        return False
    if value in ("1", "true", "yes", "always", "on"):
        return True
    return None


def console(out: TextIO | None = None, *, force_terminal: bool | None = None, width: int | None = None):
    """A rich Console on `out` (default stderr); a terminal by rich's rules (isatty, FORCE_COLOR,
    TTY_COMPATIBLE) unless `force_terminal` says otherwise."""
    from rich.console import Console

    return Console(
        file=out if out is not None else sys.stderr,
        force_terminal=force_terminal,
        width=width,
        highlight=False,
        soft_wrap=False,
    )


def is_terminal(out: TextIO) -> bool:
    return console(out).is_terminal


# --- tables ----------------------------------------------------------------------------------------------


# Set for one command by `--wide`: tables keep every column however wide the terminal is.
FULL_WIDTH: contextvars.ContextVar[bool] = contextvars.ContextVar("full_width", default=False)


# Columns kept to the last on a narrow terminal: the verdict is what an operator reads a row for.
VERDICT_HEADERS = frozenset({"check", "status", "state", "verdict", "note"})
# Cells that say nothing: a column made only of them goes first when the table is too wide.
EMPTY_CELLS = frozenset({"", "0", "-", "0.0000"})


def fit_columns(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int
) -> tuple[list[str], list[list[str]], list[str]]:
    """(headers, rows, dropped headers) of a table that fits in `width` characters: columns whose
    every cell is empty or zero go first, then the others from the right; the first column (what a
    row is) and the verdict columns stay."""
    headers = [str(h) for h in headers]
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    shown = list(range(len(headers)))

    def too_wide() -> bool:
        return sum(widths[i] for i in shown) + 2 * (len(shown) - 1) > width

    droppable = [i for i in shown[1:] if headers[i] not in VERDICT_HEADERS]
    empty = [i for i in droppable if all(r[i] in EMPTY_CELLS for r in cells)]
    for i in [*reversed(empty), *(i for i in reversed(droppable) if i not in empty)]:
        if not too_wide():
            break
        shown.remove(i)
    dropped = [headers[i] for i in range(len(headers)) if i not in shown]
    return [headers[i] for i in shown], [[r[i] for i in shown] for r in cells], dropped


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None, wide: bool | None = None
) -> None:
    """The rows under `headers` on `out` (default stdout): rich on a terminal, plain text elsewhere.
    First column left-aligned, the others right-aligned, either way. On a terminal the columns that do
    not fit its width are left out and named below the table, unless `wide` (or `--wide`)."""
    from batch_assets.formatting import format_table

    out = sys.stdout if out is None else out
    con = console(out)
    if not con.is_terminal:  # scripts and files get every column, stable
        out.write(format_table(list(headers), [list(r) for r in rows]) + "\n")
        return
    wide = FULL_WIDTH.get() if wide is None else wide
    dropped: list[str] = []
    if not wide:
        headers, rows, dropped = fit_columns(headers, rows, con.width)
    plain = format_table(list(headers), [list(r) for r in rows])
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for i, h in enumerate(headers):
        table.add_column(str(h), justify="right" if i else "left", no_wrap=True)
    for r in rows:
        table.add_row(*(str(c) for c in r))
    # Never squeeze or cut a cell: as wide as the table needs (with --wide the terminal wraps).
    needed = len(plain.splitlines()[0]) + 2 * len(headers) + 2
    wide_console = console(out, force_terminal=True, width=max(con.width, needed))
    wide_console.print(table)
    if dropped:
        wide_console.print(f"{len(dropped)} more column(s) not shown: {', '.join(dropped)} (--wide shows them)")


# --- progress bars ---------------------------------------------------------------------------------------


class RichReporter:
    """A `batch_assets.progress.Reporter` drawing rich bars on one console.

    The display starts with the first bar and stops when no bar is left (so text printed between two
    pieces of work is not drawn over). Bars started with `keep` stay on screen when done; the others
    disappear."""

    def __init__(self, con) -> None:
        self._console = con
        self._progress = None
        self._open: list[int] = []

    def _columns(self):
        from rich.progress import BarColumn, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class Amount(ProgressColumn):
            def render(self, task) -> Text:
                from rich.filesize import decimal

                unit = task.fields.get("unit", "items")
                if unit == "bytes":
                    done = decimal(int(task.completed))
                    return Text(f"{done}/{decimal(int(task.total))}" if task.total is not None else done)
                total = f"/{task.total:,.0f}" if task.total is not None else ""
                return Text(f"{task.completed:,.0f}{total} {unit}")

        return (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), Amount(), TimeElapsedColumn())

    def start(self, description: str, total: float | None, unit: str, keep: bool = False):
        from rich.progress import Progress

        if self._progress is None:
            # stdout is redirected through the display only when it is the terminal the bars are on.
            self._progress = Progress(
                *self._columns(), console=self._console, redirect_stdout=sys.stdout.isatty(), redirect_stderr=True
            )
            self._progress.start()
        task_id = self._progress.add_task(description, total=total, unit=unit)
        self._open.append(task_id)
        return _RichBar(self._progress, task_id, keep=keep)

    def finish(self, bar) -> None:
        progress_ = self._progress
        if progress_ is None or not isinstance(bar, _RichBar):
            return
        if bar.task_id in self._open:
            self._open.remove(bar.task_id)
        if not bar.keep:
            progress_.remove_task(bar.task_id)
        else:
            task = progress_.tasks[[t.id for t in progress_.tasks].index(bar.task_id)]
            if task.total is None:  # a spinner that is done: show it finished
                progress_.update(bar.task_id, total=task.completed or 1, completed=task.completed or 1)
        if not self._open:
            progress_.stop()
            self._progress = None


class _RichBar:
    def __init__(self, progress_, task_id, *, keep: bool) -> None:
        self._progress = progress_
        self.task_id = task_id
        self.keep = keep

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self.task_id, amount)

    def update(
        self, *, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        self._progress.update(self.task_id, completed=completed, total=total, description=description)


def bars_wanted(con) -> bool:
    switch = _env_switch()
    return con.is_terminal if switch is None else switch


@contextlib.contextmanager
def bars(out: TextIO | None = None) -> Iterator[None]:
    """Progress bars on `out` (default stderr) for the block, if wanted there; else nothing is shown."""
    con = console(out)
    if not bars_wanted(con):
        yield
        return
    if not con.is_terminal:  # BATCH_ASSETS_PROGRESS=1 on a pipe or file: draw as on a terminal
        con = console(out, force_terminal=True)
    with progress.reporting(RichReporter(con)):
        yield
