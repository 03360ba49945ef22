"""`batch-assets`: the operator's command line.

    demo · dev · emulator · bench · soak · seed · jobs · report · export · sql · cancel · dry-run

Layout: parser.py builds the argparse tree (each subcommand parses only its own flags; emulator,
bench and soak get every word after their name), one module per command (or pair of commands) holds
its function, output.py renders read commands as table/json/csv, console.py draws rich tables and
progress bars on a terminal (plain text elsewhere), errors.py turns exceptions into one line on stderr.
`main` is the console script and `python -m batch_assets.cli`.
"""

from __future__ import annotations

import os
import sys
import traceback

from batch_assets.cli.errors import EXIT_INTERRUPTED, explain

__all__ = ["main"]


def _debug_env() -> bool:
    return os.environ.get("BATCH_ASSETS_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (0 ok, 1 runtime error, 2 usage error, 130 Ctrl-C).

    Every error is one line on stderr; with --debug or BATCH_ASSETS_DEBUG=1 the traceback comes first.
    """
    from batch_assets.cli.parser import PROG, build_parser

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else 0
    debug = getattr(args, "debug", False) or _debug_env()
    from batch_assets.cli.console import FULL_WIDTH, bars

    FULL_WIDTH.set(bool(getattr(args, "wide", False)))
    try:
        with bars():  # progress bars on stderr when it is a terminal; nothing otherwise
            return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader (`| head`) went away: stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        line, code = explain(exc)
        if debug:
            traceback.print_exc()
        print(f"{PROG} {args.command}: {line}", file=sys.stderr)
        return code
