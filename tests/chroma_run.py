"""A real `chroma run` on a free local port, for the server-mode tests and benchmarks/chroma_scale.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMA = Path(sys.executable).parent / "chroma"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ChromaDidNotStart(RuntimeError):
    pass


@contextmanager
def chroma_server(folder: Path) -> Iterator[tuple[str, int]]:
    """Runs `chroma run` with its data and log in `folder`; yields its URL and process id once it
    answers its heartbeat, and stops it on the way out. Raises ChromaDidNotStart with the log's end."""
    port = free_port()
    with (folder / "server.log").open("w") as log:
        server = subprocess.Popen([str(CHROMA), "run", "--path", str(folder / "data"), "--host", "127.0.0.1",
                                   "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).read()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise ChromaDidNotStart((folder / "server.log").read_text()[-2000:]) from None
                    time.sleep(0.2)
            yield f"http://127.0.0.1:{port}", server.pid
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
