"""Running the emulator: `serve(...)` blocks; `main(argv)` backs `batch-assets emulator`."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import logging
import typing
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from batch_assets.emulator.app import create_app
from batch_assets.emulator.settings import FORCED_STATUSES, STRUCTURED, EmulatorSettings, load_settings
from batch_assets.ports import port_in_use

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_STATE_DIR = Path("data/emulator")


def check_loopback(host: str) -> None:
    """The emulator accepts any bearer token, so it must never listen beyond this machine."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ValueError(f"the emulator binds to loopback addresses only, not {host!r}")


def uvicorn_server(app: Starlette, host: str, port: int, *, quiet: bool = False) -> uvicorn.Server:
    check_loopback(host)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        ws="none",
        access_log=False,  # the app logs requests itself, without headers
        log_config=None if quiet else uvicorn.config.LOGGING_CONFIG,
        log_level="warning" if quiet else "info",
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    state_dir: Path = DEFAULT_STATE_DIR,
    settings: EmulatorSettings | None = None,
) -> None:
    """Serve until interrupted; `settings` default to `state_dir/settings.json`, else built-ins."""
    uvicorn_server(create_app(state_dir, settings), host, port).run()


def _default_text(knob: dataclasses.Field) -> str:
    """A knob's default as help text, the value as a user types it (JSON for the structured ones,
    which have a factory); nothing for a knob that is unset by default (None)."""
    if knob.default is None:
        return ""
    if knob.default is not dataclasses.MISSING:
        return f" (default: {knob.default})"
    return f" (default: {json.dumps(knob.default_factory())})"  # type: ignore[misc]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="batch-assets emulator",
        description="Local provider emulator (OpenAI Batch at /v1, DashScope at /compatible-mode/v1, "
        "Gemini Batch at /v1 and /v1beta with the bare address as the SDK's base_url), "
        "bound to 127.0.0.1. Knob flags override <state-dir>/settings.json.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on {DEFAULT_HOST} (default: %(default)s)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="where batches, files and settings.json are kept (default: %(default)s)",
    )
    hints = typing.get_type_hints(EmulatorSettings)
    for knob in dataclasses.fields(EmulatorSettings):
        flag = f"--{knob.name.replace('_', '-')}"
        kind = next((a for a in typing.get_args(hints[knob.name]) if a is not type(None)), hints[knob.name])
        extra: dict[str, typing.Any] = {
            "default": argparse.SUPPRESS,
            "help": knob.metadata["help"] + _default_text(knob),
        }
        if knob.name in STRUCTURED:
            parser.add_argument(flag, type=json.loads, **extra)
        elif kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **extra)
        elif knob.name == "force_batch_status":
            parser.add_argument(flag, choices=FORCED_STATUSES, **extra)
        else:
            parser.add_argument(flag, type=kind, **extra)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = vars(parser.parse_args(argv))
    port, state_dir = args.pop("port"), args.pop("state_dir")
    try:
        settings = load_settings(state_dir).replace(**args)
    except ValueError as exc:
        parser.error(str(exc))
    if port_in_use(port, DEFAULT_HOST):  # one line naming the port, instead of uvicorn's log and traceback
        parser.exit(
            1,
            f"{parser.prog}: port {port} already in use on {DEFAULT_HOST}: stop what holds it, "
            "or choose another with --port N; nothing was started\n",
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger(__name__).info(
        "emulator state in %s; OpenAI base URL http://%s:%d/v1, DashScope http://%s:%d/compatible-mode/v1, "
        "Gemini http://%s:%d",
        state_dir,
        DEFAULT_HOST,
        port,
        DEFAULT_HOST,
        port,
        DEFAULT_HOST,
        port,
    )
    serve(port=port, state_dir=state_dir, settings=settings)


if __name__ == "__main__":
    main()
