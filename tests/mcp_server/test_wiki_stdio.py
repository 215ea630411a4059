"""The LLM-owned wiki end to end, as an agent drives it: `engram serve` over stdio with a real MCP
client and the real model, then `engram compile`, `engram lint` and `engram check` as a person runs
them. Ingest three sources, write five pages citing them, lose nothing to a stale revision, compile,
and lint finds the planted contradiction, the orphan, the stale page and the missing concept page.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

import pytest
from mcp import ClientSession

from tests.mcp_server.test_mcp import ENGRAM, ToolFailed, call, serve

pytestmark = pytest.mark.integration

DEPLOYS = "# Deploy handbook\n\nWe deploy the payments service blue-green on Fly.io. A deploy waits for the " \
          "health check before traffic moves.\n"
FLAGS = "<html><head><title>Flag policy</title></head><body><h1>Flags</h1><p>Feature flags are enabled in " \
        "production for every new checkout path.</p><script>steal()</script></body></html>"
DATABASE_V1 = "# Database notes\n\nThe payments service runs PostgreSQL 15.\n"
DATABASE_V2 = "# Database notes\n\nThe payments service runs PostgreSQL 16 since the upgrade.\n"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENGRAM, *args], capture_output=True, text=True, check=False)


def test_an_agent_builds_and_lints_a_wiki_over_stdio(make_vault, tmp_path):
    vault = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n\nMy own note.\n",
                        "inbox/database.md": DATABASE_V1})
    assert run("setup", str(vault), "--skip-model-check").returncode == 0
    home = (vault / "Home.md").read_bytes()

    async def agent() -> None:
        async with serve(vault, tmp_path / "server.log") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                c = lambda name, args: call(session, name, args)  # noqa: E731
                deploys = await c("ingest_source", {"content": DEPLOYS, "name": "deploys.md",
                                                    "origin": "https://example.com/deploys"})
                flags = await c("ingest_source", {"content": FLAGS, "name": "flags.html"})
                database = await c("ingest_source", {"path": "inbox/database.md"})
                again = await c("ingest_source", {"content": DEPLOYS, "name": "deploys.md"})
                assert again["duplicate"] and again["source"]["text"] == deploys["source"]["text"]
                assert (vault / deploys["source"]["file"]).read_text() == DEPLOYS  # byte for byte
                assert "steal" not in (vault / flags["source"]["text"]).read_text()
                d, f, db = (s["source"]["text"] for s in (deploys, flags, database))

                await c("write_page", {"title": "Deploy handbook", "kind": "source", "sources": [d],
                                       "summary": "How deploys run", "body": "Deploys are blue-green on Fly.io and "
                                       "wait for the health check. See [[Feature flags]] and [[Canary release]]."})
                flag_page = await c("write_page", {"title": "Feature flags", "kind": "concept", "sources": [f],
                                                   "body": "Feature flags are enabled in production. Used with "
                                                           "[[Deploy handbook]]."})
                await c("write_page", {"title": "Release checklist", "kind": "decision", "sources": [d, f],
                                       "body": "Feature flags are disabled in production. Plan a [[Canary release]] "
                                               "first. Back to [[Deploy handbook]]."})
                await c("write_page", {"title": "Glossary", "kind": "note", "body": "Blue-green: two fleets."})
                db_page = await c("write_page", {"title": "Payments database", "kind": "entity", "sources": [db],
                                                 "links": ["Deploy handbook"],
                                                 "body": "The payments service runs PostgreSQL 15."})
                assert db_page["path"] == "wiki/entities/Payments database.md"

                # Two agents read revision 1; the first edit lands, the second is refused and nothing is lost.
                read_once = await c("read_page", {"page": "Feature flags"})
                assert read_once["revision"] == flag_page["revision"] == 1
                first = await c("edit_page", {"page": "Feature flags", "expected_revision": 1,
                                              "section": "Rollout", "section_body": "Flags roll out per region."})
                assert first["revision"] == 2
                with pytest.raises(ToolFailed, match="at revision 2, not 1"):
                    await c("edit_page", {"page": "Feature flags", "expected_revision": 1, "body": "overwritten"})
                assert "Flags roll out per region." in (await c("read_page", {"page": "Feature flags"}))["body"]

                for hostile in ("../../x", "raw/evil", "a/b"):
                    with pytest.raises(ToolFailed, match="names a path"):
                        await c("write_page", {"title": hostile, "body": "x"})
                with pytest.raises(ToolFailed, match="inside the vault only"):
                    await c("ingest_source", {"path": "../outside.md"})

                time.sleep(1.1)  # the new version is ingested after the page's `updated`, to the second
                (vault / "inbox/database.md").write_text(DATABASE_V2)
                newer = await c("ingest_source", {"path": "inbox/database.md"})
                assert newer["replaces"] == db

                found = await c("lint_wiki", {})
                _check_lint(found)
                answer = await c("file_answer", {"question": "How do we ship a risky payments change?",
                                                 "answer": "Deploy blue-green behind a feature flag.",
                                                 "pages": ["Deploy handbook", "Feature flags"]})
                assert answer["path"].startswith("wiki/syntheses/") and len(answer["based_on"]) == 2
                synthesis = await c("read_page", {"page": answer["path"]})
                assert set(synthesis["sources"]) == {d, f} and "[[wiki/concepts/Feature flags|" in synthesis["body"]

    asyncio.run(agent())
    index = (vault / "wiki/index.md").read_text()
    assert "[[wiki/syntheses/How do we ship a risky payments change|" in index and index.count("\n- [[wiki/") == 6
    log = (vault / "wiki/log.md").read_text()
    assert log.count("] ingest | ") == 4 and log.count("] lint | ") == 1 and "] edit | Feature flags" in log

    compiled = run("compile", str(vault), "--json")
    assert compiled.returncode == 0, compiled.stderr
    report = json.loads(compiled.stdout)
    broken = [w for w in report["warnings"] if w["kind"] == "broken-link"]
    assert {w["file"] for w in broken} == {"wiki/sources/Deploy handbook.md",
                                           "wiki/decisions/Release checklist.md"}  # only [[Canary release]]
    health = (vault / "_engram/health.md").read_text()
    assert "## Wiki lint" in health and "contradiction" in health

    hits = json.loads(run("search", "--vault", str(vault), "feature flags production", "--json", "-n", "10").stdout)
    assert {"wiki", "raw"} <= {h["layer"] for h in hits}
    only_wiki = json.loads(run("query", "--vault", str(vault), "feature flags", "--layer", "wiki", "--json").stdout)
    assert only_wiki and {h["layer"] for h in only_wiki} == {"wiki"}

    second = run("compile", str(vault), "--json")
    assert second.returncode == 0 and json.loads(second.stdout)["written"] == [], second.stderr
    assert run("check", str(vault)).returncode == 0
    linted = run("lint", str(vault), "--json", "--strict")
    assert linted.returncode == 1  # findings: --strict fails the hook
    _check_lint(json.loads(linted.stdout))
    assert (vault / "Home.md").read_bytes() == home  # the person's note is never written


def _check_lint(found: dict[str, Any]) -> None:
    kinds = {(f["kind"], f["file"]) for f in found["findings"]}
    # The finding sits on the later-updated page of the two, and the edit of Feature flags may land
    # in the same second as the checklist's write or the next: the pair is what must be found.
    contradictions = [{f["file"], *f["related"]} for f in found["findings"] if f["kind"] == "contradiction"]
    assert {"wiki/decisions/Release checklist.md", "wiki/concepts/Feature flags.md"} in contradictions, found
    assert ("orphan", "wiki/Glossary.md") in kinds
    assert ("stale", "wiki/entities/Payments database.md") in kinds
    missing = [f for f in found["findings"] if f["kind"] == "missing-page"]
    assert [m["message"].split("”")[0].lstrip("“") for m in missing] == ["Canary release"]
    assert ("orphan", "wiki/concepts/Feature flags.md") not in kinds  # linked from the handbook
