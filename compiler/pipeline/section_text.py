"""What is embedded for a note's section, and the hash the caches key that text by.

A module of its own that needs nothing but hashlib: the build state saves each note's hashes with
it (compiler.pipeline.state_store), and neither reading nor saving a state imports the embed stage.
"""

from __future__ import annotations

import hashlib

from compiler.notes.records import Note


def section_text(note: Note, index: int) -> str:
    """Returns what is embedded for a section: the note's title gives every piece its context."""
    text = note.sections[index].text
    return text if text.startswith(note.title) else f"{note.title}\n{text}"


def note_hashes(note: Note) -> list[str]:
    """Returns the text hash of what is embedded for each section of `note` (the embedding cache's
    `text_hash`); a note read back from the build state has them without decoding its sections."""
    stored = getattr(note, "stored_hashes", None)
    if stored is not None:
        return list(stored)
    return [hashlib.sha256(section_text(note, i).encode("utf-8")).hexdigest() for i in range(len(note.sections))]
