"""`engram serve` as a new process, spoken to over stdio as an MCP client does (JSON-RPC lines).

By hand rather than through the `mcp` SDK's client: the benchmarks time the server, and a client
whose own event loop and imports run in the timing process would be timed with it.

    with Served(code, vault) as server:
        server.initialize()
        answer = server.tool("store_memory", {"content": "...", "importance": 0.5})
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ANSWER_SECONDS = 300  # a call that takes longer is a hung server, not a slow one


def child_env(code: Path) -> dict[str, str]:
    """The children's environment: `code` first on the path (they also run in it: `-m` puts the
    working folder first)."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    env.pop("ENGRAM_VAULT", None)
    # A user's engram runs from bytecode (pip compiles it at install, a checkout writes it on first
    # import). With PYTHONDONTWRITEBYTECODE set (as in some shells here) every child compiled all
    # its modules from source, each round: ~0.1-0.3 s more for the model commands, fewer for search.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


class Served:
    """One `engram serve --vault VAULT` process run from the checkout `code`; `started` is when."""

    def __init__(self, code: Path, vault: Path, *, maintenance: bool = True) -> None:
        self.started = time.perf_counter()
        flags = [] if maintenance else ["--no-maintenance"]
        self._process = subprocess.Popen([sys.executable, "-m", "compiler", "serve", "--vault", str(vault), *flags],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         env=child_env(code), cwd=code)
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self._process.pid

    def initialize(self) -> None:
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "engram-bench", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Calls a tool; returns its answer, parsed from the JSON text it is given as."""
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result}")
        return json.loads(result["content"][0]["text"])

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        while True:
            message = json.loads(self._lines.get(timeout=ANSWER_SECONDS))
            if message.get("id") == self._ids:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message["result"]

    def close(self) -> None:
        """Closes stdin, as a client that ends does, and waits for the server to exit."""
        if self._process.stdin:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin
        self._process.stdin.write((json.dumps(message) + "\n").encode())
        self._process.stdin.flush()

    def _read(self) -> None:
        assert self._process.stdout
        for line in self._process.stdout:
            self._lines.put(line)
