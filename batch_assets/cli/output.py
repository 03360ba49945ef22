"""One renderer for every read command: records (dicts) and the fields to show, in three formats.

    FIELDS = [Field("job_key"), Field("request_total", header="total"), Field("task_id", in_table=False)]
    render(rows, FIELDS, args.format)

- ``table``: for people (first column left, the others right-aligned), the fields with ``in_table``
  only, titled by ``header``, cells formatted by ``cell`` (default: the value, empty for NULL). A
  rich table when `out` is a terminal, else aligned plain text without ANSI codes (stable for scripts).
- ``json``: one JSON array of objects keyed by field name, values as JSON types (NULL -> null,
  bool -> true/false, timestamps as ISO 8601 text).
- ``csv``: a header row of field names, then one row per record (NULL -> empty, bool -> true/false).

A command gains a column by adding a Field; the --format flag (``add_format_option``) is shared.
"""

from __future__ import annotations

import csv
import datetime as _dt
import decimal
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

FORMATS = ("table", "json", "csv")


@dataclass(frozen=True)
class Field:
    """One column: `name` is the record key (and the JSON key / CSV header)."""

    name: str
    header: str | None = None  # table title (default: name)
    in_table: bool = True  # False: JSON and CSV only (keeps the table narrow)
    cell: Callable[[Any], str] | None = None  # table text for a value (default: str, "" for NULL)

    @property
    def title(self) -> str:
        return self.header or self.name


def add_format_option(parser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (default, for people), json (one array of objects) or csv (header + rows)",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="tables keep every column on a narrow terminal (by default the ones that do not fit are left out)",
    )


TABLE_LIMIT = 50  # rows a listing shows in a table for a person; json and csv list everything


def add_limit_option(parser, what: str, which: str = "") -> None:
    """--limit N of a listing; `which` says which N are kept (e.g. "the newest")."""
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"list at most N {what}{f' ({which})' if which else ''} (default {TABLE_LIMIT} in a table, all as "
        "json or csv; 0: all); the count shown and the total go to stderr",
    )


def row_limit(args) -> int:
    """The rows a listing shows: --limit, else TABLE_LIMIT for a table and all (0) for json or csv."""
    from batch_assets.cli.errors import UsageError

    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 (no limit) or more")
    return args.limit if args.limit is not None else (TABLE_LIMIT if args.format == "table" else 0)


def print_total(shown: int, total: int, what: str) -> None:
    """`N of TOTAL <what>` on stderr (stdout stays the listing), with how to see more when some are left out."""
    more = "; --limit N shows more, --limit 0 all" if total > shown else ""
    print(f"{shown:,} of {total:,} {what}{more}", file=sys.stderr)


def render(
    records: Iterable[Mapping[str, Any]], fields: Sequence[Field], fmt: str = "table", out: TextIO | None = None
) -> None:
    """Write the records to `out` (default stdout) in format `fmt` (one of FORMATS)."""
    out = sys.stdout if out is None else out
    records = list(records)
    if fmt == "table":
        from batch_assets.cli.console import print_table

        print_table(*table_cells(records, fields), out=out)
    elif fmt == "json":
        json.dump(
            [{f.name: _json_value(r.get(f.name)) for f in fields} for r in records], out, ensure_ascii=False, indent=2
        )
        out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([f.name for f in fields])
        writer.writerows([_csv_value(r.get(f.name)) for f in fields] for r in records)
    else:
        raise ValueError(f"unknown output format {fmt!r}; choose from {', '.join(FORMATS)}")


def table(records: Sequence[Mapping[str, Any]], fields: Sequence[Field]) -> str:
    """The `table` format as plain text (no trailing newline), aligned like every table of the project."""
    from batch_assets.formatting import format_table

    return format_table(*table_cells(records, fields))


def table_cells(records: Sequence[Mapping[str, Any]], fields: Sequence[Field]) -> tuple[list[str], list[list[str]]]:
    """(headers, rows of cell text) of the `table` format."""
    shown = [f for f in fields if f.in_table]
    rows = [[(f.cell(r.get(f.name)) if f.cell else _text(r.get(f.name))) for f in shown] for r in records]
    return [f.title for f in shown], rows


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, _dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return str(value)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(_json_value(value), ensure_ascii=False)
    return value
