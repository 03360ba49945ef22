"""`batch-assets emulator`, `batch-assets bench` and `batch-assets soak`: programs with their own flags and --help.

The parser hands them every word after the subcommand unchanged (see parser.py).
"""

from __future__ import annotations

import sys


def _exit_code(exc: SystemExit) -> int:
    """Their argparse ends --help (0) and bad flags (2) with SystemExit."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def cmd_emulator(args) -> int:
    from batch_assets.emulator.server import main as emulator_main

    try:
        emulator_main(args.forwarded)
    except SystemExit as exc:
        return _exit_code(exc)
    return 0


def cmd_bench(args) -> int:
    from batch_assets.bench import main as bench_main

    try:
        return bench_main(args.forwarded) or 0
    except SystemExit as exc:
        return _exit_code(exc)


def cmd_soak(args) -> int:
    from batch_assets.soak import main as soak_main

    try:
        return soak_main(args.forwarded) or 0
    except SystemExit as exc:
        return _exit_code(exc)
