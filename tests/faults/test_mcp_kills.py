"""Fault injection over MCP: the server process is SIGKILLed while an agent stores memories.

A memory the server acknowledged (the tool answered) must survive every kill, and a retried call
(same source id) must not store it twice. The server runs the real tools over stdio with the small
fake embedder, so each restart is quick.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import textwrap
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from compiler.core.settings import Settings
from compiler.memory.vault import VaultMemory, read_memories
from tests.conftest import ROOT, FakeEmbedder

SEED = int(os.environ.get("KILL_SEED", "7"))
COUNT = 60

SERVER = f"""
import os, sys
from pathlib import Path
sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]
from conftest import FakeEmbedder
from compiler.core.settings import Settings
from compiler.mcp_server.server import MemoryServer, build_server
vault = Path(sys.argv[1])
(vault / "server.pid").write_text(str(os.getpid()))
memory = MemoryServer(vault, Settings(now="2026-12-01 10:00:00"), embedder=FakeEmbedder())
build_server(memory).run("stdio")
"""


async def store_until_killed(vault: Path, todo: list[int], kill_at: tuple[int, float] | None,
                             acked: dict[str, str]) -> float:
    """Stores memories `todo` one call at a time, recording each acknowledged id; kills the server
    `kill_at` = (calls, seconds): that many seconds after the session's that-many-th answer (None:
    let it finish). Counting answers, not seconds from the start, keeps the kill mid-session however
    fast the machine runs. Returns the seconds from `initialize` to the session's end."""
    params = StdioServerParameters(command=sys.executable, args=["-c", textwrap.dedent(SERVER), str(vault)],
                                   env={k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")})

    async def killer(delay: float) -> None:
        await asyncio.sleep(delay)
        os.kill(int((vault / "server.pid").read_text()), signal.SIGKILL)

    started = loop_time()
    try:
        async with stdio_client(params, errlog=(vault.parent / "server.log").open("a")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                started = loop_time()
                for answered, number in enumerate(todo):
                    if kill_at is not None and answered == kill_at[0]:
                        asyncio.ensure_future(killer(kill_at[1]))
                    source = f"m-{number}"
                    words = " ".join(f"w{number}x{i}" for i in range(6))  # no shared word: no merge
                    result = await asyncio.wait_for(session.call_tool("store_memory", {
                        "content": words, "importance": 0.5, "metadata": {"source_id": source, "project": "faults"}}), 30)
                    if result.isError:
                        raise RuntimeError("".join(getattr(b, "text", "") for b in result.content))
                    acked[source] = json.loads("".join(getattr(b, "text", "") for b in result.content))["id"]
    except Exception:  # the kill cuts the session: whatever was not answered was not acknowledged
        if kill_at is None:
            raise
    return loop_time() - started


def loop_time() -> float:
    return asyncio.get_running_loop().time()


def test_an_mcp_server_killed_mid_writes_keeps_every_acknowledged_memory(tmp_path):
    rng = random.Random(SEED)
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    acked: dict[str, str] = {}
    # A whole session on another vault times one call: each kill lands within a call or two of an answer.
    (tmp_path / "timing" / ".engram").mkdir(parents=True)
    per_call = asyncio.run(store_until_killed(tmp_path / "timing", list(range(COUNT)), None, {})) / COUNT
    kills = 0
    for _ in range(4):
        before = len(acked)
        todo = [n for n in range(COUNT) if f"m-{n}" not in acked]
        kill_at = (rng.randrange(len(todo) // 2), rng.uniform(0.0, per_call))
        asyncio.run(store_until_killed(vault, todo, kill_at, acked))
        kills += len(acked) < COUNT
        assert len(acked) >= before
    asyncio.run(store_until_killed(vault, list(range(COUNT)), None, acked))  # retries every call
    assert kills >= 2, "the kills should land mid-session"
    with VaultMemory(vault, Settings(now="2026-12-01 10:00:00"), embedder=FakeEmbedder()) as memory:
        live = [o for o in read_memories(memory).state.values() if o.live]
    by_source = {s: o.id for o in live for s in o.sources if s.startswith("m-")}
    assert set(by_source) == {f"m-{n}" for n in range(COUNT)} and len(live) == COUNT  # all, once each
    assert all(by_source[s] == i for s, i in acked.items())
