"""`engram lint`: what keeps an agent-written wiki honest, each finding with its file and line.

- broken-link: a wiki page links to nothing (Obsidian's resolution, against the whole vault).
- orphan: no other wiki page links to the page (index.md and log.md do not count: they link all).
- contradiction: two pages state opposite things on a shared subject. Sentences that share two or
  more uncommon words are paired, and each pair goes through the memory write path's own
  contradiction check (compiler.memory.contradiction), which favours precision.
- stale: a source the page cites was replaced by a newer version, or its bytes changed, after the
  page's `updated`; missing-source: it cites a file raw/ does not hold.
- uncited: a page whose kind needs sources (`wiki_cited_kinds`) cites none (and no memory); or,
  claim by claim, a figure it states (a number: a port, a limit, a version, a price) is in none of
  the sources it cites, in digits or in words. Figures are what a model misremembers most and what
  can be checked without one; a claim in words alone is checked only for having a source.
- missing-page: a page that does not exist is linked to, or named, by `wiki_missing_min` pages.
- duplicate: two pages with the same title once case, punctuation and plurals are folded, or
  most of the same text.
No model, no index: lint reads the wiki's files and raw/'s sidecars, so it runs in a pre-commit hook.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Any

from compiler.core.clock import format_time
from compiler.core.lock import writer_lock
from compiler.memory.contradiction import check_contradiction, statements
from compiler.notes.links import resolve_links
from compiler.notes.records import Note, ResolvedLink
from compiler.notes.scan import vault_files
from compiler.wiki import history
from compiler.wiki.layout import WikiLayout
from compiler.wiki.navigation import refresh_navigation
from compiler.wiki.page_files import WikiPage, wiki_pages
from compiler.wiki.source_files import Source, broken_sidecars, read_sources

KINDS = ("broken-link", "orphan", "contradiction", "stale", "missing-source", "uncited", "missing-page", "duplicate",
         "bad-sidecar")
MIN_SHARED_WORDS = 2  # sentences paired for the contradiction check share at least this many uncommon words
COMMON_SHARE = 0.02  # a word in more than this share of all sentences (and over 50 of them) pairs nothing
DUPLICATE_TEXT = 0.6  # Jaccard of two pages' 5-word shingles from which they are duplicates
MIN_DUPLICATE_WORDS = 20  # a shorter body is compared by title only: a sentence or two shares most of its runs by chance
_WORD = re.compile(r"[^\W\d_][\w'-]{2,}")
_STOP = set("""the and for with that this from into onto over under are was were been being have has had not
but its their they them our your you his her she him who whom which what when where while then than also
can could should would will shall may might must does did doing done about after before because since
la el los las del que por con una para como más pero sus esta este""".split())


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    file: str  # vault-relative
    line: int  # 1-based; 1 for the whole page
    message: str
    related: tuple[str, ...] = field(default=())  # the other files involved

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "related": list(self.related)}

    def line_text(self) -> str:
        return f"{self.file}:{self.line}: {self.kind}: {self.message}"


def lint_wiki(layout: WikiLayout, ignore: Sequence[str] = (), files: Sequence[str] | None = None) -> dict[str, Any]:
    """Returns {"findings": [...], "counts": {kind: n}, "pages", "sources"}: every finding, by file and line.

    `files` are the vault's files when the caller has walked it already (compile's scan); else
    the vault is walked here, skipping `ignore` globs."""
    pages, sources = wiki_pages(layout), read_sources(layout)
    notes = [Note(path=p.path, sha256=p.sha256, title=p.title, links=p.links) for p in pages]
    resolved, _ = resolve_links(notes, vault_files(layout.root, ignore) if files is None else files)
    findings = [*_links(layout, pages, resolved), *_contradictions(pages, _related(pages, resolved)),
                *_staleness(layout, pages, sources),
                *_uncited(layout, pages), *_unsourced_figures(layout, pages, sources), *_duplicates(pages),
                *(Finding("bad-sidecar", p, 1, "not a source description engram can read: the source is "
                          "treated as a file found in raw/") for p in broken_sidecars(layout))]
    findings.sort(key=lambda f: (f.file, f.line, f.kind, f.message))
    counts = Counter(f.kind for f in findings)
    return {"findings": [f.to_dict() for f in findings], "counts": {k: counts.get(k, 0) for k in KINDS},
            "pages": len(pages), "sources": len(sources)}


def _related(pages: Sequence[WikiPage], resolved: Sequence[ResolvedLink]) -> set[frozenset[str]]:
    """Returns the pairs of pages that share a topic: one links the other, or both cite one source."""
    pairs = {frozenset((l.source, l.target)) for l in resolved if l.status == "ok" and l.source != l.target}
    citing: dict[str, list[str]] = defaultdict(list)
    for page in pages:
        for cited in page.sources:
            citing[cited].append(page.path)
    return pairs | {frozenset(pair) for paths in citing.values() for pair in combinations(paths, 2)}


def _links(layout: WikiLayout, pages: Sequence[WikiPage], resolved: Sequence[ResolvedLink]) -> Iterator[Finding]:
    """Broken links, orphans and missing pages: the wiki's links resolved against the whole vault."""
    inbound: dict[str, set[str]] = defaultdict(set)
    wanted: dict[str, set[str]] = defaultdict(set)  # missing target (folded) → pages linking it
    first: dict[str, tuple[str, int, str]] = {}
    for link in resolved:
        if link.status == "broken":
            key = _fold(link.link.target)
            wanted[key].add(link.source)
            first.setdefault(key, (link.source, link.link.line, link.link.target))
            yield Finding("broken-link", link.source, link.link.line, f"[[{link.link.target}]] leads to no note or file")
        elif link.target != link.source:
            inbound[link.target].add(link.source)
    for page in pages:
        if not inbound.get(page.path):
            yield Finding("orphan", page.path, 1, "no other wiki page links here: link it from a related page")
    texts = {p.path: p.body.lower() for p in pages}
    for key, linking in sorted(wanted.items()):
        source, line, target = first[key]
        name = target.rsplit("/", 1)[-1].lower()
        mentioning = {path for path, text in texts.items() if re.search(rf"\b{re.escape(name)}\b", text)}
        count = len(linking | mentioning)
        if count >= layout.missing_min and not target.endswith((".png", ".jpg", ".pdf")):
            yield Finding("missing-page", source, line, f"“{target}” is linked or named by {count} pages and has "
                          "no page: write one", tuple(sorted((linking | mentioning) - {source})))


def _contradictions(pages: Sequence[WikiPage], related: set[frozenset[str]]) -> Iterator[Finding]:
    """Pairs of sentences on different pages that share uncommon words (two, or one when the pages
    share a topic) and contradict each other."""
    said = [(page, line, sentence, words) for page in pages for line, sentence in claims(page)
            if (words := _words(sentence))]
    frequency = Counter(w for *_, words in said for w in words)
    common = max(50, int(COMMON_SHARE * len(said)))
    holders: dict[str, list[int]] = defaultdict(list)
    for number, (*_, words) in enumerate(said):
        for word in words:
            if frequency[word] <= common:
                holders[word].append(number)
    shared: Counter[tuple[int, int]] = Counter()
    for numbers in holders.values():
        shared.update(pair for pair in combinations(numbers, 2) if said[pair[0]][0].path != said[pair[1]][0].path)
    reported: set[tuple[str, str]] = set()
    for (a, b), count in sorted(shared.items()):
        if count < MIN_SHARED_WORDS and frozenset((said[a][0].path, said[b][0].path)) not in related:
            continue
        (pa, la, sa, _), (pb, lb, sb, _) = sorted((said[a], said[b]), key=lambda s: (s[0].updated, s[0].path))
        if (pa.path, pb.path) in reported:
            continue
        verdict = check_contradiction(sa, sb)
        if verdict.contradicts:
            reported.add((pa.path, pb.path))
            yield Finding("contradiction", pb.path, lb, f"“{_short(sb)}” contradicts {pa.path}:{la} “{_short(sa)}” "
                          f"({verdict.reason})", (pa.path,))


def claims(page: WikiPage) -> Iterator[tuple[int, str]]:
    """Yields (file line, sentence) for each statement of the page's prose: paragraphs and list
    items, not headings, code, tables or link lists."""
    paragraph: list[str] = []
    start = page.body_line
    fenced = False
    for number, text in enumerate(page.body.split("\n"), page.body_line):
        stripped = text.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        is_prose = not fenced and stripped and not stripped.startswith(("#", "|", "```", "~~~", ">", "Related:"))
        item = re.match(r"^(?:[-*+]|\d+[.)])\s+", stripped)
        if paragraph and (not is_prose or item):
            yield from _sentences(start, " ".join(paragraph))
            paragraph = []
        if is_prose:
            if not paragraph:
                start = number
            paragraph.append(stripped[item.end():] if item else stripped)
    if paragraph:
        yield from _sentences(start, " ".join(paragraph))


_LINK_TEXT = re.compile(r"\[\[([^\]|]*\|)?([^\]]*)\]\]")


def _sentences(line: int, text: str) -> Iterator[tuple[int, str]]:
    """Yields the statements of a paragraph, its links read as their words; a sentence that is mostly
    links ("Every page: [[A]], [[B]]…") is a list of pages, not a claim."""
    for sentence in statements(text):
        linked = sum(len(m.group(2).split()) for m in _LINK_TEXT.finditer(sentence))
        words = _LINK_TEXT.sub(r"\2", sentence)
        if len(words.split()) >= 3 and linked * 2 <= len(words.split()):
            yield line, words


def _staleness(layout: WikiLayout, pages: Sequence[WikiPage], sources: dict[str, Source]) -> Iterator[Finding]:
    newer = {s.replaces: s for s in sources.values() if s.replaces}
    changed = {s.text: _changed_at(layout, s) for s in sources.values()}
    for page in pages:
        for cited in page.sources:
            source = sources.get(cited) or next((s for s in sources.values() if s.file == cited), None)
            if source is None:
                yield Finding("missing-source", page.path, _line_of(page, cited), f"cites {cited}, which is not in "
                              f"{layout.raw_name}/", (cited,))
                continue
            replacement = newer.get(source.text)
            if replacement and replacement.ingested > page.updated:
                yield Finding("stale", page.path, _line_of(page, cited), f"cites {source.text}, replaced by "
                              f"{replacement.text} on {replacement.ingested[:10]} (after this page's update on "
                              f"{page.updated[:10]}): check the page against the new version",
                              (source.text, replacement.text))
            elif changed[source.text] and changed[source.text] > page.updated:
                yield Finding("stale", page.path, _line_of(page, cited), f"cites {source.text}, whose bytes changed "
                              f"on {changed[source.text][:10]}, after this page's update: sources in "
                              f"{layout.raw_name}/ should not change; ingest the new version instead", (source.text,))


def _changed_at(layout: WikiLayout, source: Source) -> str:
    """Returns when the source's original changed since its ingest (its mtime), or "" when it did not."""
    path = layout.root / source.file
    if not source.sidecar or not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() == source.sha256:
        return ""
    return format_time(datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc))


def _uncited(layout: WikiLayout, pages: Sequence[WikiPage]) -> Iterator[Finding]:
    for page in pages:
        if page.kind in layout.cited_kinds and not page.sources and not page.memories:
            first = next(claims(page), (page.body_line, ""))
            yield Finding("uncited", page.path, first[0], f"a {page.kind} page with no sources: cite the raw "
                          "sources (or memories) its claims come from")


def _unsourced_figures(layout: WikiLayout, pages: Sequence[WikiPage], sources: dict[str, Source]) -> Iterator[Finding]:
    """Claims stating a figure that none of the page's cited sources holds (pages citing memories are
    skipped: a memory is not read here)."""
    by_file = {s.file: s for s in sources.values()}
    figures_of: dict[str, set[str]] = {}
    for page in pages:
        cited = [sources.get(c) or by_file.get(c) for c in page.sources]
        if page.kind not in layout.cited_kinds or page.memories or not cited or None in cited:
            continue  # uncited or missing-source says it already
        known: set[str] = set()
        for source in cited:
            if source.text not in figures_of:
                path = layout.root / source.text
                figures_of[source.text] = figures(path.read_text("utf-8", "replace")) if path.is_file() else set()
            known |= figures_of[source.text]
        for line, sentence in claims(page):
            unsourced = sorted(figures(sentence) - known, key=float)
            if unsourced:
                yield Finding("uncited", page.path, line, f"“{_short(sentence)}”: {', '.join(unsourced)} is in none of "
                              "the sources it cites: cite where it comes from, or correct it",
                              tuple(s.text for s in cited))


_FIGURE = re.compile(r"(?<![\w.,/:#-])\d+(?:[.,]\d+)*(?![\w/:-]|[.,]\d)")
_UNITS = dict(zip("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                  "sixteen seventeen eighteen nineteen".split(), range(20)))
_TENS = dict(zip("twenty thirty forty fifty sixty seventy eighty ninety".split(), range(20, 100, 10)))
_NUMBER_WORDS = re.compile(r"\b(" + "|".join(_TENS) + r")(?:[- ](" + "|".join(_UNITS) + r"))?\b|\b(" + "|".join(_UNITS)
                           + r"|hundred|thousand)\b", re.IGNORECASE)


def figures(text: str) -> set[str]:
    """Returns the numbers a text states, as digits without separators ("1,000" → "1000"; "twenty-four"
    → "24"); parts of names, dates, versions with letters, paths and addresses are not figures."""
    found = {m.group(0).replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+", m.group(0)) else m.group(0)
             for m in _FIGURE.finditer(text)}
    for match in _NUMBER_WORDS.finditer(text):
        tens, unit, alone = (w.lower() if w else w for w in match.groups())
        found.add(str(_TENS[tens] + (_UNITS[unit] if unit else 0)) if tens else
                  {"hundred": "100", "thousand": "1000"}.get(alone) or str(_UNITS[alone]))
    return found


def _duplicates(pages: Sequence[WikiPage]) -> Iterator[Finding]:
    by_title: dict[str, list[WikiPage]] = defaultdict(list)
    for page in pages:
        by_title[_fold(page.title)].append(page)
    paired: set[tuple[str, str]] = set()
    for same in by_title.values():
        for a, b in combinations(sorted(same, key=lambda p: p.path), 2):
            paired.add((a.path, b.path))
            yield Finding("duplicate", b.path, 1, f"the same title as {a.path}: merge them", (a.path,))
    shingles = {p.path: _shingles(p.body) for p in pages}
    holders: dict[int, list[str]] = defaultdict(list)
    for path, grams in shingles.items():
        for gram in grams:
            holders[gram].append(path)
    candidates = {pair for paths in holders.values() if len(paths) <= 20 for pair in combinations(sorted(paths), 2)}
    for a, b in sorted(candidates - paired):
        union = len(shingles[a] | shingles[b])
        overlap = len(shingles[a] & shingles[b]) / union if union else 0
        if overlap >= DUPLICATE_TEXT:
            yield Finding("duplicate", b, 1, f"{overlap:.0%} of its text is also in {a}: merge them", (a,))


def _shingles(body: str) -> set[int]:
    """Returns the hashes of the body's 5-word runs (figures count: pages that differ only in their
    numbers say different things); none for a body too short for overlap to mean anything."""
    words = re.findall(r"\w[\w'.-]*\w|\w", _LINK_TEXT.sub(r"\2", body).lower())
    if len(words) < MIN_DUPLICATE_WORDS:
        return set()
    return {hash(" ".join(words[i:i + 5])) for i in range(len(words) - 4)}


def _words(sentence: str) -> frozenset[str]:
    """Returns the sentence's content words, folded (a trailing plural s dropped)."""
    return frozenset(w.rstrip("s") if len(w) > 4 else w for w in (m.lower() for m in _WORD.findall(sentence))
                     if w not in _STOP)


def _fold(title: str) -> str:
    return " ".join(w.rstrip("s") if len(w) > 3 else w for w in re.findall(r"\w+", Path(title).name.lower()))


def _line_of(page: WikiPage, cited: str) -> int:
    """Returns the frontmatter line citing `cited` (the page's first line when not found)."""
    return next((page.links[i].line for i in range(len(page.links)) if cited.startswith(page.links[i].target)), 1)


def _short(sentence: str, limit: int = 90) -> str:
    return sentence if len(sentence) <= limit else sentence[:limit - 1].rstrip() + "…"


def log_lint(layout: WikiLayout, result: dict[str, Any], writer: str = "") -> None:
    """Appends this lint to the history (so to log.md): its counts, one line."""
    counted = ", ".join(f"{n} {k}" for k, n in result["counts"].items() if n) or "no findings"
    with writer_lock(layout.root / ".engram"):
        history.append(layout.history, history.Entry(
            at=layout.timestamp(), action="lint", path=layout.wiki_name, title=f"{len(result['findings'])} findings",
            writer=writer, detail=f"{result['pages']} pages, {result['sources']} sources: {counted}"))
        refresh_navigation(layout)
