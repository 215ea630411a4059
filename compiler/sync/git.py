"""The git half of `engram sync`: pull --rebase, resolve the manifest, commit our files, push. Never force.

Every command runs with prompts off, English messages and `true` as the editor, so an
unattended run never waits for a person. The only conflict resolved here is the one two
machines exporting at once produce, in `.engram/manifest.json` (the union by chunk id); any
other conflict aborts the rebase, leaving the repository as it was, and fails with the files named.

The manifest conflict is resolved here whether or not this clone has the merge driver: a
`.gitattributes` committed by another machine names `engram-manifest`, and a clone whose config
lacks its command line would stop git itself ("custom merge driver engram-manifest lacks command
line"). So the rebase runs with a stand-in driver (`false`: "this merge conflicts") when none is
configured, and the conflict it leaves is settled by the same union rule.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from compiler.core.errors import CorruptDataError, GitError
from compiler.events.manifest import manifest_bytes, parse_manifest, union

MANIFEST_DRIVER = "engram-manifest"  # the merge driver `engram sync install` registers for the manifest
REBASE_MARKER = "engram-sync-rebase"  # in the git dir while our pull --rebase runs: a leftover one is ours
GIT_TIMEOUT = 600


@dataclass(frozen=True)
class Repo:
    vault: Path  # where commands run (the vault may sit inside a larger repository)
    top: Path  # the work tree's root
    git_dir: Path
    prefix: str  # the vault's path inside the work tree ("" or "notes/")

    def rel(self, vault_relative: str) -> str:
        """Returns a vault-relative path as git names it (relative to the work tree's root)."""
        return f"{self.prefix}{vault_relative}"


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs git in `root`; raises GitError on failure when `check`."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true",
           "GIT_MERGE_AUTOEDIT": "no", "LC_ALL": "C", "LANGUAGE": "C"}
    try:
        result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, encoding="utf-8", errors="replace",
                                env=env, timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)}: no answer after {GIT_TIMEOUT} s") from None
    if check and result.returncode:
        raise GitError(f"git {' '.join(args)} failed: {_tail(result)}")
    return result


def _tail(result: subprocess.CompletedProcess[str]) -> str:
    text = [line.strip() for line in (result.stderr or result.stdout or "").strip().splitlines()
            if line.strip() and not line.startswith("hint:")]  # git's hints bury the error itself
    return " / ".join(text[-4:]) or f"exit code {result.returncode}"


def open_repo(vault: Path) -> Repo:
    """Returns the repository holding `vault`; raises GitError when there is none."""
    found = git(vault, "rev-parse", "--show-toplevel", "--absolute-git-dir", "--show-prefix", check=False)
    if found.returncode:
        raise GitError(f"{vault} is not in a git repository: clone the shared vault repository first")
    top, git_dir, *prefix = found.stdout.splitlines()
    return Repo(vault, Path(top), Path(git_dir), prefix[0] if prefix else "")


def current_branch(repo: Repo) -> str:
    found = git(repo.vault, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if found.returncode:
        raise GitError("HEAD is detached: check out the branch the machines share")
    return found.stdout.strip()


def has_remote(repo: Repo, remote: str) -> bool:
    return git(repo.vault, "remote", "get-url", remote, check=False).returncode == 0


def clear_stale_locks(repo: Repo, branch: str, stale_seconds: float) -> list[str]:
    """Waits for git lock files to go; removes those older than `stale_seconds` (left by a killed git).

    Returns the names of the files removed.
    """
    names = ["index.lock", "HEAD.lock", "ORIG_HEAD.lock", "packed-refs.lock", f"refs/heads/{branch}.lock"]
    removed = []
    for name in names:
        lock = repo.git_dir / name
        while lock.exists():
            try:
                age = time.time() - lock.stat().st_mtime
            except OSError:
                break
            if age >= stale_seconds:
                lock.unlink(missing_ok=True)
                removed.append(name)
                break
            time.sleep(0.1)
    return removed


def recover_interrupted(repo: Repo) -> str:
    """Aborts a rebase our own killed run left behind; refuses one a person started. Returns what it did."""
    marker = repo.git_dir / REBASE_MARKER
    rebasing = (repo.git_dir / "rebase-merge").exists() or (repo.git_dir / "rebase-apply").exists()
    if rebasing and marker.exists():
        git(repo.vault, "rebase", "--abort")
        marker.unlink(missing_ok=True)
        return "aborted the rebase an interrupted sync left behind"
    marker.unlink(missing_ok=True)
    if rebasing:
        raise GitError("a rebase is in progress that engram sync did not start: finish it "
                       "(git rebase --continue) or abort it (git rebase --abort)")
    if (repo.git_dir / "MERGE_HEAD").exists():
        raise GitError("a merge is in progress: finish it (git commit) or abort it (git merge --abort)")
    return ""


def pull_rebase(repo: Repo, remote: str, branch: str, manifest: str) -> dict[str, int | bool]:
    """`git pull --rebase --autostash` as fetch + rebase, resolving manifest conflicts by union; returns what happened.

    Returns {"pulled": bool (the remote branch exists), "resolved": manifest conflicts resolved}.
    """
    before = _head(repo)
    marker = repo.git_dir / REBASE_MARKER
    marker.write_text(str(os.getpid()))
    try:
        # fetch + rebase rather than `git pull --rebase`: pull goes through FETCH_HEAD, which a git
        # left running by a killed sync may write at the same time ("Cannot rebase onto multiple
        # branches"); the remote-tracking ref is updated atomically, under git's ref lock.
        tracking = f"refs/remotes/{remote}/{branch}"
        fetched = git(repo.vault, "fetch", "--no-write-fetch-head", remote, f"+refs/heads/{branch}:{tracking}",
                      check=False)
        if fetched.returncode and "couldn't find remote ref" in (fetched.stderr + fetched.stdout):
            return {"pulled": False, "resolved": 0, "changed": False}
        if fetched.returncode:
            raise GitError(f"git fetch {remote} {branch} failed: {_tail(fetched)}")
        driver = _driver_stand_in(repo)
        result = git(repo.vault, *driver, "rebase", "--autostash", tracking, check=False)
        resolved = 0
        while result.returncode:
            if not _rebasing(repo):
                raise GitError(f"git pull --rebase {remote} {branch} failed: {_tail(result)}")
            resolved += _resolve_conflicts(repo, manifest, _tail(result))
            result = git(repo.vault, *driver, "rebase", "--continue", check=False)
            if result.returncode and _rebasing(repo) and not _unmerged(repo) and _nothing_staged(repo):
                result = git(repo.vault, *driver, "rebase", "--skip", check=False)  # our commit became empty
    finally:
        marker.unlink(missing_ok=True)
    return {"pulled": True, "resolved": resolved, "changed": _head(repo) != before}


def _driver_stand_in(repo: Repo) -> list[str]:
    """Returns the git options that stand in for a manifest merge driver this clone lacks ([] when it has one)."""
    found = git(repo.vault, "config", "--get", f"merge.{MANIFEST_DRIVER}.driver", check=False)
    return [] if found.returncode == 0 and found.stdout.strip() else ["-c", f"merge.{MANIFEST_DRIVER}.driver=false"]


def _rebasing(repo: Repo) -> bool:
    return (repo.git_dir / "rebase-merge").exists() or (repo.git_dir / "rebase-apply").exists()


def _unmerged(repo: Repo) -> list[str]:
    found = git(repo.top, "diff", "--name-only", "--diff-filter=U", "-z")
    return sorted(p for p in found.stdout.split("\0") if p)


def _nothing_staged(repo: Repo) -> bool:
    return git(repo.top, "diff", "--cached", "--quiet", check=False).returncode == 0


def _resolve_conflicts(repo: Repo, manifest: str, said: str) -> int:
    """Resolves a manifest conflict by union; aborts the rebase on anything else. Returns 1."""
    conflicted = _unmerged(repo)
    others = [p for p in conflicted if p != manifest]
    if others or not conflicted:
        git(repo.vault, "rebase", "--abort", check=False)
        what = f"conflicts engram cannot resolve: {', '.join(others)}" if others else f"an error: {said}"
        raise GitError(f"pull --rebase stopped on {what}; the rebase was aborted (nothing changed): "
                       "fix it by hand and run engram sync again")
    try:
        base, ours, theirs = (parse_manifest(_stage(repo, n, manifest), f"{manifest} (stage {n})") for n in (1, 2, 3))
    except CorruptDataError as error:
        git(repo.vault, "rebase", "--abort", check=False)
        raise GitError(f"cannot merge the manifests: {error}") from None
    (repo.top / manifest).write_bytes(manifest_bytes(union(base, ours, theirs)))
    git(repo.top, "add", "--", manifest)
    return 1


def _stage(repo: Repo, number: int, path: str) -> str:
    """Returns one side of a conflicted file ("" when that side has none: added on both sides)."""
    found = git(repo.top, "show", f":{number}:{path}", check=False)
    return found.stdout if found.returncode == 0 else ""


def _head(repo: Repo) -> str:
    return git(repo.vault, "rev-parse", "--verify", "--quiet", "HEAD", check=False).stdout.strip()


def commit_paths(repo: Repo, paths: list[str], message: str) -> str:
    """Commits only `paths` (vault-relative; other staged work is left alone); returns the commit, or ""."""
    present = [repo.rel(p) for p in paths if (repo.vault / p).exists()]
    if not present:
        return ""
    git(repo.top, "add", "-A", "--", *present)
    if git(repo.top, "diff", "--cached", "--quiet", "--", *present, check=False).returncode == 0:
        return ""
    # --no-verify: the commit holds only engram's data files, and an unattended run must not
    # stop on a hook written for people's commits.
    git(repo.top, "commit", "--no-verify", "--quiet", "-m", message, "--", *present)
    return _head(repo)


def push(repo: Repo, remote: str, branch: str) -> tuple[bool, str]:
    """Pushes HEAD to remote/branch (fast-forward only: never forced); returns (ok, rejected-or-error text)."""
    result = git(repo.vault, "push", "--quiet", remote, f"HEAD:refs/heads/{branch}", check=False)
    return result.returncode == 0, _tail(result) if result.returncode else ""


def is_rejection(text: str) -> bool:
    return any(word in text for word in ("rejected", "non-fast-forward", "fetch first", "failed to push"))


def ahead_of_remote(repo: Repo, remote: str, branch: str) -> int:
    """Returns how many local commits the remote-tracking branch lacks (all of them if it is unknown)."""
    found = git(repo.vault, "rev-list", "--count", f"{remote}/{branch}..HEAD", check=False)
    if found.returncode:
        found = git(repo.vault, "rev-list", "--count", "HEAD", check=False)
    return int(found.stdout.strip() or 0) if found.returncode == 0 else 0


def remote_manifest(repo: Repo, remote: str, branch: str, manifest: str) -> str | None:
    """Returns the manifest text at the last fetched remote/branch (no network), or None if unknown."""
    found = git(repo.vault, "show", f"{remote}/{branch}:{manifest}", check=False)
    return found.stdout if found.returncode == 0 else None
