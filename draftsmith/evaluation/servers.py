"""What the bench's server peers (llama-server, vLLM) share: a free loopback port, and waiting for a
server process to answer its health check."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc: subprocess.Popen, port: int, timeout: float, poll: float = 0.25) -> str:
    """Poll http://127.0.0.1:PORT/health until it answers 200: "ready"; "exited" if the process ended
    first; "timeout" after `timeout` seconds."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return "ready"
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(poll)
    return "timeout"
