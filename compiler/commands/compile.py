"""The spine: `compile_vault` runs the stages top to bottom and passes plain data between them.

scan → parse → links → embed → index → graph → render → write. Each stage lives in its own
module and knows nothing of the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compiler.commands.build_state import BuildState, parser_fingerprint, previous_build, save_state
from compiler.commands.compile_memories import MemoryStage, compile_memories
from compiler.commands.vault_paths import VaultPaths
from compiler.core.errors import BuildWarning
from compiler.core.files import atomic_write, write_pages
from compiler.core.lock import writer_lock
from compiler.core.settings import Settings
from compiler.index.cache import EmbeddingCache, embed_with_cache
from compiler.index.embedder import Embedder, load_embedder, model_identity
from compiler.index.keywords import KeywordIndex, NoteRow, SectionRow
from compiler.notes.graph import build_graph, graph_json, semantic_neighbours
from compiler.notes.links import resolve_links
from compiler.notes.parse import parse_note
from compiler.notes.records import Note, ResolvedLink
from compiler.notes.scan import scan_vault
from compiler.render.notes import VaultView, render_note_pages, template_environment

Tick = Callable[[int], None]
Progress = Callable[[str, int], Any]  # (label, total) → context manager yielding a Tick


@contextmanager
def no_progress(label: str, total: int) -> Iterator[Tick]:
    yield lambda n: None


@dataclass
class BuildReport:
    notes: int = 0
    sections: int = 0
    changed: list[str] = field(default_factory=list)  # notes parsed in this run (new or edited)
    removed: list[str] = field(default_factory=list)
    renamed: int = 0  # changed notes whose bytes match a removed one: nothing re-embedded
    embedded: int = 0  # sections embedded in this run
    written: list[str] = field(default_factory=list)  # vault-relative paths of pages written
    deleted: list[str] = field(default_factory=list)
    links: dict[str, int] = field(default_factory=dict)
    memories: dict[str, Any] = field(default_factory=dict)  # live, archived, page edits taken in, maintenance
    warnings: list[BuildWarning] = field(default_factory=list)
    rebuild_reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["warnings"] = [w.to_dict() for w in self.warnings]
        return data

    def summary(self) -> str:
        """The one line an Obsidian shell command shows in its notice."""
        parts = [f"{self.notes} notes", f"{len(self.changed)} changed", f"{self.embedded} sections embedded",
                 f"{len(self.written)} pages written", f"{len(self.warnings)} warnings"]
        if self.rebuild_reason:
            parts.append(f"full rebuild: {self.rebuild_reason}")
        return f"engram: {' · '.join(parts)} · {self.seconds:.1f}s"


def compile_vault(vault: Path, settings: Settings, *, embedder: Embedder | None = None,
                  progress: Progress = no_progress) -> BuildReport:
    """Compiles `vault`: indexes its notes and regenerates the pages. Returns the build report."""
    started = time.perf_counter()
    paths = VaultPaths(vault.resolve())
    identity = embedder.identity if embedder else model_identity(settings.model)
    report = BuildReport()
    with writer_lock(paths.engram):
        previous, report.rebuild_reason = previous_build(paths, identity, settings)
        scanned = scan_vault(paths.root, (*settings.ignore, settings.out), previous.files)
        state = BuildState(model=identity, fingerprint=settings.index_fingerprint(), parser=parser_fingerprint(),
                           files={s.path: s for s in scanned.notes})
        _parse_changed(paths.root, scanned.notes, previous, state, settings, progress, report)
        links, link_warnings = resolve_links(list(state.notes.values()), scanned.attachments)
        report.warnings = sorted([w for ws in state.warnings.values() for w in ws] + link_warnings,
                                 key=lambda w: (w.file, w.line, w.kind, w.message))
        section_vectors = _embed_sections(paths, state.notes, identity, embedder, settings, progress, report)
        _update_indexes(paths, settings, state.notes, section_vectors, report)
        neighbours = semantic_neighbours(_note_vectors(state.notes, section_vectors),
                                         settings.related_min_cosine, settings.related_max)
        _save_graph(paths, state.notes, links, neighbours)
        env = template_environment(_template_overrides(paths, settings), settings.out)
        memory = compile_memories(paths.root, settings, env, previous.memory_pages, previous.pages, embedder)
        report.memories = {"live": memory.live, "archived": memory.archived, "edits": memory.edits,
                           "maintenance": memory.maintenance}
        report.warnings.extend(memory.warnings)
        state.pages = _render(paths, settings, env, state.notes, links, neighbours, memory, report)
        state.memory_pages = memory.page_ids
        state.memory_events = memory.events_digest
        save_state(paths.state, state)
    report.notes, report.links = len(state.notes), _link_counts(links)
    report.sections = sum(len(n.sections) for n in state.notes.values())
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _parse_changed(root: Path, stamps: Sequence, previous: BuildState, state: BuildState, settings: Settings,
                   progress: Progress, report: BuildReport) -> None:
    """Parses new and edited notes; carries unchanged ones (and their warnings) over from `previous`."""
    todo = [s for s in stamps if previous.files.get(s.path) is None or previous.files[s.path].sha256 != s.sha256]
    for stamp in stamps:
        if stamp not in todo and stamp.path in previous.notes:
            state.notes[stamp.path] = previous.notes[stamp.path]
        if stamp not in todo and previous.warnings.get(stamp.path):
            state.warnings[stamp.path] = previous.warnings[stamp.path]
    with progress("parse", len(todo)) as tick:
        for stamp in todo:
            note, warnings = _parse_one(root, stamp.path, settings)
            if note:
                state.notes[stamp.path] = note
            if warnings:
                state.warnings[stamp.path] = warnings
            tick(1)
    report.changed = [s.path for s in todo if s.path in state.notes]
    report.removed = sorted(set(previous.notes) - set(state.notes))
    gone = {previous.notes[p].sha256 for p in report.removed}
    report.renamed = sum(1 for p in report.changed if state.notes[p].sha256 in gone)


def _parse_one(root: Path, path: str, settings: Settings) -> tuple[Note | None, list[BuildWarning]]:
    try:
        raw = (root / path).read_bytes()
        return parse_note(path, raw, max_bytes=settings.max_note_bytes, max_section_chars=settings.max_section_chars)
    except OSError as error:
        return None, [BuildWarning(path, 0, f"cannot read: {error.strerror}", "io")]
    except Exception as error:  # a note that breaks the parser is reported and skipped, never fatal
        return None, [BuildWarning(path, 0, f"cannot parse: {error.__class__.__name__}: {error}", "parse")]


def section_text(note: Note, index: int) -> str:
    """Returns what is embedded for a section: the note's title gives every piece its context."""
    text = note.sections[index].text
    return text if text.startswith(note.title) else f"{note.title}\n{text}"


def _embed_sections(paths: VaultPaths, notes: Mapping[str, Note], identity: str, embedder: Embedder | None,
                    settings: Settings, progress: Progress, report: BuildReport) -> dict[str, np.ndarray]:
    """Returns {section id: vector} for every section; only texts not in the cache are embedded."""
    ids = [f"{p}#{i}" for p in sorted(notes) for i in range(len(notes[p].sections))]
    texts = [section_text(notes[p], i) for p in sorted(notes) for i in range(len(notes[p].sections))]
    cache = EmbeddingCache(paths.embeddings)
    try:
        with progress("embed", len(texts)) as tick:
            vectors, report.embedded = embed_with_cache(
                texts, lambda: embedder or load_embedder(settings.model), identity, cache, tick)
    finally:
        cache.close()
    return dict(zip(ids, vectors))


def _update_indexes(paths: VaultPaths, settings: Settings, notes: Mapping[str, Note],
                    vectors: Mapping[str, np.ndarray], report: BuildReport) -> None:
    """Brings the keyword and vector indexes in step: rewrites changed notes, drops removed ones.

    An index whose size disagrees with the notes (a crash mid-build, a deleted folder) is
    rebuilt whole.
    """
    from compiler.index.vectors import (  # Chroma is heavy: only when indexing
        VectorStore,
        open_client,
    )

    expected = sum(len(n.sections) for n in notes.values())
    keyword = KeywordIndex(paths.fts)
    stale = sorted(set(report.changed) | set(report.removed))
    try:
        # With a Chroma server, always compare its count: it may be new, emptied, or another server.
        local_vectors = not settings.chroma_url and (paths.cache / "chroma").exists()
        if not stale and keyword.count() == expected and local_vectors:
            return  # nothing changed: do not even import Chroma
        store = VectorStore(open_client(paths.cache, settings.chroma_url))
        if report.rebuild_reason or keyword.count() != expected or store.count() != expected:
            keyword.reset()
            store.reset()
            stale, deleted = sorted(notes), []
        else:
            deleted = stale
        fresh = [n for p, n in sorted(notes.items()) if p in set(stale)]
        keyword.replace_paths(deleted, [NoteRow(n.path, n.sha256, n.title, " ".join(n.tags)) for n in fresh],
                              _section_rows(fresh))
        store.delete_paths(deleted)
        ids = [f"{n.path}#{s.ordinal}" for n in fresh for s in n.sections]
        if ids:
            store.add(ids, np.vstack([vectors[i] for i in ids]), [s.text for n in fresh for s in n.sections],
                      [_metadata(n, s.ordinal) for n in fresh for s in n.sections])
    finally:
        keyword.close()


def _section_rows(notes: Sequence[Note]) -> list[SectionRow]:
    return [SectionRow(n.path, s.ordinal, s.line, n.title + " " + " ".join(n.aliases), s.heading, s.text,
                       " ".join(n.tags)) for n in notes for s in n.sections]


def _metadata(note: Note, ordinal: int) -> dict[str, Any]:
    section = note.sections[ordinal]
    # Chroma rejects empty lists and non-scalar values: tags travel as one space-padded string.
    return {"path": note.path, "ordinal": ordinal, "line": section.line, "title": note.title,
            "tags": f" {' '.join(note.tags)} " if note.tags else " "}


def _note_vectors(notes: Mapping[str, Note], vectors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Returns one vector per note with sections: the mean of its section vectors."""
    return {p: np.mean([vectors[f"{p}#{i}"] for i in range(len(n.sections))], axis=0)
            for p, n in notes.items() if n.sections}


def _save_graph(paths: VaultPaths, notes: Mapping[str, Note], links: Sequence[ResolvedLink],
                neighbours: Mapping[str, Sequence[tuple[str, float]]]) -> None:
    data = graph_json(build_graph(list(notes.values()), links, neighbours)).encode("utf-8")
    if not paths.graph.is_file() or paths.graph.read_bytes() != data:
        atomic_write(paths.graph, data)


def _template_overrides(paths: VaultPaths, settings: Settings) -> Path:
    return paths.root / settings.templates if settings.templates else paths.engram / "templates"


def _render(paths: VaultPaths, settings: Settings, env: Any, notes: Mapping[str, Note], links: Sequence[ResolvedLink],
            neighbours: Mapping[str, Sequence[tuple[str, float]]], memory: MemoryStage,
            report: BuildReport) -> dict[str, str]:
    """Writes the pages; returns {vault-relative page: sha256}, what `engram check` compares the disk with."""
    import hashlib

    view = VaultView([notes[p] for p in sorted(notes)], links, neighbours, report.warnings, memory.projects)
    pages = {**render_note_pages(view, env, settings.out), **memory.pages}
    result = write_pages(paths.root, settings.out, pages)
    report.written, report.deleted = result.written, result.deleted
    report.warnings.extend(result.warnings)
    return {f"{settings.out}/{p}": hashlib.sha256(t.encode("utf-8")).hexdigest() for p, t in sorted(pages.items())}


def _link_counts(links: Sequence[ResolvedLink]) -> dict[str, int]:
    counts = {"total": len(links), "ok": 0, "broken": 0, "ambiguous": 0}
    for link in links:
        counts[link.status] += 1
    return counts
