"""Which backlinks pages a build may change, so the render digests only those (issue 29).

Digesting the inputs of every backlinks page cost 8.7 s of a compile after one edit at 100,000
notes (under cProfile). A backlinks page shows its note (path, title, aliases), the links into it
and out of it with the notes at both ends, and its related notes with their cosines. While the
vault holds the same note and attachment paths as the last build, and the pages are made the same
way (`render_mark`), every link of a note that was not edited resolves as it did, so a page can
show something new only when:

- its note was edited;
- an edited note links to it, before or after the edit (its incoming links moved);
- it links to an edited note, or shows one as related (that note's title or aliases may have moved);
- its related list moved.

Every other page keeps the digest the last build recorded for it; it is still stat'ed, so a page a
person edited or deleted is written again. Anything else (a path added, removed or renamed, other
templates, code or output folder, no neighbours saved by the last build) digests every page.
`tests/pipeline/test_incremental_note_pages.py` compares the pages with a full rebuild's over random edit histories.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence

from compiler.notes.links import VaultIndex, resolve_each
from compiler.notes.records import Note, ResolvedLink

def render_mark(pages_key: str, out: str, notes: Iterable[str], attachments: Iterable[str]) -> str:
    """Names how this build's note pages were made (templates and render code, output folder) and
    the paths links could resolve to: the next build reuses a page's digest only under the same mark."""
    paths = "\n".join([*sorted(notes), "", *sorted(attachments)])
    return hashlib.sha256(f"{pages_key}\n{out}\n{paths}".encode("utf-8")).hexdigest()


def notes_to_digest(last_mark: str, mark: str, last_notes: Mapping[str, Note], notes: Mapping[str, Note],
                    edited: Collection[str], links: Sequence[ResolvedLink], index: VaultIndex,
                    related_changed: Collection[str] | None, related_holding: Collection[str]) -> set[str] | None:
    """Returns the notes whose backlinks page may differ from the last build's, or None when every
    page must be digested (the mark moved, the notes are not the same paths, no related lists to
    compare with). `related_changed` names the notes whose related list moved (None: not known),
    `related_holding` those whose list holds an edited note (`compiler.pipeline.graph.Related`)."""
    if last_mark != mark or related_changed is None or last_notes.keys() != notes.keys():
        return None
    edited = set(edited)
    moved = set(edited)
    before = resolve_each([last_notes[p] for p in sorted(edited)], index)
    for link in [*before, *(l for l in links if l.source in edited or l.target in edited)]:
        moved.update((link.source, link.target))
    moved.update(related_changed)
    moved.update(related_holding)
    moved.discard("")  # a broken link's target
    return moved
