"""Errors the command line reports as one line on stderr, and how any exception becomes that line."""

from __future__ import annotations

import re

EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Exceptions from these packages are the provider's answer (or no answer), not a bug of ours.
PROVIDER_SDKS = frozenset({"openai", "anthropic", "google", "httpx", "httpcore", "httpx2", "httpcore2"})
DEBUG_HINT = "rerun with --debug or BATCH_ASSETS_DEBUG=1 for the traceback"


class CliError(Exception):
    """A failure the operator can fix: the message says what went wrong and what to do."""

    exit_code = EXIT_RUNTIME

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(CliError):
    """The command line itself is wrong (a flag value, a combination of flags)."""

    exit_code = EXIT_USAGE


def first_paragraph(text: str) -> str:
    """The first paragraph of a (DuckDB, SDK) error message, on one line."""
    lines = []
    for line in str(text).strip().splitlines():
        if not line.strip():
            break
        lines.append(line.strip())
    return " ".join(lines) or "(no message)"


def is_lock_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


def locked_message(database: object, exc: BaseException) -> str:
    pid = re.search(r"PID (\d+)", str(exc))
    holder = f"process {pid.group(1)}" if pid else "another process"
    return (
        f"warehouse {database} is locked by {holder} (a Dagster run, `batch-assets dev` or `demo`?): "
        "retry when it is done, or wait longer with --lock-timeout SECONDS"
    )


def explain(exc: BaseException) -> tuple[str, int]:
    """(one line for stderr, exit code) for any exception a command raised."""
    if isinstance(exc, CliError):
        return str(exc), exc.exit_code
    from batch_assets.pipeline.errors import SourceQueryError
    from batch_assets.spec.errors import SettingError, TaskSpecError

    # What the operator declared (a task file, an environment setting): the message names it and the fix.
    if isinstance(exc, TaskSpecError):
        return f"task file error: {first_paragraph(exc)}", EXIT_RUNTIME
    if isinstance(exc, SettingError):
        return f"setting error: {first_paragraph(exc)}", EXIT_RUNTIME
    if isinstance(exc, SourceQueryError):
        return f"task source query error: {first_paragraph(exc)}", EXIT_RUNTIME
    try:
        import duckdb
    except ImportError:  # pragma: no cover - duckdb is a dependency
        duckdb = None
    if duckdb is not None and isinstance(exc, duckdb.Error):
        if is_lock_conflict(exc):
            return locked_message("file", exc), EXIT_RUNTIME
        return f"database error: {first_paragraph(exc)}", EXIT_RUNTIME
    unreachable = connection_failure(exc)
    if unreachable is not None:
        url, reason = unreachable
        return (
            f"cannot reach {url or 'the provider'}: {reason} — is the provider reachable? Without API keys "
            "the emulator answers: start it with `batch-assets dev` (or `batch-assets emulator`), or set "
            "BATCH_ASSETS_EMULATOR_URL to where it listens"
        ), EXIT_RUNTIME
    if type(exc).__module__.split(".")[0] in PROVIDER_SDKS:
        return f"provider API error: {type(exc).__name__}: {first_paragraph(exc)}", EXIT_RUNTIME
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}", EXIT_RUNTIME
    return f"unexpected error: {type(exc).__name__}: {first_paragraph(exc)} ({DEBUG_HINT})", EXIT_RUNTIME


# What the SDKs (and httpx under them) raise when no connection could be made or no answer came.
_CONNECTION_ERRORS = ("APIConnectionError", "APITimeoutError", "ConnectError", "ConnectTimeout", "ConnectionError")


def connection_failure(exc: BaseException) -> tuple[str | None, str] | None:
    """(the URL the request went to, or None; why it failed, e.g. "connection refused") when `exc`
    (or an exception it came from) is a failure to reach a server; None for any other error."""
    chain, seen, current = [], set(), exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    if not any(isinstance(e, ConnectionError) or type(e).__name__ in _CONNECTION_ERRORS for e in chain):
        return None
    url = None
    for e in chain:
        try:
            request = getattr(e, "request", None)  # httpx raises when an error carries no request
        except Exception:
            request = None
        if request is not None and getattr(request, "url", None) is not None:
            url = str(request.url)
            break
    root = chain[-1]
    if isinstance(root, ConnectionRefusedError):
        reason = "connection refused"
    elif isinstance(root, TimeoutError) or "timeout" in type(root).__name__.lower():
        reason = "no answer (timed out)"
    elif isinstance(root, OSError) and root.strerror:
        reason = root.strerror[:1].lower() + root.strerror[1:]
    else:
        reason = first_paragraph(root)
    return url, reason
