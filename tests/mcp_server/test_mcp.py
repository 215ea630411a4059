"""The MCP server: the tool contract, every tool through a real client session, hostile input,
`engram setup`; and (integration) `engram serve` as a subprocess over stdio with the real model,
seeing another process's writes, and storing memories while a compile runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server.fastmcp.exceptions import ToolError
from mcp.shared.memory import create_connected_server_and_client_session

from compiler.cli.main import main
from compiler.core.settings import Settings, load_settings
from compiler.mcp_server.server import MemoryServer, build_server
from compiler.pipeline.spine import compile_vault
from tests.conftest import FakeEmbedder

NOW = "2026-11-30 12:00:00"
ENGRAM = str(Path(sys.executable).parent / "engram")

CONTRACT = {  # name → (parameters in order, required): agents' rules depend on these
    "store_memory": (["content", "importance", "category", "metadata"], ["content", "importance"]),
    "recall_memory": (["query", "top_k"], ["query"]),
    "update_memory": (["memory_id", "new_content", "importance"], ["memory_id", "new_content"]),
    "consolidate_memory": ([], []),
    "session_handoff": (["summary", "completed", "in_progress", "blocked", "next_steps"], ["summary"]),
    "memory_stats": ([], []),
    "track_failure": (["error", "component", "severity", "root_cause", "fix", "related_test_ids"],
                      ["error", "component"]),
    "track_progress": (["feature", "status", "completion", "blockers", "quality_score", "notes"],
                       ["feature", "status"]),
    "forget_memory": (["memory_id"], ["memory_id"]),
    "restore_memory": (["memory_id"], ["memory_id"]),
    "load_handoff": (["project"], []),
    "search_notes": (["query", "n"], ["query"]),
    "get_note": (["path"], ["path"]),
    "mem_save": (["title", "content", "type", "project", "scope", "topic_key", "session_id"], ["title"]),
    "mem_search": (["query", "type", "project", "limit"], ["query"]),
    "mem_context": (["project", "limit"], []),
    "mem_session_summary": (["content", "project", "session_id"], ["content"]),
    "mem_get_observation": (["id"], ["id"]),
    "mem_update": (["id", "content", "title"], ["id"]),
    "mem_delete": (["id", "hard_delete"], ["id"]),
    "mem_timeline": (["observation_id", "before", "after"], ["observation_id"]),
    "mem_stats": (["project"], []),
    "ingest_source": (["content", "name", "content_base64", "path", "title", "origin"], []),
    "write_page": (["title", "body", "kind", "summary", "sources", "links", "expected_revision"], ["title", "body"]),
    "edit_page": (["page", "expected_revision", "body", "section", "section_body", "find", "replace", "summary",
                   "sources"], ["page", "expected_revision"]),
    "read_page": (["page"], ["page"]),
    "list_pages": (["kind"], []),
    "move_page": (["page", "new_title", "expected_revision", "kind"], ["page", "new_title", "expected_revision"]),
    "read_source": (["path"], ["path"]),
    "lint_wiki": ([], []),
    "file_answer": (["question", "answer", "pages", "sources", "title"], ["question", "answer"]),
    "promote_memories": (["memory_ids", "title", "kind", "summary", "intro"], ["memory_ids", "title"]),
}


def test_tool_contract():
    server = build_server(MemoryServer(Path("."), Settings(), embedder=FakeEmbedder()))
    tools = asyncio.run(server.list_tools())
    found = {t.name: (list(t.inputSchema.get("properties", {})), sorted(t.inputSchema.get("required", [])))
             for t in tools}
    assert found == {name: (params, sorted(required)) for name, (params, required) in CONTRACT.items()}
    assert all(t.description and len(t.description) < 200 for t in tools)


# -- in-process: the real protocol over memory streams, a fake embedder ---------------------------

@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n\nSee [[Runbooks/Deploy]].\n",
                       "Runbooks/Deploy.md": "# Deploy\n\nBlue-green deploys on Fly.io; roll back with the "
                                             "previous image tag.\n",
                       "Analyses/latency.qmd": "---\ntitle: Latency\n---\n\np95 latency is 120 ms.\n"})


Session = Callable[[str, dict[str, Any]], Awaitable[Any]]


def with_session(vault: Path, body: Callable[[Session], Awaitable[None]], *, project: str = "") -> None:
    """Runs `body(call)` against a server on `vault`; `call` returns the parsed JSON or raises ToolFailed."""
    memory = MemoryServer(vault, Settings(now=NOW), project=project, embedder=FakeEmbedder())

    async def run() -> None:
        async with create_connected_server_and_client_session(build_server(memory)) as session:
            await body(lambda name, args: call(session, name, args))

    try:
        asyncio.run(run())
    finally:
        memory.close()


class ToolFailed(Exception):
    pass


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    result = await session.call_tool(name, args)
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.isError:
        raise ToolFailed(text)
    return json.loads(text)


def test_memory_tools_answer_the_library_dicts(vault):
    async def body(call: Session) -> None:
        saved = await call("store_memory", {"content": "Deploys are blue-green on Fly.io", "importance": 0.8,
                                            "category": "strategy", "metadata": {"title": "Deploy style",
                                                                                 "tags": ["ops"]}})
        assert saved["action"] == "new" and saved["project"] == "web" and saved["category"] == "strategy"
        hits = await call("recall_memory", {"query": "how do we deploy", "top_k": 3})
        assert hits[0]["id"] == saved["id"] and hits[0]["fields"] == {"tags": ["ops"]}
        updated = await call("update_memory", {"memory_id": saved["id"], "new_content": "Deploys are canary on Fly.io"})
        assert updated["content"] == "Deploys are canary on Fly.io" and updated["history"]
        assert (await call("forget_memory", {"memory_id": saved["id"]}))["action"] == "forgotten"
        assert await call("recall_memory", {"query": "canary deploys"}) == []
        assert (await call("restore_memory", {"memory_id": saved["id"]}))["live"] is True
        failure = await call("track_failure", {"error": "CSRF token missing", "component": "payments",
                                               "severity": "critical", "related_test_ids": ["test_csrf"]})
        assert failure["action"] == "new"
        progress = await call("track_progress", {"feature": "login", "status": "in_progress", "completion": 40})
        again = await call("track_progress", {"feature": "login", "status": "review", "completion": 90})
        assert again["action"] == "updated" and again["id"] == progress["id"]
        await call("session_handoff", {"summary": "Login nearly done", "next_steps": ["ship it"]})
        handoff = await call("load_handoff", {})
        assert handoff["fields"]["next_steps"] == ["ship it"] and handoff["project"] == "web"
        stats = await call("memory_stats", {})
        assert stats["live"] == 4 and stats["by_project"] == {"web": 4}
        assert stats["failures_by_severity"] == {"critical": 1}
        assert stats["active_features"][0]["status"] == "review"
        assert set(await call("consolidate_memory", {})) == {"clusters", "consolidated", "archived", "at", "reconsidered"}

    with_session(vault, body, project="web")


def test_engram_cli_aliases(vault):
    async def body(call: Session) -> None:
        first = await call("mem_save", {"title": "Auth", "content": "JWT in cookies", "type": "decision",
                                        "project": "api", "topic_key": "auth/tokens"})
        second = await call("mem_save", {"title": "Auth", "content": "Opaque session ids, not JWT",
                                         "type": "decision", "project": "api", "topic_key": "auth/tokens"})
        assert first["action"] == "new" and second == {**second, "action": "updated", "id": first["id"]}
        await call("mem_save", {"title": "Port", "content": "The API listens on 8080", "type": "config",
                                "project": "api"})
        found = await call("mem_search", {"query": "session ids", "type": "decision", "project": "api"})
        assert [h["id"] for h in found] == [first["id"]] and found[0]["content"] == "Opaque session ids, not JWT"
        assert [h["type"] for h in await call("mem_search", {"query": "session ids", "type": "config"})] == ["config"]
        await call("mem_session_summary", {"content": "Goal: auth. Done: tokens.", "project": "api"})
        context = await call("mem_context", {"project": "api", "limit": 5})
        assert context["handoff"]["content"] == "Goal: auth. Done: tokens."
        assert {m["title"] for m in context["memories"]} == {"Auth", "Port"}

    with_session(vault, body)


def test_notes_tools_read_only_notes_inside_the_vault(vault, tmp_path):
    compile_vault(vault, load_settings(vault), embedder=FakeEmbedder())
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n")
    (vault / "leak.md").symlink_to(outside)
    (vault / "Runbooks/inside-link.md").symlink_to(vault / "Runbooks/Deploy.md")
    (vault / ".git").mkdir(exist_ok=True)
    (vault / ".git/config").write_text("[remote]\n")
    (vault / "config.md").symlink_to(vault / ".git/config")  # a hidden file, reached through a symlink

    async def body(call: Session) -> None:
        hits = await call("search_notes", {"query": "roll back deploy image tag", "n": 2})
        assert hits[0]["file"] == "Runbooks/Deploy.md" and set(hits[0]) >= {"docid", "score", "line", "snippet"}
        note = await call("get_note", {"path": "Runbooks/Deploy.md"})
        assert note["content"].startswith("# Deploy") and note["truncated"] is False
        assert (await call("get_note", {"path": "Runbooks/Deploy"}))["path"] == "Runbooks/Deploy.md"
        assert (await call("get_note", {"path": "Analyses/latency.qmd"}))["content"].startswith("---")
        assert (await call("get_note", {"path": "Runbooks/inside-link.md"}))["content"].startswith("# Deploy")
        assert (await call("get_note", {"path": hits[0]["docid"]}))["path"] == "Runbooks/Deploy.md"  # qmd's #docid
        with pytest.raises(ToolFailed, match="no note has docid #000000"):
            await call("get_note", {"path": "#000000"})
        for path, message in [("../secret.md", "'..'"), (str(outside), "absolute"), ("leak.md", "outside the vault"),
                              ("/etc/passwd", "absolute"), ("..\\..\\etc\\passwd", "'..'"),
                              ("C:\\Windows\\win.ini", "absolute"), (".engram/journal.jsonl", "hidden"),
                              ("Runbooks/../../secret.md", "'..'"), ("Home.txt", ".md and .qmd"),
                              ("Nope.md", "no note"), ("", "vault-relative"), ("a\x00b.md", "vault-relative"),
                              ("config.md", "a symlink to '.git/config'")]:
            with pytest.raises(ToolFailed, match=message):
                await call("get_note", {"path": path})

    with_session(vault, body)


BAD_CALLS = [
    ("store_memory", {"importance": 0.5}, "content"),  # missing field
    ("store_memory", {"content": "x", "importance": "very"}, "importance"),  # wrong type
    ("store_memory", {"content": "   ", "importance": 0.5}, "content is empty"),
    ("store_memory", {"content": "x" * 1_000_000, "importance": 0.5}, "at most 100000 characters"),
    ("store_memory", {"content": "é" * 60_000, "importance": 0.5}, "over the 64 KB limit"),
    ("store_memory", {"content": "x", "importance": 0.5, "metadata": {"blob": "y" * 100_000}}, "metadata is over"),
    ("store_memory", {"content": "x", "importance": 0.5, "metadata": "not a dict"}, "metadata"),
    ("recall_memory", {"query": "q" * 1_000_000}, "at most 2000 characters"),
    ("recall_memory", {"query": "deploy", "top_k": "many"}, "top_k"),
    ("recall_memory", {"query": "deploy", "top_k": 0}, "greater than or equal to 1"),
    ("update_memory", {"memory_id": "mem-nope", "new_content": "x"}, "no memory with id 'mem-nope'"),
    ("update_memory", {"memory_id": "m" * 1_000_000, "new_content": "x"}, "at most 100 characters"),
    ("forget_memory", {"memory_id": "mem-nope"}, "no memory with id"),
    ("restore_memory", {}, "memory_id"),
    ("track_failure", {"error": "boom", "component": "api", "severity": "apocalyptic"}, "severity"),
    ("track_failure", {"error": "boom", "component": "api", "related_test_ids": "t1"}, "related_test_ids"),
    ("track_progress", {"feature": "x", "status": "done", "completion": "most"}, "completion"),
    ("track_progress", {"feature": "   ", "status": "done"}, "feature is empty"),
    ("session_handoff", {"summary": "s", "completed": ["x" * 5000]}, "at most 2000 characters"),
    ("search_notes", {"query": "deploy"}, "not compiled yet"),
    ("get_note", {"path": "x" * 1_000_000}, "at most 1000 characters"),
    ("no_such_tool", {}, "no_such_tool"),
]


def test_bad_input_is_a_tool_error_and_the_server_goes_on(vault, tmp_path):
    before = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(vault))

    async def body(call: Session) -> None:
        for name, args, message in BAD_CALLS:
            with pytest.raises(ToolFailed) as failed:
                await call(name, args)
            assert message in str(failed.value), (name, str(failed.value)[:300])
            assert len(str(failed.value)) < 2000  # a clear line, never the megabyte echoed back
            assert "\n" not in str(failed.value) and "pydantic" not in str(failed.value)  # one line, no dump
        assert (await call("store_memory", {"content": "Still serving", "importance": 0.5}))["action"] == "new"

    with_session(vault, body)
    assert sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(vault)) == before


def test_one_handler_answers_expected_failures_and_logs_the_rest(vault, caplog):
    memory = MemoryServer(vault, Settings(now=NOW), embedder=FakeEmbedder())

    def missing(_: Any) -> None:
        raise FileNotFoundError(2, "No such file or directory", "Notes/gone.md")

    def bug(_: Any) -> None:
        raise KeyError("boom")

    try:
        assert memory._run(id) == memory._run(id)  # one handle serves every call
        with pytest.raises(ToolError, match=r"^Notes/gone.md: No such file or directory$"):
            memory._run(missing)
        with caplog.at_level(logging.ERROR, logger="engram.serve"), pytest.raises(KeyError):
            memory._run(bug)
        assert "tool call failed" in caplog.text and "Traceback" in caplog.text and "boom" in caplog.text
    finally:
        memory.close()


OTHER_WRITER = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[2], sys.argv[3]]
from conftest import FakeEmbedder
from compiler.core.settings import Settings
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import store_memory
with VaultMemory(Path(sys.argv[1]), Settings(now="2026-11-30 12:00:00"), embedder=FakeEmbedder()) as memories:
    print(store_memory(memories, MemoryInput(content="zebra quartz harbour lantern", project="p"))["id"])
"""


def test_the_index_stays_open_between_calls_and_sees_another_process_writes(vault):
    from compiler.memory.input import MemoryInput
    from compiler.memory.vault import read_memories
    from compiler.memory.write import store_memory

    def index_now() -> Any:
        return memory._worker.submit(lambda: memory._memory._index).result()

    def nearest(m: Any) -> list[tuple[str, float]]:
        read_memories(m)  # what every operation starts with
        return m.index().nearest(m.embedder().embed(["zebra quartz harbour lantern"])[0], 1)

    memory = MemoryServer(vault, Settings(now=NOW), embedder=FakeEmbedder())
    try:
        memory._run(lambda m: store_memory(m, MemoryInput(content="the deploy runs on fridays", project="p")))
        first = index_now()
        memory._run(lambda m: store_memory(m, MemoryInput(content="rollbacks use the blue slot", project="p")))
        memory._run(nearest)
        assert first is not None and index_now() is first  # its own writes and reads: kept open
        other = subprocess.run([sys.executable, "-c", OTHER_WRITER, str(vault), str(Path(__file__).parents[1]),
                                str(Path(__file__).parents[2])], capture_output=True, text=True, check=True)
        # The flat vector store reloads its row map when another process wrote: their vector is
        # seen through the same open index.
        assert json.loads(memory._run(nearest))[0][0] == other.stdout.strip()
        assert index_now() is first
    finally:
        memory.close()


def test_maintenance_runs_at_start(vault):
    memory = MemoryServer(vault, Settings(now=NOW), embedder=FakeEmbedder())
    try:
        memory.start_maintenance()
        for _ in range(100):
            if (vault / ".engram/cache/maintenance.json").is_file():
                break
            asyncio.run(asyncio.sleep(0.05))
        assert json.loads((vault / ".engram/cache/maintenance.json").read_text())["at"] == NOW
    finally:
        memory.close()


def test_the_checkpoint_after_a_maintenance_waits_for_a_pause_in_the_calls(vault, monkeypatch):
    """The fold checkpoint's save is one piece (~0.8 s at 100,000 memories): it waits until no call
    has come for IDLE s, and a server that closes first leaves it to its handle's close."""
    from compiler.mcp_server import worker

    saved: list[float] = []
    monkeypatch.setattr(worker, "_save_checkpoint", lambda memory: saved.append(worker.time.monotonic()))
    monkeypatch.setattr(worker, "IDLE", 0.3)
    memory = MemoryServer(vault, Settings(now=NOW), embedder=FakeEmbedder())
    try:
        memory._last_call = called = worker.time.monotonic()  # a call just came
        memory._save_when_idle()
        assert len(saved) == 1 and saved[0] >= called + 0.3
        memory._stop.set()  # closing: no save from the maintenance thread
        memory._last_call = worker.time.monotonic()
        memory._save_when_idle()
        assert len(saved) == 1
    finally:
        memory.close()


def test_the_model_loads_in_the_background_before_any_tool_call(vault, monkeypatch):
    loaded = []
    monkeypatch.setattr("compiler.memory.vault.load_embedder", lambda model: loaded.append(model) or FakeEmbedder())
    memory = MemoryServer(vault, Settings(now=NOW))
    try:
        memory.start_warmup()
        memory._worker.submit(lambda: None).result(timeout=60)  # the worker runs in order: the warm-up is done
        assert loaded == [Settings().model]
        asyncio.run(memory.call(lambda m: m.embedder().identity))  # the first call finds it loaded
        assert loaded == [Settings().model]
    finally:
        memory.close()


# -- engram setup ----------------------------------------------------------------------------------

def test_setup_creates_files_once_and_prints_the_config(make_vault):
    vault = make_vault({".obsidian/app.json": "{}"})
    result = CliRunner().invoke(main, catch_exceptions=False, args=["setup", str(vault), "--skip-model-check", "--project", "web", "--json"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["created"] == [".engram/", ".engram/.gitignore", "engram.toml", "raw/", "wiki/", "wiki/AGENTS.md"]
    assert load_settings(vault) == Settings()  # the engram.toml written is all comments: every default
    assert shown["claude_code"].startswith("claude mcp add engram -- ")
    assert shown["claude_code"].endswith(f"serve --vault {vault} --project web")
    server = shown["cursor"]["mcpServers"]["engram"]
    assert server["args"] == ["serve", "--vault", str(vault), "--project", "web"]
    assert Path(server["command"]).name == "engram"
    assert all(tool in shown["rules"] for tool in ("recall_memory", "store_memory", "update_memory"))
    (vault / "engram.toml").write_text('out = "generated"\n')
    again = CliRunner().invoke(main, catch_exceptions=False, args=["setup", "--vault", str(vault), "--skip-model-check", "--json"])
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["created"] == [] and (vault / "engram.toml").read_text() == 'out = "generated"\n'


def test_setup_makes_a_plain_folder_a_vault(tmp_path):
    folder = tmp_path / "new notes"
    folder.mkdir()
    result = CliRunner().invoke(main, catch_exceptions=False, args=["setup", "--vault", str(folder), "--skip-model-check", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["model"] == {"skipped": True} and (folder / ".engram/.gitignore").is_file()
    assert json.loads(result.stdout)["claude_code"].endswith(f"--vault '{folder.resolve()}'")  # quoted for the shell


def test_setup_human_output_goes_to_stderr(make_vault):
    vault = make_vault({".obsidian/app.json": "{}"})
    result = CliRunner().invoke(main, catch_exceptions=False, args=["setup", str(vault), "--skip-model-check"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "claude mcp add engram" in result.stderr and "mcpServers" in result.stderr and "CLAUDE.md" in result.stderr


def test_setup_without_a_vault_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ENGRAM_VAULT", raising=False)
    result = CliRunner().invoke(main, catch_exceptions=False, args=["setup", "--skip-model-check"])
    assert result.exit_code == 2 and "engram setup ~/vault" in result.stderr
    assert result.stderr.startswith("engram: no vault found") and len(result.stderr.splitlines()) == 1
    missing = CliRunner().invoke(main, catch_exceptions=False, args=["setup", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and missing.stderr == f"engram: no such folder: {tmp_path / 'nope'}\n"


@pytest.mark.integration
def test_setup_checks_the_model_loads_offline(make_vault):
    vault = make_vault({".obsidian/app.json": "{}"})
    result = CliRunner().invoke(main, catch_exceptions=False, args=["setup", str(vault), "--json"])
    assert result.exit_code == 0, result.stderr
    model = json.loads(result.stdout)["model"]
    assert result.exit_code == 0 and model["dimension"] == 384 and model["identity"].startswith("all-MiniLM-L6-v2@")


# -- integration: `engram serve` as a subprocess, the real model ----------------------------------

def serve(vault: Path, log: Path, *extra: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    params = StdioServerParameters(command=ENGRAM, args=["serve", "--vault", str(vault), *extra], env=env)
    return stdio_client(params, errlog=log.open("w"))


def journal_ops(vault: Path) -> list[str]:
    lines = (vault / ".engram/journal.jsonl").read_text().splitlines()
    return [json.loads(line)["op"] for line in lines if line.strip()]


@pytest.mark.integration
def test_stdio_end_to_end(vault, tmp_path):
    async def run() -> None:
        async with serve(vault, tmp_path / "server.log", "--project", "web") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                assert len((await session.list_tools()).tools) == len(CONTRACT)
                c = lambda name, args: call(session, name, args)
                saved = await c("store_memory", {"content": "The user prefers TypeScript for new services",
                                                 "importance": 0.8})
                assert saved["action"] == "new" and saved["project"] == "web"
                hits = await c("recall_memory", {"query": "which language for a new service?"})
                assert hits[0]["id"] == saved["id"]
                failure = await c("track_failure", {"error": "Webhook retries exhausted", "component": "payments",
                                                    "severity": "major", "fix": "raise the retry budget"})
                progress = await c("track_progress", {"feature": "webhooks-v2", "status": "blocked",
                                                      "blockers": ["vendor sandbox down"]})
                await c("session_handoff", {"summary": "Webhooks v2 blocked on the vendor",
                                            "blocked": ["vendor sandbox down"], "next_steps": ["retry Monday"]})
                assert (await c("load_handoff", {}))["fields"]["next_steps"] == ["retry Monday"]
                stats = await c("memory_stats", {})
                assert stats["live"] == 4 and stats["failures_by_component"] == {"payments": 1}
                assert stats["active_features"][0]["id"] == progress["id"] and failure["action"] == "new"
                assert (await c("forget_memory", {"memory_id": saved["id"]}))["action"] == "forgotten"
                assert saved["id"] not in [h["id"] for h in await c("recall_memory", {"query": "TypeScript"})]
                assert (await c("restore_memory", {"memory_id": saved["id"]}))["live"] is True
                # Another process stores a memory: the server finds it by meaning (its vector), not only words.
                added = subprocess.run([ENGRAM, "memory", "add", "Staging runs PostgreSQL 16 on a dedicated host",
                                        "--project", "web", "--vault", str(vault), "--json"],
                                       capture_output=True, text=True, check=True)
                other = json.loads(added.stdout)["id"]
                hits = await c("recall_memory", {"query": "what database engine does the test environment use?"})
                assert other in [h["id"] for h in hits] and next(h for h in hits if h["id"] == other)["cosine"] > 0.3
                with pytest.raises(ToolFailed, match="no memory with id"):
                    await c("restore_memory", {"memory_id": "mem-unknown"})
                assert (await c("memory_stats", {}))["live"] == 5  # still serving after the error

    asyncio.run(run())
    assert journal_ops(vault).count("save") == 5


@pytest.mark.integration
def test_storing_while_a_compile_runs_loses_nothing(make_vault, tmp_path):
    notes = {f"Notes/topic-{i:02d}.md": f"# Topic {i}\n\n" + "\n\n".join(
        f"## Part {j}\n\nParagraph {j} of topic {i} talks about subject {i * 7 + j} in some detail." for j in range(4))
        for i in range(40)}
    vault = make_vault({".obsidian/app.json": "{}", **notes})
    facts = ["The billing service is written in Go", "Marta owns the data warehouse",
             "Staging deploys happen every Tuesday at noon", "The mobile app uses React Native",
             "Postgres autovacuum was tuned in October", "Webhook retries back off exponentially",
             "The office Wi-Fi password rotates monthly", "Invoices are archived to S3 after 90 days",
             "The search cluster has three Elasticsearch nodes", "Luis prefers pairing over code review",
             "Feature flags live in Unleash", "The quarterly planning meeting is in Lisbon"]

    async def run() -> None:
        async with serve(vault, tmp_path / "server.log") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await call(session, "memory_stats", {})  # the server is up
                compile_run = subprocess.Popen([ENGRAM, "compile", str(vault), "--json"], stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)
                answers = [await call(session, "store_memory", {"content": fact, "importance": 0.6})
                           for fact in facts]
                out, err = compile_run.communicate(timeout=300)
                assert compile_run.returncode == 0, err
                assert json.loads(out)["notes"] == 40
                assert {a["action"] for a in answers} == {"new"}
                stats = await call(session, "memory_stats", {})
                assert stats["live"] == len(facts)
                found = await call(session, "recall_memory", {"query": facts[3]})
                assert found[0]["id"] == answers[3]["id"]

    asyncio.run(run())
    assert journal_ops(vault).count("save") == len(facts)
    again = subprocess.run([ENGRAM, "compile", str(vault), "--json"], capture_output=True, text=True, check=True)
    assert json.loads(again.stdout)["memories"]["live"] == len(facts)
    check = subprocess.run([ENGRAM, "check", str(vault)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# -- the contract of mcp-engram 0.5 and the Go engram CLI (issue 12, items 8 and 9) ---------------

def test_server_reports_our_version_not_the_sdks(vault):
    import importlib.metadata

    memory = MemoryServer(vault, Settings(now=NOW), embedder=FakeEmbedder())

    async def run() -> Any:
        async with create_connected_server_and_client_session(build_server(memory)) as session:
            return session  # initialize ran inside the context

    try:
        server = build_server(memory)
        options = server._mcp_server.create_initialization_options()
        assert options.server_version == importlib.metadata.version("engram-vault-compiler")
        assert options.server_version != importlib.metadata.version("mcp")
    finally:
        memory.close()


def test_what_mcp_engram_accepted_is_accepted_with_a_warning(vault):
    async def body(call: Session) -> None:
        saved = await call("store_memory", {"content": "Releases ship on Tuesdays", "importance": 1.2,
                                            "category": "decision"})
        assert saved["action"] == "new" and saved["category"] == "strategy"
        assert any("importance 1.2" in w for w in saved["warnings"]) and any("'decision'" in w for w in saved["warnings"])
        odd = await call("store_memory", {"content": "The office plant is a fern", "importance": -3, "category": "gossip"})
        assert odd["category"] == "fact" and len(odd["warnings"]) == 2
        plain = await call("store_memory", {"content": "Deploys need a green build", "importance": 0.5})
        assert "warnings" not in plain
        progress = await call("track_progress", {"feature": "login", "status": "in_progress", "completion": 42.6})
        assert progress["warnings"] == ["completion 42.6 stored as 43"]
        assert (await call("memory_stats", {}))["active_features"][0]["completion"] == 43
        await call("track_progress", {"feature": "login", "status": "review", "completion": 150})
        assert (await call("memory_stats", {}))["active_features"][0]["completion"] == 100
        hits = await call("recall_memory", {"query": "release day"})
        numeric = hits[0]["id"]
        assert (await call("update_memory", {"memory_id": numeric, "new_content": "Releases ship on Wednesdays"}))[
            "content"] == "Releases ship on Wednesdays"
        with pytest.raises(ToolFailed, match=r"no memory with id '17'"):
            await call("forget_memory", {"memory_id": 17})  # a number is an id too: here, an unknown one
        with pytest.raises(ToolFailed) as failed:
            await call("store_memory", {"content": "x", "importance": "very"})
        assert str(failed.value).startswith("store_memory: importance: ") and "\n" not in str(failed.value)

    with_session(vault, body, project="web")


def test_go_engram_tool_aliases(vault):
    async def body(call: Session) -> None:
        first = await call("mem_save", {"title": "Use pg advisory locks", "session_id": "sess-9", "type": "decision"})
        assert first["action"] == "new"  # content and project are optional, as in the newer Go contract
        shown = await call("mem_get_observation", {"id": first["id"]})
        assert shown["session_id"] == "sess-9" and shown["content"] == "Use pg advisory locks"
        await call("mem_save", {"title": "Cron", "content": "Cron jobs take lock 42 first", "session_id": "sess-9"})
        third = await call("mem_save", {"title": "Backups", "content": "Backups run nightly at 02:00"})
        updated = await call("mem_update", {"id": first["id"], "content": "Use pg_advisory_lock(42) for cron"})
        assert updated["content"] == "Use pg_advisory_lock(42) for cron" and updated["history"]
        line = await call("mem_timeline", {"observation_id": third["id"], "before": 1})
        assert line["focus"]["id"] == third["id"] and [e["title"] for e in line["before"]] == ["Cron"]
        assert (await call("mem_stats", {}))["live"] == 3
        gone = await call("mem_delete", {"id": first["id"], "hard_delete": True})
        assert gone["action"] == "forgotten" and "hard_delete is not offered" in gone["warnings"][0]
        assert (await call("mem_session_summary", {"content": "Goal: locks. Done."}))["action"] == "new"

    with_session(vault, body)


def test_a_maintenance_the_client_leaves_before_is_not_a_failure_and_writes_nothing(vault, caplog):
    """The client disconnects while the start's maintenance still waits for the worker: the server
    says it did not run (no "maintenance failed: " with nothing after it) and wrote nothing."""
    import threading

    memory = MemoryServer(vault, Settings(now=NOW), embedder=FakeEmbedder())
    busy, release = threading.Event(), threading.Event()
    memory._worker.submit(lambda: (busy.set(), release.wait(30)))  # a tool call still being answered
    assert busy.wait(10)
    with caplog.at_level(logging.INFO, logger="engram.serve"):
        memory.start_maintenance()
        for _ in range(200):
            if memory._maintenance is not None:
                break
            asyncio.run(asyncio.sleep(0.01))
        closing = threading.Thread(target=memory.close)
        closing.start()
        release.set()
        closing.join(30)
        for _ in range(200):  # the maintenance thread logs once its cancelled wait returns
            if any("maintenance" in r.getMessage() for r in caplog.records):
                break
            asyncio.run(asyncio.sleep(0.01))
    said = [r.getMessage() for r in caplog.records if "maintenance" in r.getMessage()]
    assert said == ["maintenance: not run, the server is closing (it runs at the next start)"], said
    assert not (vault / ".engram/cache/maintenance.json").exists()


def test_a_failed_maintenance_says_what_failed():
    from compiler.mcp_server.worker import _reason

    assert _reason(KeyError("obs-1")) == "KeyError: 'obs-1'"
    assert _reason(ToolError("journal.jsonl: disk full")) == "journal.jsonl: disk full"
    assert _reason(RuntimeError()).startswith("RuntimeError (no message")


@pytest.mark.integration
def test_a_client_that_leaves_after_listing_tools_gets_no_empty_failure(vault, tmp_path):
    async def run() -> None:
        async with serve(vault, tmp_path / "server.log") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()

    asyncio.run(run())
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert not re.search(r"maintenance failed: *$", log, re.MULTILINE), log
    assert "Traceback" not in log, log
    checked = subprocess.run([ENGRAM, "check", "--vault", str(vault)], capture_output=True, text=True)
    assert "Traceback" not in checked.stderr and "journal" not in checked.stdout.lower(), checked.stdout
