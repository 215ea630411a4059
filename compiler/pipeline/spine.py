"""The spine: `compile_vault` runs the stages top to bottom; each returns its product, and the report
is assembled from those products at the end.

scan → parse → links → embed → index → graph → memory → render → write → save state. Each stage
takes only what it needs (never the report) and returns a small frozen product or plain values;
parse lives in notes.py, embed and index in index.py, graph in graph.py, memory in memories.py.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compiler.core.collector import collector_paused
from compiler.core.errors import BuildWarning
from compiler.core.files import contained
from compiler.core.lock import writer_lock
from compiler.core.progress import Progress, no_progress
from compiler.core.settings import Settings
from compiler.embed.embedder import Embedder, model_identity
from compiler.notes.records import ResolvedLink
from compiler.notes.scan import ScanResult, VaultFiles, stamp_files, walk_vault
from compiler.pipeline.inputs import (
    OutputListing,
    forget_inputs,
    gather_inputs,
    save_inputs,
    unchanged_build,
)
from compiler.pipeline.state import (
    BuildState,
    parser_fingerprint,
    previous_build,
    save_state,
)
from compiler.pipeline.vault_paths import VaultPaths

if TYPE_CHECKING:
    from compiler.pipeline.notes import Parsed

# VaultPaths is re-exported: benchmarks/bench.py imports it from here.
__all__ = ["BuildReport", "VaultPaths", "compile_vault"]

Warn = Callable[[BuildWarning], None]


def _ignore(warning: BuildWarning) -> None:
    """The default `warn`: the warnings are in the report anyway."""


@dataclass(frozen=True)
class BuildReport:
    """What one compile did: assembled once, from the stages' products, when the build is over."""

    notes: int
    sections: int
    changed: list[str]  # notes parsed in this run (new or edited)
    removed: list[str]
    renamed: int  # changed notes whose bytes match a removed one (a move or a rename)
    embedded: int  # sections embedded in this run
    written: list[str]  # vault-relative paths of pages written
    deleted: list[str]
    links: dict[str, int]
    memories: dict[str, Any]  # live, archived, page edits taken in, maintenance
    warnings: list[BuildWarning]
    rebuild_reason: str
    seconds: float
    token_file: dict[str, Any] = field(default_factory=dict)  # its bytes, the share dead, a compaction's result

    def to_dict(self) -> dict[str, Any]:
        # `asdict` without its deep copy of the warnings (a second at 100,000 notes); the rest is
        # small and copied as `asdict` would.
        data = asdict(replace(self, warnings=[]))
        data["warnings"] = [w.to_dict() for w in self.warnings]
        return data

    def summary(self) -> str:
        """The one line an Obsidian shell command shows in its notice."""
        parts = [f"{self.notes} notes", f"{len(self.changed) - self.renamed} changed"]
        parts += [f"{self.renamed} moved"] if self.renamed else []
        parts += [f"{len(self.removed) - self.renamed} removed"] if len(self.removed) > self.renamed else []
        parts += [f"{self.embedded} sections embedded", f"{len(self.written)} pages written", f"{len(self.warnings)} warnings"]
        if self.rebuild_reason:
            parts.append(f"full rebuild: {self.rebuild_reason}")
        return f"engram: {' · '.join(parts)} · {self.seconds:.1f}s"


def compile_vault(vault: Path, settings: Settings, *, embedder: Embedder | None = None,
                  progress: Progress = no_progress, warn: Warn = _ignore) -> BuildReport:
    """Compiles `vault`: indexes its notes and regenerates the pages. Returns the build report.

    `progress` is told how far the long stages are; `warn` gets each warning as soon as its stage
    has found it (parse and link warnings before the embedding starts), not all at the end.
    """
    started = time.perf_counter()
    paths = VaultPaths(vault.resolve())
    identity = embedder.identity if embedder else model_identity(settings.model)
    with writer_lock(paths.engram), collector_paused():  # compiler.core.collector says why
        contained(paths.root, paths.root / settings.out)  # before anything is read back from or written to it
        overrides = _template_overrides(paths, settings)
        last, walked, listing = unchanged_build(paths, settings, identity, overrides)
        if last is not None:
            report = _unchanged_report(last, started)
            _tell(warn, report.warnings)
            return report
        forget_inputs(paths.inputs)
        return _build(paths, settings, embedder, overrides, walked, listing, progress, warn, started)


def _build(paths: VaultPaths, settings: Settings, embedder: Embedder | None, overrides: Path,
           walked: VaultFiles | None, listing: OutputListing | None, progress: Progress, warn: Warn,
           started: float) -> BuildReport:
    """Runs every stage (under the writer lock the caller holds); returns the report. `walked` and
    `listing` are the vault and its output folder as the no-op check found them (None: not looked at).

    The stages are imported here, not at the top: a no-op compile in a new process (a
    pre-commit hook, an editor's shell command) never pays for networkx, jinja2 or Chroma.
    """
    from compiler.core.files import write_pages
    from compiler.index.cache import text_hash
    from compiler.index.vector_index import bring_chroma_in_step
    from compiler.memory.index import memory_text
    from compiler.notes.links import resolve_links, vault_index
    from compiler.notes.graph_store import save_graph, stored_links
    from compiler.pipeline.graph import every_list, graph_changes, notes_digest, update_related
    from compiler.pipeline.related_store import related_store
    from compiler.pipeline.index import (
        SectionVectors,
        choose_model,
        compact_token_vectors,
        section_hashes,
        update_indexes,
    )
    from compiler.pipeline.memories import compile_memories
    from compiler.pipeline.memory_pages import KeptPages, page_records
    from compiler.pipeline.note_pages import notes_to_digest, render_mark
    from compiler.pipeline.notes import parse_notes
    from compiler.render.notes import (
        VaultView,
        note_pages_key,
        render_changed_note_pages,
        template_environment,
    )
    from compiler.wiki.layout import WikiLayout
    from compiler.wiki.lint import lint_wiki
    from compiler.wiki.navigation import refresh_navigation

    model = choose_model(settings.model, embedder)
    previous, reason = previous_build(paths, model.identity, settings)
    wiki = WikiLayout.of(paths.root, settings)
    navigation, wiki_warnings = refresh_navigation(wiki)  # pages edited by hand: index.md and log.md follow
    scan = _scan(paths, settings, previous, None if navigation else walked)
    seen = listing.stamps() if listing is not None else None  # the pages' stats, taken once (OutputListing)
    with progress("parse", len(scan.edited)) as tick:
        parsed = parse_notes(paths.root, scan, previous, settings, tick)
    index = vault_index(parsed.notes, scan.attachments)
    env = template_environment(overrides, settings.out)
    mark = render_mark(note_pages_key(env), settings.out, parsed.notes, scan.attachments)
    last_digest, digest = notes_digest(previous.notes), notes_digest(parsed.notes)
    graph_key, last_graph_key = f"{mark} {digest}", f"{previous.note_mark} {last_digest}"
    same_paths = previous.note_mark == mark  # then a note not edited links where it did (compiler.notes.graph_store)
    kept = stored_links(paths.graph, last_graph_key, parsed.changed) if same_paths else None
    to_resolve = parsed.notes.values() if kept is None else [parsed.notes[p] for p in parsed.changed if p in parsed.notes]
    links, link_warnings = resolve_links(list(to_resolve), index=index, kept=kept or ())
    found = _sorted_warnings(parsed, [*scan.skipped, *link_warnings, *wiki_warnings])
    _tell(warn, found)
    stale = sorted(parsed.notes) if reason else parsed.changed  # the notes whose vectors are read now
    with progress("embed", sum(len(parsed.notes[p].sections) for p in stale)) as tick:
        vectors = SectionVectors(paths.embeddings, parsed.notes, stale, model, tick)
    update_indexes(paths, settings.chroma_url, parsed, vectors, full=bool(reason))
    related = update_related(related_store(paths.graph), last_digest, parsed.notes, digest, parsed.changed, vectors,
                             settings)
    changes = graph_changes(same_paths, parsed.changed, related)
    # Every note's related list is read when every edge is written (and every page digested); else those asked for.
    neighbours = related.neighbours if changes is not None else every_list(related.neighbours)
    save_graph(paths.graph, parsed.notes, links, neighbours, graph_key, last_key=last_graph_key, changed=changes)
    memory = compile_memories(paths.root, settings, env, previous.memory_pages, previous.pages, previous.memory_renders,
                              embedder, previous.memory_mark)
    bring_chroma_in_step(paths.cache, settings.chroma_url)  # the embedded Chroma mirrors the flat stores
    def in_use() -> Iterator[str]:
        """The text hashes of what search looks a section up by, and of what a moved note was
        embedded as (they differ when a move changed its title); every live memory's. Made only
        when read: a model without token vectors never reads it. A note of the last build gives
        its hashes from its head, not from its decoded sections (6 s at 100,000 notes)."""
        yield from section_hashes(parsed.notes)
        yield from section_hashes(parsed.notes)
        yield from (text_hash(memory_text(o)) for o in memory.state.values() if o.live)

    token_file = compact_token_vectors(paths.embeddings, model, in_use())
    _tell(warn, memory.warnings)
    warnings = found + memory.warnings  # what the health page lists
    lint = lint_wiki(wiki, files=[*(s.path for s in scan.notes), *scan.attachments]) if wiki.wiki.is_dir() else None
    view = VaultView([parsed.notes[p] for p in sorted(parsed.notes)], links, neighbours, warnings, memory.projects, lint,
                     settings.catalog_split)
    unchanged = KeptPages(paths.root, settings.out, previous.note_renders, previous.pages, seen)
    moved = notes_to_digest(previous.note_mark, mark, previous.notes, parsed.notes, parsed.changed, links, index,
                            related.changed, related.holding)
    notes_pages = render_changed_note_pages(view, env, settings.out, unchanged, moved,
                                            {p: r[0] for p, r in previous.note_renders.items()})
    pages = {**notes_pages.pages, **memory.pages}
    written = write_pages(paths.root, settings.out, pages, keep=[*memory.kept, *notes_pages.kept], listed=seen)
    _tell(warn, written.warnings)
    kept = {f"{settings.out}/{p}": previous.pages[f"{settings.out}/{p}"]  # their bytes' sha256
            for p in [*memory.kept, *notes_pages.kept]}
    save_state(paths.state, BuildState(
        model=model.identity, model_setting=settings.model, fingerprint=settings.index_fingerprint(),
        parser=parser_fingerprint(),
        files={s.path: s for s in scan.notes}, notes=parsed.notes, warnings=parsed.warnings,
        memory_pages=memory.page_ids, pages={**_page_hashes(settings.out, pages), **kept}, memory_events=memory.events_digest,
        memory_renders=page_records(paths.root, settings.out, memory.digests, memory.kept,
                                    [w.file for w in written.warnings]), memory_mark=memory.render_mark,
        note_renders=page_records(paths.root, settings.out, notes_pages.digests,
                                  {p: unchanged.stamps[p] for p in notes_pages.kept}, [w.file for w in written.warnings]),
        note_mark=mark),
               base=previous)
    report = BuildReport(
        notes=len(parsed.notes), sections=parsed.sections, changed=parsed.changed, removed=parsed.removed,
        renamed=parsed.renamed, embedded=vectors.embedded, written=written.written, deleted=written.deleted,
        links=_link_counts(links), warnings=warnings + written.warnings, rebuild_reason=reason,
        memories={"live": memory.live, "archived": memory.archived, "edits": memory.edits,
                  "maintenance": memory.maintenance, "pages_rendered": memory.rendered},
        seconds=round(time.perf_counter() - started, 3), token_file=token_file.to_dict() if token_file else {})
    out_rows = None if listing is None else listing.after_writes(
        paths.root / settings.out, [p.removeprefix(f"{settings.out}/") for p in written.written],
        [p.removeprefix(f"{settings.out}/") for p in written.deleted])
    inputs = gather_inputs(paths, settings, model.identity, scan, overrides, memory.shown_at, out_rows)
    save_inputs(paths.inputs, inputs, report.to_dict(),
                {"shown_at": memory.shown_at, "maintenance_due": memory.maintenance_due})
    return report


def _scan(paths: VaultPaths, settings: Settings, previous: BuildState, walked: VaultFiles | None) -> ScanResult:
    """Returns the scan of the vault, with its edits counted against `previous` (the build state).

    The walk made to check for a no-op is reused (at 100,000 notes a walk costs half a second):
    its stats are right, and only the notes whose stat moved since `previous` are hashed.
    """
    files = walked or walk_vault(paths.root, (*settings.ignore, settings.out))
    return stamp_files(files, previous.files)


def _unchanged_report(last: dict[str, Any], started: float) -> BuildReport:
    """Returns the report of a build that found nothing changed: the last one's counts, no work."""
    memories = {**last["memories"], "edits": [], "maintenance": {"skipped": True, "unchanged": True}, "pages_rendered": 0}
    return BuildReport(
        notes=last["notes"], sections=last["sections"], changed=[], removed=[], renamed=0, embedded=0, written=[],
        deleted=[], links=last["links"], memories=memories, warnings=[BuildWarning(**w) for w in last["warnings"]],
        rebuild_reason="", seconds=round(time.perf_counter() - started, 3))


def _tell(warn: Warn, warnings: Sequence[BuildWarning]) -> None:
    for warning in warnings:
        warn(warning)


def _sorted_warnings(parsed: Parsed, link_warnings: Sequence[BuildWarning]) -> list[BuildWarning]:
    """Returns the parse warnings and the others (scan, links) in file order."""
    found = [w for ws in parsed.warnings.values() for w in ws] + list(link_warnings)
    return sorted(found, key=lambda w: (w.file, w.line, w.kind, w.message))


def _template_overrides(paths: VaultPaths, settings: Settings) -> Path:
    return paths.root / settings.templates if settings.templates else paths.engram / "templates"


def _page_hashes(out: str, pages: Mapping[str, str]) -> dict[str, str]:
    """Returns {vault-relative page: sha256 of its text}: what `engram check` compares the disk with."""
    return {f"{out}/{p}": hashlib.sha256(t.encode("utf-8")).hexdigest() for p, t in sorted(pages.items())}


def _link_counts(links: Sequence[ResolvedLink]) -> dict[str, int]:
    counts = {"total": len(links), "ok": 0, "broken": 0, "ambiguous": 0}
    for link in links:
        counts[link.status] += 1
    return counts
