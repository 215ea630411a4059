"""Link resolution the Obsidian way: every written link → the note or attachment it means.

Matching is case-insensitive. A target is looked up (1) as an exact vault path, (2) relative
to the linking note's folder, (3) as the shortest vault path ending in it. Paths written with
`./` or `../` are only ever relative to the linking note, and one that climbs out of the vault
is broken. A target without a known extension means `<target>.md`, so a `.qmd` note is only
reached when its extension is written.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiler.core.errors import BuildWarning
from compiler.notes.records import NOTE_SUFFIXES, Link, Note, ResolvedLink

# Extensions Obsidian opens as attachments; the vault's own attachment extensions are added.
ATTACHMENT_SUFFIXES = frozenset(
    ".avif .bmp .gif .jpeg .jpg .png .svg .webp .flac .m4a .mp3 .ogg .wav .3gp .mkv .mov .mp4 "
    ".ogv .webm .pdf .canvas .base .csv .json .txt".split()
)


@dataclass(frozen=True)
class VaultIndex:
    """Every linkable path, keyed for case-insensitive lookups."""

    by_key: dict[str, tuple[str, ...]]  # normalised path → paths spelled that way
    by_name: dict[str, tuple[tuple[str, str], ...]]  # normalised file name → (path, normalised path) with that name
    suffixes: frozenset[str]


def resolve_links(
    notes: Sequence[Note], attachments: Iterable[str] = (), index: VaultIndex | None = None,
    kept: Iterable[ResolvedLink] = (),
) -> tuple[list[ResolvedLink], list[BuildWarning]]:
    """Returns every link of every note resolved (sorted by source, line, target) and a
    warning per broken or ambiguous link. Same-note links (`[[#Heading]]`) are skipped.
    `index` is `vault_index` of the notes and `attachments`, when the caller has it already;
    `kept` are the links of other notes, resolved already (in that order), which join the result."""
    resolved = [*kept, *resolve_each(notes, index or vault_index([note.path for note in notes], attachments))]
    # Sorting is stable: links on one line to one target keep their order in the note.
    resolved.sort(key=lambda r: (r.source, r.link.line, r.link.target))
    warnings = [warning for r in resolved if (warning := _warning(r)) is not None]
    return resolved, warnings


def backlinks(resolved: Sequence[ResolvedLink]) -> dict[str, list[ResolvedLink]]:
    """Returns {target path: links pointing at it, sorted by source and line}, without broken
    links and without a note's links to itself; keys are sorted."""
    grouped: dict[str, list[ResolvedLink]] = defaultdict(list)
    for link in resolved:
        if link.status != "broken" and link.target != link.source:
            grouped[link.target].append(link)
    order = lambda r: (r.source, r.link.line, r.link.target)  # noqa: E731
    return {target: sorted(grouped[target], key=order) for target in sorted(grouped)}


def resolve_each(notes: Iterable[Note], index: VaultIndex) -> list[ResolvedLink]:
    """Returns the links of `notes` resolved against `index`, in note order, unsorted."""
    found: dict[tuple[str, str], tuple[str, ...]] = {}  # (folder, target) → paths: most targets recur
    anywhere: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {}  # what does not depend on the folder
    return [_resolve(note.path, link, index, found, anywhere)
            for note in notes for link in note.links if link.target.strip()]


def vault_index(note_paths: Iterable[str], attachments: Iterable[str]) -> VaultIndex:
    """Returns the lookup tables over all note and attachment paths."""
    paths = sorted(set(note_paths) | set(attachments))
    by_key: dict[str, list[str]] = defaultdict(list)
    by_name: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in paths:
        key = _key(path)
        by_key[key].append(path)
        by_name[key.rpartition("/")[2]].append((path, key))
    suffixes = {posixpath.splitext(path)[1].lower() for path in paths}
    return VaultIndex(
        by_key={key: tuple(found) for key, found in by_key.items()},
        by_name={key: tuple(found) for key, found in by_name.items()},
        suffixes=frozenset(suffixes | ATTACHMENT_SUFFIXES | set(NOTE_SUFFIXES)) - {""},
    )


def _key(path: str) -> str:
    """Returns the case- and Unicode-form-insensitive spelling of a path."""
    # NFC first: macOS hands out decomposed file names while links are typed composed. ASCII is
    # its own NFC form: the check is cheaper than the normalisation (1.4 million keys at 100,000 notes).
    return path.lower() if path.isascii() else unicodedata.normalize("NFC", path).lower()


def _resolve(source: str, link: Link, index: VaultIndex,
             known: dict[tuple[str, str], tuple[str, ...]] | None = None,
             anywhere: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] | None = None) -> ResolvedLink:
    """Returns the link resolved against the vault: ok, ambiguous or broken. What a target
    resolves to depends on the linking note's folder only; `known` remembers it per folder, and
    `anywhere` the lookups of a file name that do not depend on the folder."""
    folder = posixpath.dirname(source)
    known = {} if known is None else known
    found = known.get((folder, link.target))
    if found is None:
        name = _file_name(link.target, index.suffixes)
        found = known[(folder, link.target)] = _find(folder, name, index, {} if anywhere is None else anywhere)
    if not found:
        return ResolvedLink(source, "", link, "broken")
    if len(found) > 1:
        return ResolvedLink(source, found[0], link, "ambiguous", found)
    return ResolvedLink(source, found[0], link, "ok")


def _find(folder: str, name: str, index: VaultIndex,
          anywhere: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]]) -> tuple[str, ...]:
    """Returns the paths a file name written in a note of `folder` means (none when broken).
    `anywhere` keeps, per name, the exact vault path and the shortest match, which no folder changes."""
    if name.startswith("/"):  # vault-absolute
        return _exact(index, _inside_vault("", name.lstrip("/")))
    if name.startswith(("./", "../")):
        return _exact(index, _inside_vault(folder, name))
    exact, shortest = anywhere.get(name) or anywhere.setdefault(name, (_exact(index, _inside_vault("", name)), None))
    if exact:
        return exact
    found = _exact(index, _inside_vault(folder, name))
    if found:
        return found
    if shortest is None:
        shortest = _shortest(index, _inside_vault("", name))
        anywhere[name] = (exact, shortest)
    return shortest


def _file_name(target: str, suffixes: frozenset[str]) -> str:
    """Returns the file name a target means: as written if its extension is known, else + .md."""
    target = target.strip()
    suffix = posixpath.splitext(target)[1].lower()
    # "[[Meeting 2024.01.15]]" has the "extension" .15: unknown, so it is a note name.
    return target if suffix in suffixes else target + ".md"


def _inside_vault(folder: str, name: str) -> str | None:
    """Returns the normalised vault path of `name` seen from `folder`; None if it escapes."""
    if name and "//" not in name and "/." not in f"/{name}" and not name.endswith("/"):
        # Already normal (no "", "." or ".." segment), and a note's folder is too: normpath would
        # give the join back (425,000 calls at 100,000 notes).
        return f"{folder}/{name}" if folder else name
    path = posixpath.normpath(posixpath.join(folder, name))
    return None if path == ".." or path.startswith("../") or path == "." else path


def _exact(index: VaultIndex, path: str | None) -> tuple[str, ...]:
    """Returns the paths equal to `path` ignoring case (just the exact spelling if present)."""
    if path is None:
        return ()
    found = index.by_key.get(_key(path), ())
    return (path,) if path in found else found


def _shortest(index: VaultIndex, name: str | None) -> tuple[str, ...]:
    """Returns the vault paths ending in "/" + name with the fewest segments (then the
    shortest string); several paths when they tie."""
    if name is None:
        return ()
    wanted = _key(name)
    ending = "/" + wanted
    candidates = [path for path, key in index.by_name.get(wanted.rpartition("/")[2], ())
                  if key == wanted or key.endswith(ending)]
    if not candidates:
        return ()
    rank = lambda path: (path.count("/"), len(path))  # noqa: E731
    best = min(rank(path) for path in candidates)
    return tuple(sorted(path for path in candidates if rank(path) == best))


def missing_kind(link: Link) -> str:
    """Returns what a broken link wants: "file" (an attachment, by its extension) or "note"."""
    return "file" if posixpath.splitext(link.target)[1].lower() in ATTACHMENT_SUFFIXES else "note"


def _warning(resolved: ResolvedLink) -> BuildWarning | None:
    """Returns the warning for a broken or ambiguous link, None for a clean one."""
    link, shown = resolved.link, _as_written(resolved.link)
    if resolved.status == "broken":
        what = missing_kind(link)
        message = f'broken link {shown}: no {what} named "{link.target}"'
        return BuildWarning(resolved.source, link.line, message, "broken-link")
    if resolved.status == "ambiguous":
        names = ", ".join(resolved.candidates)
        message = (
            f"ambiguous link {shown}: {len(resolved.candidates)} files match equally "
            f"({names}); using {resolved.target}"
        )
        return BuildWarning(resolved.source, link.line, message, "ambiguous-link")
    return None


def _as_written(link: Link) -> str:
    """Returns the link roughly as it looks in the note, for messages."""
    anchor = f"#^{link.block}" if link.block else (f"#{link.heading}" if link.heading else "")
    if link.kind == "markdown":
        return f"[{link.alias}]({link.target}{anchor})"
    prefix = "!" if link.kind == "embed" else ""
    return f"{prefix}[[{link.target}{anchor}]]"
