"""`python -m batch_assets.services start|stop|status|run -- CMD` (what `make services` and `make test` call).

start   starts PostgreSQL and an S3 server (moto) under DIR (default data/services) and prints the
        environment lines to export
stop    stops them by their recorded PIDs
status  says whether they run, and where
run     starts throwaway ones, runs CMD with BATCH_ASSETS_TEST_PG_URL and BATCH_ASSETS_TEST_S3_ENDPOINT
        set, stops them whatever CMD did (also on Ctrl-C) and exits with CMD's code; a server that
        cannot start is left out (the tests that need it skip with a message, or fail when CI is set)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from batch_assets.services import postgres, s3

TEST_URL_VARIABLE = "BATCH_ASSETS_TEST_PG_URL"
TEST_S3_VARIABLE = "BATCH_ASSETS_TEST_S3_ENDPOINT"
TABLES_SCHEMA = "warehouse"  # the source and business tables, apart from Dagster's own in `public`


def env_lines(server: postgres.Running) -> list[str]:
    dagster = server.url.replace("postgresql://", "postgresql+psycopg2://", 1)
    return [
        f"export BATCH_ASSETS_LEDGER_URL={server.url}",
        f"export BATCH_ASSETS_DAGSTER_PG_URL={dagster}",
        f"export BATCH_ASSETS_TABLES_URL={server.url}",
        f"export BATCH_ASSETS_TABLES_SCHEMA={TABLES_SCHEMA}",
    ]


def _run(cmd: list[str]) -> int:
    state = Path(tempfile.mkdtemp(prefix="batch_assets_pg_"))
    env = dict(os.environ)
    child: subprocess.Popen | None = None

    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        # SIGTERM / SIGHUP end CMD; we then stop the servers. One that comes while they start is
        # kept until they have (raised mid-start, it could leave a server no state file names).
        if child is None:
            pending.append(signum)
            return
        child.terminate()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        try:
            server = postgres.start(state)
            env[TEST_URL_VARIABLE] = server.url
            print(f"services: PostgreSQL for the tests at {server.url} (pid {server.pid})", flush=True)
        except (postgres.ServiceError, OSError, subprocess.SubprocessError) as exc:
            print(f"services: no PostgreSQL for the tests: {exc}", file=sys.stderr, flush=True)
        try:
            bucket = s3.start(state)
            env[TEST_S3_VARIABLE] = bucket.endpoint
            print(f"services: S3 for the tests at {bucket.endpoint} (pid {bucket.pid})", flush=True)
        except (s3.S3ServiceError, OSError, subprocess.SubprocessError) as exc:
            print(f"services: no S3 server for the tests: {exc}", file=sys.stderr, flush=True)
        if pending:
            return 128 + pending[0]
        child = subprocess.Popen(cmd, env=env)
        if pending:  # came while CMD was being started
            child.terminate()
        # Ctrl-C reaches CMD too (same process group): we keep waiting for it, then stop the server.
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                continue
    finally:
        s3.stop(state)
        postgres.discard(state)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m batch_assets.services", description=__doc__.split("\n\n")[0])
    verbs = p.add_subparsers(dest="verb", required=True, metavar="{start,stop,status,run}")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--dir", type=Path, default=Path("data/services"), help="state directory (default data/services)"
    )
    start = verbs.add_parser("start", parents=[where], help="start PostgreSQL and print the lines to export")
    start.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    verbs.add_parser("stop", parents=[where], help="stop it by its recorded PID")
    verbs.add_parser("status", parents=[where], help="say whether it runs, and its URL (exit 1 when not)")
    run = verbs.add_parser("run", help=f"run -- CMD ... under a throwaway PostgreSQL (${TEST_URL_VARIABLE})")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    try:
        if args.verb == "run":
            cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            if not cmd:
                p.error("run needs a command: run -- CMD ...")
            return _run(cmd)
        if args.verb == "start":
            server = postgres.start(args.dir, args.port)
            bucket = s3.start(args.dir)
            print(f"# PostgreSQL {server.url} (pid {server.pid}, data {server.data_dir}); stop: make services-stop")
            print(f"# S3 (moto, in memory) {bucket.endpoint} (pid {bucket.pid}), bucket {s3.BUCKET}")
            print("\n".join(env_lines(server) + s3.env_lines(bucket)))
            return 0
        if args.verb == "stop":
            print("stopped PostgreSQL" if postgres.stop(args.dir) else "no PostgreSQL was running")
            print("stopped the S3 server" if s3.stop(args.dir) else "no S3 server was running")
            return 0
        server = postgres.running(args.dir.resolve())
        bucket = s3.running(args.dir.resolve())
        print(f"PostgreSQL running at {server.url} (pid {server.pid})" if server else "PostgreSQL not running")
        print(f"S3 running at {bucket.endpoint} (pid {bucket.pid})" if bucket else "S3 server not running")
        return 0 if server and bucket else 1
    except (postgres.ServiceError, s3.S3ServiceError, OSError) as exc:
        print(f"services: {args.verb} failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
