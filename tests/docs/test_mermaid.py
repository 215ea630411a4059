"""Every Mermaid block the project writes or documents parses with Mermaid itself.

The parser is the `mermaid` npm package (pinned in tests/mermaid/package.json, with jsdom for the
DOM it wants at import), run by Node: the same grammar Obsidian renders with. The blocks come from
the README and docs, the committed example pages, and pages rendered from names that try to break
a chart (quotes, colons, `#`, `%%`, newlines).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from compiler.core.errors import BuildWarning
from compiler.notes.records import Note
from compiler.render.notes import VaultView, render_note_pages, template_environment
from tests.conftest import EXAMPLE_VAULT, ROOT

CHECKER = ROOT / "tests" / "mermaid"  # package.json, its lockfile and parse.mjs: what is committed
# Where the npm packages are installed: beside the venv, not in tests/, so third-party JavaScript
# never sits among the project's tests (and `make clean` removes it with the venv).
INSTALLED = ROOT / ".venv" / "mermaid"
CHECKER_FILES = ("package.json", "package-lock.json", "parse.mjs")
BLOCK = re.compile(r"^```mermaid[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
DOCUMENTED = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def mermaid_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


@pytest.fixture(scope="session")
def mermaid_errors():
    """Returns a function: Mermaid sources → one error message per source ("" when it parses)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.fail("Node.js 20+ and npm are needed to check Mermaid blocks (tests/mermaid): install them")
    INSTALLED.mkdir(parents=True, exist_ok=True)
    stale = any(not (INSTALLED / name).is_file() or (INSTALLED / name).read_bytes() != (CHECKER / name).read_bytes()
                for name in CHECKER_FILES)
    for name in CHECKER_FILES:
        shutil.copyfile(CHECKER / name, INSTALLED / name)
    if stale or not (INSTALLED / "node_modules" / "mermaid").is_dir():  # `make install` does this; a bare pytest too
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=INSTALLED, check=False,
                              capture_output=True, text=True)
        if done.returncode:
            pytest.fail(f"npm ci in {INSTALLED} failed: {done.stderr.strip()[-500:]}")

    def errors(sources: list[str]) -> list[str]:
        done = subprocess.run([node, "parse.mjs"], cwd=INSTALLED, check=False, input=json.dumps(sources),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    return errors


def test_the_checker_rejects_a_broken_chart(mermaid_errors):
    # a node named `graph` is what broke the docs' flowcharts; a pie value must be a number
    assert [bool(e) for e in mermaid_errors(["graph TD\n  graph --> b", 'pie\n  "a" : x', "flowchart LR\n  a --> b"])] \
        == [True, True, False]


@pytest.mark.parametrize("page", DOCUMENTED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documented_charts_parse(mermaid_errors, page):
    blocks = mermaid_blocks(page.read_text(encoding="utf-8"))
    assert [(f"block #{i}", e) for i, e in enumerate(mermaid_errors(blocks)) if e] == []


def test_the_example_pages_charts_parse(mermaid_errors):
    blocks = [(p, b) for p in sorted((EXAMPLE_VAULT / "_engram").rglob("*.md"))
              for b in mermaid_blocks(p.read_text(encoding="utf-8"))]
    assert len(blocks) >= 4  # catalog, health, one per project
    errors = mermaid_errors([b for _, b in blocks])
    assert [(p.name, e) for (p, _), e in zip(blocks, errors) if e] == []


def test_charts_of_hostile_names_parse(mermaid_errors):
    folders = ['He said "hi"', "a: b", "#tag", "100%% sure", "semi;colon", "語義", "back\\slash"]
    notes = [Note(path=f"{folder}/n{i}.md", sha256="0" * 64, title=f"n{i}") for i, folder in enumerate(folders)]
    view = VaultView(notes, [], {}, [BuildWarning(notes[0].path, 1, "x", "io")])
    pages = render_note_pages(view, template_environment(None), "_engram")
    blocks = mermaid_blocks(pages["catalog.md"]) + mermaid_blocks(pages["health.md"])
    assert blocks and mermaid_errors(blocks) == [""] * len(blocks)
