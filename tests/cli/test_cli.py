"""The `engram` command through Click's runner, with parsed JSON. Uses the real bundled model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main

pytestmark = pytest.mark.integration

NOTES = {
    ".obsidian/app.json": "{}",
    "Deploy.md": "---\ntags: [ops]\n---\n# Deploying the payments service\n\nRun the blue-green deploy with "
                 "`make release`, then watch the error budget dashboard.\n",
    "Cooking/Pasta.md": "# Pasta\n\nBoil water, add salt, cook the spaghetti for nine minutes.\n",
    "Notas/Despliegue.md": "# Despliegue\n\nPara desplegar el servicio de pagos usamos [[Deploy]].\n",
    "Broken.md": "---\ntags: [unclosed\n---\n# Broken frontmatter\n\nStill searchable text about invoices.\n",
}


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, catch_exceptions=False, args=list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def compiled(make_vault) -> Path:
    vault = make_vault(NOTES)
    code, _, err = run("compile", str(vault))
    assert code == 0, err
    return vault


def test_compile_json_report_has_the_documented_keys(make_vault):
    vault = make_vault(NOTES)
    code, out, err = run("compile", str(vault), "--json")
    report = json.loads(out)
    assert code == 0
    assert {"notes", "embedded", "written", "warnings", "seconds"} <= set(report)
    assert report["notes"] == 4 and report["embedded"] >= 4
    assert any(w["file"] == "Broken.md" and w["line"] == 2 for w in report["warnings"])
    assert err.strip().splitlines()[-1].startswith("engram: 4 notes")  # the one-line summary


def test_strict_turns_warnings_into_exit_1(compiled):
    code, _, err = run("compile", "--vault", str(compiled), "--strict")
    assert code == 1 and "warning: Broken.md:2" in err


def test_missing_vault_is_a_usage_error(tmp_path):
    code, _, err = run("compile", str(tmp_path / "nope"))
    assert code == 2 and err == f"engram: no such vault folder: {tmp_path / 'nope'}\n"


def test_search_json_hits_carry_qmd_keys(compiled):
    code, out, _ = run("search", "--vault", str(compiled), "--json", "invoices")
    hits = json.loads(out)
    assert code == 0 and hits[0]["file"] == "Broken.md"
    assert set(hits[0]) >= {"docid", "score", "file", "line", "title", "snippet"}
    assert hits[0]["docid"].startswith("#") and len(hits[0]["docid"]) == 7 and 0 < hits[0]["score"] <= 1


def test_vector_search_finds_by_meaning(compiled):
    code, out, _ = run("vsearch", "--vault", str(compiled), "--json", "how do I ship a new release to production?")
    assert code == 0 and json.loads(out)[0]["file"] == "Deploy.md"


def test_hybrid_query_filters_and_formats(compiled):
    code, out, _ = run("query", "--vault", str(compiled), "--json", "--path", "Notas", "payments deploy")
    assert code == 0 and [h["file"] for h in json.loads(out)] == ["Notas/Despliegue.md"]
    code, out, _ = run("query", "--vault", str(compiled), "--files", "--tag", "ops", "deploy")
    assert code == 0 and out.strip().endswith(",Deploy.md") and len(out.strip().splitlines()) == 1
    code, out, _ = run("query", "--vault", str(compiled), "--md", "-n", "1", "spaghetti")
    assert code == 0 and out.startswith("- [[Cooking/Pasta.md|Pasta]]")


def test_min_score_drops_weak_hits(compiled):
    code, out, _ = run("search", "--vault", str(compiled), "--json", "--min-score", "0.99", "salt")
    assert code == 0 and json.loads(out) == []


def test_vault_is_found_from_the_current_folder(compiled, monkeypatch):
    monkeypatch.chdir(compiled / "Cooking")
    monkeypatch.delenv("ENGRAM_VAULT", raising=False)
    code, out, _ = run("search", "--json", "spaghetti")
    assert code == 0 and json.loads(out)[0]["file"] == "Cooking/Pasta.md"


def test_search_before_compile_says_what_to_do(make_vault):
    vault = make_vault({"a.md": "# A\n"})
    code, _, err = run("search", "--vault", str(vault), "x")
    assert code == 1 and "engram compile" in err


def test_keyword_search_does_not_import_torch(compiled):
    probe = ("import sys; from compiler.cli.main import main\n"
             "try: main(['search', '--vault', sys.argv[1], 'deploy'])\n"
             "except SystemExit: pass\n"
             "print('TORCH' if 'torch' in sys.modules or 'chromadb' in sys.modules else 'CLEAN')")
    result = subprocess.run([sys.executable, "-c", probe, str(compiled)], capture_output=True, text=True, check=True)
    assert result.stdout.strip().endswith("CLEAN"), result.stdout
