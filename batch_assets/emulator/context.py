"""What the emulator core hands each provider's emulator package when the app is assembled."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from batch_assets.emulator.settings import RuntimeSettings
from batch_assets.emulator.store import Store
from batch_assets.emulator.worker import Worker


@dataclass(frozen=True)
class EmulatorContext:
    """The state every provider's routes share within one app.

    `store` is the one persistence (and lock) of the app: providers keep their records under
    kinds of their own, and services built over it are views of it, so building one per route
    set changes nothing. `runtime` holds the live settings (knobs, injected failures).
    `state_dir` is where the store lives, for a provider that needs files of its own.
    `worker` runs the slow work (reading inputs, writing results) in the background.
    """

    store: Store
    runtime: RuntimeSettings
    state_dir: Path
    worker: Worker = field(default_factory=Worker)
