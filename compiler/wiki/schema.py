"""The wiki's schema page (`wiki/AGENTS.md`): what an agent reads first about the layout, the page
format and the rules. `engram setup` writes it; a person may edit it, and an edited one is never
overwritten: a new engram version refreshes only the text it wrote itself (its hash is recorded
in `.engram/wiki/schema.sha256`).
"""

from __future__ import annotations

import hashlib

from compiler.core.files import atomic_write
from compiler.wiki.layout import SCHEMA, WikiLayout

SCHEMA_TEXT = """\
# How this wiki works (for agents)

This vault is a knowledge base that you, the agent, write and maintain; the person reads it in
Obsidian. Engram (`engram serve`, MCP) keeps it linked, indexed and linted. Three layers:

- `{raw}/`: the sources, immutable. Add one with `ingest_source` (an article, a paper, a
  transcript); never edit a file there. A source with new bytes is a new version.
- `{wiki}/`: the pages, yours. One page per source summary (kind `source`), concept, entity,
  decision or synthesis. Write them only with `write_page` / `edit_page`, never by editing files.
- this page: the rules. The person may change it; follow their version.

## Page format

- Title = file name: link pages with `[[Title]]`. One subject per page; short sections.
- Frontmatter is written for you from the tool arguments: `kind`, `summary` (one line for the
  index), `sources` (the raw files the page draws on), `created`, `updated`, `revision`, `writer`.
- Every claim in a `source`, `concept`, `entity`, `decision` or `synthesis` page comes from a cited
  source (or memory). Say where sources disagree; do not pick silently.

## Workflows

1. Ingest: `ingest_source`, read it (`read_source`), write its summary page (kind `source`, citing
   it), then update the 5-15 concept and entity pages it touches (`read_page`, then `edit_page` with
   the revision you read), linking each to the summary. `index.md` and `log.md` update themselves.
2. Query: read the index first ([[{wiki}/index]], `{wiki}/index.md`), then the pages it points to
   (`read_page`), and `search_notes` for the rest. A good answer worth keeping: `file_answer`, citing the pages used.
3. Lint: `lint_wiki` after a batch of writes. Fix contradictions (or record both views with their
   sources), stale pages (a cited source has a newer version: re-read it), orphans (link them),
   missing pages (write them), uncited claims (cite or remove), duplicates (merge, then
   `move_page`).

## Rules

- Never write outside `{wiki}/`; never change `{raw}/`; never touch the person's own notes.
- An edit refused for its revision means someone changed the page: read it again, reapply.
- Memories (`recall_memory`) are the agents' notes; `promote_memories` turns a cluster of them
  into a page.
"""


def schema_text(layout: WikiLayout) -> str:
    return SCHEMA_TEXT.format(raw=layout.raw_name, wiki=layout.wiki_name)


def write_schema(layout: WikiLayout) -> list[str]:
    """Creates raw/, wiki/ and the schema page where missing (or the schema refreshed when it is
    still the text engram wrote); returns the vault-relative paths created or refreshed."""
    done = []
    for folder in (layout.raw, layout.wiki):
        if not folder.is_dir():
            folder.mkdir(parents=True)
            done.append(layout.relative(folder) + "/")
    target, record = layout.wiki / SCHEMA, layout.root / ".engram" / "wiki" / "schema.sha256"
    text = schema_text(layout).encode("utf-8")
    ours = record.read_text(encoding="utf-8").strip() if record.is_file() else ""
    current = hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else ""
    if target.is_file() and (current != ours or target.read_bytes() == text):
        return done  # the person's version (edited, or never ours), or already current
    atomic_write(target, text)
    atomic_write(record, (hashlib.sha256(text).hexdigest() + "\n").encode())
    return [*done, layout.relative(target)]
