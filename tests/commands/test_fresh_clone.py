"""A fresh `git clone` of this repository (issue 12, item 7), compiled with the real model.

Every committed page of vault-example/ must come back from what is committed (the notes and the
memories' chunk: the journal is machine-local), leaving `git status` clean; the pre-commit hook,
run by the real pre-commit framework, says in one line what to run first and passes after it.
What is cloned is the repository's HEAD: commit before running this test on a change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PRE_COMMIT = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")


def sh(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=1200, check=False)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    if sh(ROOT, "git", "rev-parse", "--git-dir").returncode:
        pytest.skip("not a git checkout")
    base = tmp_path_factory.mktemp("fresh")
    repo = base / "clone"
    assert sh(base, "git", "clone", "--quiet", str(ROOT), str(repo)).returncode == 0
    bin_dir = base / "bin"  # `engram` on PATH is the clone's own code, as `make install` would put it
    bin_dir.mkdir()
    (bin_dir / "engram").write_text(f'#!/bin/sh\nPYTHONPATH={repo} exec {sys.executable} -m compiler "$@"\n')
    (bin_dir / "engram").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PRE_COMMIT_HOME": str(base / "pc"),
           "PYTHONPATH": str(repo)}
    env.pop("ENGRAM_VAULT", None)
    env.pop("ENGRAM_NOW", None)
    return repo, env


def test_a_fresh_clone_compiles_to_its_committed_pages_and_the_hook_guides_then_passes(clone):
    repo, env = clone
    assert not (repo / "vault-example/.engram/journal.jsonl").exists()
    assert list((repo / "vault-example/.engram/chunks").glob("*.jsonl.gz"))  # the memories travel as a chunk
    before = sh(repo, "engram", "check", "vault-example", env=env)
    assert before.returncode == 1 and before.stderr.count("\n") == 1
    assert "run `engram compile vault-example` first" in before.stderr

    if PRE_COMMIT:  # the framework, with this repository's `repo: local` hook
        hooked = sh(repo, PRE_COMMIT, "run", "--all-files", env=env)
        assert hooked.returncode == 1 and "engram compile vault-example" in hooked.stdout

    compiled = sh(repo, "engram", "compile", "vault-example", env=env)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    assert "0 pages written" in compiled.stderr  # every committed page came back byte for byte
    assert sh(repo, "git", "status", "--porcelain").stdout == ""  # caches, journal, lock: all ignored
    assert sh(repo, "engram", "check", "vault-example", env=env).returncode == 0
    again = sh(repo, "engram", "compile", "vault-example", env=env)  # what `make demo` twice does
    assert again.returncode == 0 and sh(repo, "git", "status", "--porcelain").stdout == ""


@pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is in the test extra: pip install -e '.[test]'")
def test_pre_commit_runs_the_hook_on_a_fresh_clone(clone, tmp_path):
    """Both ways to wire it: this repository's `repo: local` config, and the published hook
    (.pre-commit-hooks.yaml) from a repository at a revision. Neither builds an environment."""
    repo, env = clone
    if sh(repo, "engram", "check", "vault-example", env=env).returncode:
        assert sh(repo, "engram", "compile", "vault-example", env=env).returncode == 0
    local = sh(repo, PRE_COMMIT, "run", "--all-files", env=env)
    assert local.returncode == 0, local.stdout + local.stderr
    assert "engram check vault-example" in local.stdout and "Passed" in local.stdout
    rev = sh(repo, "git", "rev-parse", "HEAD").stdout.strip()
    config = tmp_path / "published.yaml"
    config.write_text(f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n"
                      "      - id: engram-check\n        args: [vault-example]\n")
    published = sh(repo, PRE_COMMIT, "run", "--all-files", "-c", str(config), env=env)
    assert published.returncode == 0, published.stdout + published.stderr
    assert not list((Path(env["PRE_COMMIT_HOME"])).rglob("py_env-*"))  # no virtualenv, so no torch install
    config.write_text(f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n"
                      "      - id: engram-lint\n        args: [vault-example]\n")
    linted = sh(repo, PRE_COMMIT, "run", "--all-files", "-c", str(config), env=env)
    assert linted.returncode == 1, linted.stdout + linted.stderr  # the example's planted contradiction stops a commit
    assert "wiki/entities/Amazon SQS.md" in linted.stdout and "Traceback" not in linted.stdout
    assert sh(repo, "git", "status", "--porcelain").stdout == ""
