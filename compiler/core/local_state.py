"""What in `.engram/` is machine-local or derived, and the `.gitignore` that keeps it out of git.

The first write into a vault's `.engram/` (every writer takes the writer lock, and the journal's
first append creates the folder) leaves `.engram/.gitignore` there, the way pytest's cache
writes its own: a plain `git add -A` after a compile or a sync then commits the chunks and the
manifest, never the cache, the journal or the lock. An existing file is never rewritten.
"""

from __future__ import annotations

from pathlib import Path

# vault-relative; `engram sync install` adds the same lines to the repository's .gitignore
LOCAL_STATE = [".engram/cache/", ".engram/lock", ".engram/journal.jsonl", ".engram/sync-status.json",
               ".engram/sync.log", ".engram-*.tmp"]  # the last: temp files of interrupted atomic writes
GITIGNORE = ".gitignore"


def gitignore_text() -> str:
    """Returns `.engram/.gitignore`: the local state, relative to `.engram/` (chunks/ and manifest.json travel)."""
    lines = [GITIGNORE, *(p.removeprefix(".engram/") for p in LOCAL_STATE)]
    return "# written by engram: machine-local or derived, never committed (chunks/ and manifest.json are)\n" + \
        "".join(f"{line}\n" for line in lines)


def ensure_gitignore(engram_dir: Path) -> bool:
    """Writes `.engram/.gitignore` when it is missing; returns whether it wrote it. Never raises on a
    read-only or odd folder: ignoring is a courtesy, not a reason to fail a write."""
    path = engram_dir / GITIGNORE
    if path.exists() or path.is_symlink():
        return False
    try:
        with open(path, "x", encoding="utf-8") as handle:  # "x": two writers racing both end with one file
            handle.write(gitignore_text())
    except OSError:
        return False
    return True
