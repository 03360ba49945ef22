"""Loopback ports for the servers the project starts (emulator, Dagster UI, test services)."""

from __future__ import annotations

import errno
import socket

LOOPBACK = "127.0.0.1"


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    """True if something holds `port` on `host` (bound the way the servers bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing holds right now (another process may still take it before it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def is_listening(port: int, host: str = LOOPBACK, timeout_s: float = 0.5) -> bool:
    """True if a server accepts connections on `port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        return s.connect_ex((host, port)) == 0
