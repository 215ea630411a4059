"""`engram sync`: the whole cycle, unattended, from cron — and `engram sync install`, its one-time set-up.

    recover  (a killed run: stale git locks, our aborted rebase, chunks exported but not committed)
    pull     git pull --rebase --autostash; a manifest conflict is resolved by union
    import   chunks not seen yet; compile
    export   journal events no chunk holds → one chunk
    commit   only .engram/manifest.json and .engram/chunks/, with counts in the message
    push     fast-forward only; a rejected push is pulled (rebased) and retried once; never forced

The vault's writer lock is held throughout (no compile or second sync in between); the run is
logged and recorded in the status file (see `sync_monitor`).
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from compiler.core.errors import BuildWarning, BusyError, GitError
from compiler.core.local_state import LOCAL_STATE
from compiler.core.lock import writer_lock
from compiler.core.progress import Progress, no_progress
from compiler.core.settings import Settings
from compiler.embed.embedder import Embedder
from compiler.events.manifest import MANIFEST
from compiler.sync.exchange import (
    export_memories,
    import_chunks,
    machine_name,
    sync_files,
    sync_setting,
)
from compiler.sync.git import (
    MANIFEST_DRIVER,
    ahead_of_remote,
    clear_stale_locks,
    commit_paths,
    current_branch,
    git,
    has_remote,
    is_rejection,
    open_repo,
    pull_rebase,
    push,
    recover_interrupted,
)
from compiler.sync.monitor import log, monitored, record_failure, summary

DRIVER = MANIFEST_DRIVER
ATTRIBUTES_LINE = f".engram/{MANIFEST} merge={DRIVER}"
HISTORY_ATTRIBUTES_LINE = ".engram/wiki/history.jsonl merge=union"  # one JSON record a line: a union is valid


def run_sync(vault: Path, settings: Settings, *, embedder: Embedder | None = None, created_by: str = "",
             project: str = "", sessions: Sequence[Path] = (), push_changes: bool = True,
             lock_timeout: float = 600.0) -> dict[str, Any]:
    """Runs one sync cycle; returns what it did. Raises GitError (or BusyError) when it fails.

    Every outcome is in `.engram/sync.log` and `.engram/sync-status.json`.
    """
    root = vault.resolve()
    engram = root / ".engram"
    with _locked(engram, lock_timeout), monitored(engram, "sync") as result:
        repo = open_repo(root)
        remote = sync_setting(settings, "remote", "origin")
        if not has_remote(repo, remote):
            raise GitError(f"the repository has no remote {remote!r}: add the shared repository "
                           f"(git remote add {remote} URL) or set [sync] remote in engram.toml")
        branch = sync_setting(settings, "branch", "") or current_branch(repo)
        name = created_by or machine_name(settings)
        _recover(repo, branch, settings, result)
        result.update(_pull(repo, remote, branch))
        log(engram, "step", f"pulled {remote}/{branch}" if result["pulled"] else "nothing to pull yet")
        result["import"] = import_and_compile(root, settings, embedder=embedder)
        result["quarantined"] = len(result["import"]["quarantined"])
        log(engram, "step", f"imported {len(result['import']['chunks_new'])} chunks and compiled")
        result["export"] = export_memories(root, settings, embedder=embedder, created_by=name, project=project,
                                           sessions=sessions)
        log(engram, "step", f"exported chunk {result['export']['chunk']}" if result["export"]["chunk"]
            else "nothing to export")
        result["commit"] = commit_paths(repo, sync_files(root), commit_message(result, name))
        if push_changes and ahead_of_remote(repo, remote, branch):
            log(engram, "step", f"committed {result['commit'][:8]}, pushing" if result["commit"] else "pushing")
            _push_with_retry(repo, remote, branch, result)
    return result


def import_and_compile(vault: Path, settings: Settings, *, embedder: Embedder | None = None,
                       compile: bool = True, progress: Progress = no_progress,
                       warn: Callable[[BuildWarning], None] = lambda w: None) -> dict[str, Any]:
    """Takes in the chunks not imported yet, then compiles so the pages show them; returns the
    import's counts with the compile summary under "compile" (None without `compile`)."""
    from compiler.pipeline.spine import compile_vault

    with writer_lock(vault.resolve() / ".engram"):
        result = import_chunks(vault)
        if compile:
            report = compile_vault(vault.resolve(), settings, embedder=embedder, progress=progress, warn=warn)
            result["compile"] = report.summary()
    return result


@contextmanager
def _locked(engram: Path, timeout: float) -> Iterator[None]:
    """The writer lock; failing to get it is recorded as a failed sync (a hung process must be noticed)."""
    stack = ExitStack()
    try:
        stack.enter_context(writer_lock(engram, timeout=timeout))
    except BusyError as error:
        record_failure(engram, "sync", str(error))
        raise
    with stack:
        yield


def _recover(repo: Any, branch: str, settings: Settings, result: dict[str, Any]) -> None:
    """Repairs what a killed run may have left: stale git locks, our rebase, uncommitted chunks."""
    stale = sync_setting(settings, "stale_lock_seconds", 60.0)
    notes = [f"removed stale .git/{name}" for name in clear_stale_locks(repo, branch, stale)]
    aborted = recover_interrupted(repo)
    notes += [aborted] if aborted else []
    notes += [f"removed {name}, left by an interrupted write" for name in _stale_temp_files(repo.vault, stale)]
    leftover = commit_paths(repo, sync_files(repo.vault), "engram sync: commit chunks an interrupted sync left behind")
    notes += [f"committed chunks an interrupted sync left ({leftover[:8]})"] if leftover else []
    for note in notes:
        log(repo.vault / ".engram", "recover", note)
    result["recovered"] = notes


def _stale_temp_files(vault: Path, stale_seconds: float) -> list[str]:
    """Removes temp files of atomic writes (`.engram-*.tmp`) older than `stale_seconds`; returns their names."""
    removed = []
    for folder in (vault / ".engram", vault / ".engram" / "chunks"):
        for temp in sorted(folder.glob(".engram-*.tmp")) if folder.is_dir() else []:
            try:
                if time.time() - temp.stat().st_mtime >= stale_seconds:
                    temp.unlink()
                    removed.append(temp.relative_to(vault).as_posix())
            except OSError:
                continue
    return removed


def _pull(repo: Any, remote: str, branch: str) -> dict[str, Any]:
    pulled = pull_rebase(repo, remote, branch, repo.rel(f".engram/{MANIFEST}"))
    return {"pulled": pulled["pulled"], "resolved": pulled["resolved"]}


def _push_with_retry(repo: Any, remote: str, branch: str, result: dict[str, Any]) -> None:
    ok, error = push(repo, remote, branch)
    if not ok and is_rejection(error):
        log(repo.vault / ".engram", "retry", f"push rejected ({error}): pulling and pushing once more")
        result["resolved"] = result.get("resolved", 0) + _pull(repo, remote, branch)["resolved"]
        result["push_retries"] = 1
        ok, error = push(repo, remote, branch)
    if not ok:
        raise GitError(f"git push {remote} {branch} failed: {error} (nothing is lost: the commit stays local "
                       "and the next sync pushes it)")
    result["pushed"] = True


def commit_message(result: dict[str, Any], name: str) -> str:
    """Returns the commit message: the counts on the first line, then the details."""
    exported = result.get("export") or {}
    imported = result.get("import") or {}
    head = (f"engram sync ({name}): chunk {exported['chunk']}, {exported['events']} events, "
            f"{exported['memories']} memories" if exported.get("chunk") else f"engram sync ({name}): manifest")
    body = [summary({k: result[k] for k in ("import", "export", "quarantined") if k in result})]
    if exported.get("adopted"):
        body.append(f"listed chunks an interrupted export left unlisted: {', '.join(exported['adopted'])}")
    if imported.get("chunks_new"):
        body.append(f"imported chunks: {', '.join(imported['chunks_new'])}")
    return head + "\n\n" + "\n".join(body)


# -- install -------------------------------------------------------------------------------------

def install_sync(vault: Path, settings: Settings) -> dict[str, Any]:
    """Sets a vault up for `engram sync`: the manifest merge driver and ignores for local state.

    Writes `.gitattributes` (`.engram/manifest.json merge=engram-manifest`), adds the local
    files (cache, journal, lock, sync log and status, the generated folder) to `.gitignore`,
    registers the driver in the repository's git config, and commits the two files if they
    changed. Idempotent. Returns what it changed.
    """
    root = vault.resolve()
    repo = open_repo(root)
    changed = [name for name, lines in ((".gitattributes", [ATTRIBUTES_LINE, HISTORY_ATTRIBUTES_LINE]),
                                        (".gitignore", [*LOCAL_STATE, f"/{settings.out}/"]))
               if _ensure_lines(root / name, lines)]
    driver = f"{_engram_command()} merge-manifest %O %A %B"
    git(root, "config", "--local", f"merge.{DRIVER}.name", "engram chunk manifest: union by chunk id")
    git(root, "config", "--local", f"merge.{DRIVER}.driver", driver)
    commit = commit_paths(repo, changed, "engram sync install: manifest merge driver, local state ignored") \
        if changed else ""
    return {"changed": changed, "driver": driver, "commit": commit}


def _ensure_lines(path: Path, lines: list[str]) -> bool:
    """Appends the lines `path` lacks (under an engram comment); returns whether it changed."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in lines if line not in present]
    if not missing:
        return False
    block = ("" if not text or text.endswith("\n") else "\n") + "# engram sync (engram sync install)\n"
    path.write_text(text + block + "\n".join(missing) + "\n", encoding="utf-8")
    return True


def _engram_command() -> str:
    """Returns how git should call `engram`: its absolute path when found (cron has a bare PATH)."""
    beside = Path(sys.executable).with_name("engram")
    found = str(beside) if beside.is_file() else shutil.which("engram")
    return shlex.quote(found) if found else "engram"
