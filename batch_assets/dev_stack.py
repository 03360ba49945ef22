"""Where a running `batch-assets dev` stack listens, recorded in its data directory.

`batch-assets dev` writes DATA_DIR/dev_stack.json when its emulator answers and removes it when it
stops; a command run beside it (retry, cancel, jobs --refresh) reads it, so it talks to the emulator
the stack started instead of the default port. A record whose process is gone is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

STACK_FILE = "dev_stack.json"


def record(data_dir: Path, *, emulator_url: str, ui_url: str) -> Path:
    path = Path(data_dir) / STACK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "emulator_url": emulator_url, "ui_url": ui_url}) + "\n")
    tmp.replace(path)  # readers never see half a file
    return path


def clear(data_dir: Path) -> None:
    path = Path(data_dir) / STACK_FILE
    with contextlib.suppress(FileNotFoundError, ValueError, OSError):
        if json.loads(path.read_text()).get("pid") == os.getpid():  # only the stack that wrote it
            path.unlink()


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def recorded_emulator_url(data_dir: Path) -> str | None:
    """The emulator URL of the dev stack running over `data_dir`, or None when none is."""
    try:
        stack = json.loads((Path(data_dir) / STACK_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stack, dict) or not _alive(stack.get("pid")):
        return None
    url = stack.get("emulator_url")
    return url if isinstance(url, str) and url else None
