"""Compile stages embed and index: section vectors (from the cache when it has them), then the keyword
and vector indexes brought in step with the notes."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.embed.embedder import (
    Embedder,
    has_token_vectors,
    load_embedder,
    model_identity,
)
from compiler.index import late_interaction
from compiler.index.cache import EmbeddingCache, embed_with_cache
from compiler.index.flat import FlatStore
from compiler.index.keywords import KeywordIndex, NoteRow, SectionRow
from compiler.index.token_cache import TokenVectorCache, Usage
from compiler.index.vector_index import open_vectors
from compiler.index.vectors import COLLECTION
from compiler.notes.records import Note
from compiler.pipeline.notes import Parsed
from compiler.pipeline.section_text import note_hashes, section_text
from compiler.pipeline.vault_paths import VaultPaths

if TYPE_CHECKING:
    from compiler.index.vectors import VectorStore


@dataclass(frozen=True)
class Model:
    """The embedding model of a build, loaded only when a text is not in the cache."""

    name: str  # the `model` setting
    identity: str  # what cached vectors are keyed by: changes whenever the vectors would
    given: Embedder | None  # a model the caller already loaded

    def load(self) -> Embedder:
        """Returns the model the caller gave, else the one the setting names (loaded once per process)."""
        return self.given or load_embedder(self.name)

    @property
    def tokens(self) -> bool:
        """Whether the model gives token vectors, known without loading it."""
        return late_interaction.supports(self.given) if self.given else has_token_vectors(self.name)


def choose_model(name: str, given: Embedder | None) -> Model:
    """Returns the build's model: `given` when there is one, else the `name` setting (not loaded yet)."""
    return Model(name, given.identity if given else model_identity(name), given)


@dataclass(frozen=True)
class Embedded:
    """The embed stage's product."""

    vectors: dict[str, np.ndarray]  # section id ("path#ordinal") → vector, for every section
    count: int  # sections embedded in this run (the rest came from the cache)


def embed_sections(cache_file: Path, notes: Mapping[str, Note], model: Model, tick: Callable[[int], None]) -> Embedded:
    """Returns a vector for every section of `notes`; only texts not in the cache are embedded.

    A note moved to another folder embeds the same texts (the cache has them); a rename that
    changes its title (the file name, when it has no other) embeds them again, since every
    section's text starts with the title: `vsearch` finds the note by its new name.
    """
    ids = [f"{p}#{i}" for p in sorted(notes) for i in range(len(notes[p].sections))]
    texts = section_texts(notes)
    cache = EmbeddingCache(cache_file)
    tokens = TokenVectorCache(cache_file) if model.tokens else None
    try:
        # Token vectors (for hybrid search's late-interaction pass) and sentence vectors come from
        # one forward pass; the sentence vectors of those texts are then found in the cache.
        count = late_interaction.cache_token_vectors(texts, tokens, cache, model.load, model.identity, tick) if tokens else 0
        vectors, embedded = embed_with_cache(texts, model.load, model.identity, cache, tick)
    finally:
        cache.close()
        if tokens:
            tokens.close()
    return Embedded(dict(zip(ids, vectors)), count + embedded)


def section_texts(notes: Mapping[str, Note]) -> list[str]:
    """Returns the embedded text of every section of `notes`, by path and ordinal."""
    return [section_text(notes[p], i) for p in sorted(notes) for i in range(len(notes[p].sections))]


def section_hashes(notes: Mapping[str, Note]) -> Iterator[str]:
    """Yields `text_hash` of each of `section_texts(notes)`: what the caches key them
    by. A note read back from the build state has them in its head (compiler.pipeline.state_store):
    its sections are not decoded for them."""
    for path in sorted(notes):
        yield from note_hashes(notes[path])


def compact_token_vectors(cache_file: Path, model: Model, hashes: Iterable[str]) -> Usage | None:
    """Rewrites the token-vector file without the matrices of texts no longer in use (`hashes`:
    the text hashes of every note section and live memory) when those take most of it: replaced,
    merged, forgotten or edited texts stay there otherwise (compiler.index.token_cache). Returns
    what it found; None when the model keeps no token vectors."""
    if not model.tokens:
        return None
    tokens = TokenVectorCache(cache_file)
    try:
        return tokens.compact({model.identity: set(hashes)})
    finally:
        tokens.close()


class SectionVectors(Mapping[str, np.ndarray]):
    """Section id → vector, read (or embedded) for the notes a build changed, and for every other
    note only when a stage asks for one of theirs (a full rebuild, an index found out of step).

    After one edit of a 10,000-note vault nothing needs the other notes' vectors: the indexes
    rewrite the changed notes' rows, the related notes come from their saved means.
    """

    def __init__(self, cache_file: Path, notes: Mapping[str, Note], stale: Collection[str], model: Model,
                 tick: Callable[[int], None]) -> None:
        self._args = cache_file, notes, model
        first = embed_sections(cache_file, {p: notes[p] for p in stale if p in notes}, model, tick)
        self._vectors, self.embedded = first.vectors, first.count  # embedded: texts embedded, not cached
        self._complete = len(first.vectors) == sum(n.section_count for n in notes.values())

    def _everything(self) -> dict[str, np.ndarray]:
        if not self._complete:
            cache_file, notes, model = self._args
            rest = embed_sections(cache_file, notes, model, lambda _: None)
            self._vectors, self.embedded, self._complete = rest.vectors, self.embedded + rest.count, True
        return self._vectors

    def __getitem__(self, key: str) -> np.ndarray:
        found = self._vectors.get(key)
        return found if found is not None else self._everything()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything())


def update_indexes(paths: VaultPaths, chroma_url: str, parsed: Parsed, vectors: Mapping[str, np.ndarray], *,
                   full: bool) -> None:
    """Brings the keyword and vector indexes in step: rewrites changed notes, drops removed ones.

    `full` (the last build cannot be reused) rebuilds both whole, and so does an index whose size
    disagrees with the last build's notes (a crash mid-build, a deleted folder). It is compared
    with the sections the index held (`parsed.indexed`), not the vault's new count: an edit that
    adds or drops a heading rewrote every note's rows and vectors (and Chroma's mirror whole).
    """
    expected = parsed.sections
    keyword = KeywordIndex(paths.fts)
    # In a full build every note is stale (it starts from an empty state); said here, `full` stands on its own.
    stale = sorted(parsed.notes) if full else sorted(set(parsed.changed) | set(parsed.removed))
    try:
        # With a Chroma server, always compare its count: it may be new, emptied, or another server.
        flat = FlatStore(paths.cache, COLLECTION)
        local_vectors = not chroma_url and flat.count() == expected
        flat.close()
        if not stale and keyword.count() == expected and local_vectors:
            return  # nothing changed: do not even import Chroma
        store = open_vectors(paths.cache, chroma_url, COLLECTION)
        if full or keyword.count() != parsed.indexed or store.count() != parsed.indexed:
            keyword.reset()
            store.reset()
            stale, deleted = sorted(parsed.notes), []
        else:
            deleted = stale
        _rewrite(keyword, store, deleted, [parsed.notes[p] for p in stale if p in parsed.notes], vectors)
        store.close()
    finally:
        keyword.close()


def _rewrite(keyword: KeywordIndex, store: VectorStore | FlatStore, deleted: Sequence[str], fresh: Sequence[Note],
             vectors: Mapping[str, np.ndarray]) -> None:
    """Drops the `deleted` notes from both indexes and writes the `fresh` ones (sorted by path)."""
    keyword.replace_paths(deleted, [NoteRow(n.path, n.sha256, n.title, " ".join(n.tags)) for n in fresh],
                          _section_rows(fresh))
    store.delete_paths(deleted)
    ids = [f"{n.path}#{s.ordinal}" for n in fresh for s in n.sections]
    if ids:
        store.add(ids, np.vstack([vectors[i] for i in ids]), [s.text for n in fresh for s in n.sections],
                  [_metadata(n, s.ordinal) for n in fresh for s in n.sections])


def _section_rows(notes: Sequence[Note]) -> list[SectionRow]:
    return [SectionRow(n.path, s.ordinal, s.line, n.title + " " + " ".join(n.aliases), s.heading, s.text,
                       " ".join(n.tags)) for n in notes for s in n.sections]


def _metadata(note: Note, ordinal: int) -> dict[str, Any]:
    section = note.sections[ordinal]
    # Chroma rejects empty lists and non-scalar values: tags travel as one space-padded string.
    return {"path": note.path, "ordinal": ordinal, "line": section.line, "title": note.title,
            "tags": f" {' '.join(note.tags)} " if note.tags else " "}
