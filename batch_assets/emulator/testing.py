"""`running_emulator(...)`: the emulator on a free loopback port in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from batch_assets.emulator.app import create_app
from batch_assets.emulator.server import DEFAULT_HOST, uvicorn_server
from batch_assets.emulator.settings import EmulatorSettings, load_settings
from batch_assets.emulator.worker import Worker

_START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class EmulatorHandle:
    port: int
    app: Starlette

    @property
    def base_url(self) -> str:
        return f"http://{DEFAULT_HOST}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def dashscope_base_url(self) -> str:
        return f"{self.base_url}/compatible-mode/v1"

    @property
    def settings(self) -> EmulatorSettings:
        return self.app.state.runtime.current

    @property
    def worker(self) -> Worker:
        """The background worker (`pause()`/`resume()` catch a batch mid-way in tests)."""
        return self.app.state.worker

    def configure(self, **knobs: Any) -> EmulatorSettings:
        """Change knobs now; batch-scoped ones apply to batches created afterwards."""
        return self.app.state.runtime.configure(**knobs)


@contextmanager
def running_emulator(state_dir: Path, **settings: Any) -> Iterator[EmulatorHandle]:
    """Serve the emulator persisting under `state_dir`, with `settings` over `state_dir/settings.json`."""
    app = create_app(state_dir, load_settings(Path(state_dir)).replace(**settings))
    # Binding port 0 ourselves gives a free port with no window for another process to take it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((DEFAULT_HOST, 0))
    port = sock.getsockname()[1]
    server = uvicorn_server(app, DEFAULT_HOST, port, quiet=True)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"emulator:{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the emulator did not start on port {port}")
            time.sleep(0.005)
        yield EmulatorHandle(port, app)
    finally:
        server.should_exit = True
        thread.join(timeout=_START_TIMEOUT_S)
        sock.close()
        app.state.worker.close()
