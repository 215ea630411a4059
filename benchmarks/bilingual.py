"""Cross-language recall: memories in one language, questions in the other (English ↔ Spanish).

    python benchmarks/bilingual.py [--model M] [--json]

A small hand-made set (16 facts, each written in both languages, one question per language).
Each direction stores the facts in one language and asks the questions in the other through
the product's recall; prints Hit@1 and Hit@3 per direction. Then notes: a copy of vault-example/
(English and Spanish notes) is compiled with the model and asked 12 questions, each in the other
language than the note that answers it, by hybrid (`engram query`) and vector (`engram vsearch`)
search; Hit@1 and Hit@3 of each. --model takes any model setting:
`multilingual-e5-small` (the `multilingual` extra) or a sentence-transformers directory; the
default is the bundled MiniLM (or $ENGRAM_MODEL).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import copy_example  # noqa: E402

from compiler.core.settings import load_settings  # noqa: E402
from compiler.embed.embedder import load_embedder  # noqa: E402
from compiler.memory.input import MemoryInput  # noqa: E402
from compiler.memory.recall import recall  # noqa: E402
from compiler.memory.vault import VaultMemory  # noqa: E402
from compiler.memory.write import write_memories  # noqa: E402
from compiler.notes.search import hybrid_search, vector_search  # noqa: E402
from compiler.pipeline.spine import compile_vault  # noqa: E402

# (fact in English, fact in Spanish, question in English, question in Spanish)
FACTS = [
    ("The payments service is deployed with blue-green releases on ECS.",
     "El servicio de pagos se despliega con releases blue-green en ECS.",
     "How is the payments service deployed?", "¿Cómo se despliega el servicio de pagos?"),
    ("Marta owns the refunds and disputes flow.", "Marta es la responsable del flujo de reembolsos y disputas.",
     "Who is responsible for refunds?", "¿Quién se encarga de los reembolsos?"),
    ("The nightly backup is stored in an S3 bucket in Frankfurt.",
     "La copia de seguridad nocturna se guarda en un bucket de S3 en Fráncfort.",
     "Where are the nightly backups kept?", "¿Dónde se guardan las copias de seguridad?"),
    ("The user prefers dark mode in every editor.", "El usuario prefiere el modo oscuro en todos los editores.",
     "Which color theme does the user like?", "¿Qué tema de colores le gusta al usuario?"),
    ("Never deploy on Fridays after three in the afternoon.", "Nunca desplegamos los viernes después de las tres de la tarde.",
     "When are deploys forbidden?", "¿Cuándo está prohibido desplegar?"),
    ("The data warehouse is refreshed every six hours with dbt.",
     "El almacén de datos se actualiza cada seis horas con dbt.",
     "How often is the warehouse updated?", "¿Cada cuánto se actualiza el almacén de datos?"),
    ("Integration tests run against a real PostgreSQL in Docker.",
     "Las pruebas de integración usan un PostgreSQL real en Docker.",
     "What database do integration tests use?", "¿Qué base de datos usan las pruebas de integración?"),
    ("The on-call rotation changes every Monday at nine.", "La guardia rota cada lunes a las nueve.",
     "When does the on-call shift change?", "¿Cuándo cambia el turno de guardia?"),
    ("Customer invoices are generated as PDF on the first day of the month.",
     "Las facturas de los clientes se generan en PDF el primer día del mes.",
     "When are invoices created?", "¿Cuándo se crean las facturas?"),
    ("The mobile app is written in Kotlin and Swift.", "La aplicación móvil está escrita en Kotlin y Swift.",
     "Which languages is the mobile app built with?", "¿En qué lenguajes está hecha la app móvil?"),
    ("API keys are rotated every ninety days.", "Las claves de la API se rotan cada noventa días.",
     "How often do we rotate API keys?", "¿Cada cuánto rotamos las claves de la API?"),
    ("The office is closed during the first week of August.",
     "La oficina cierra durante la primera semana de agosto.",
     "When is the office closed for holidays?", "¿Cuándo cierra la oficina por vacaciones?"),
    ("Search uses OpenSearch with three data nodes.", "La búsqueda usa OpenSearch con tres nodos de datos.",
     "What runs the search engine?", "¿Qué motor usa la búsqueda?"),
    ("Luis is learning Rust to rewrite the image resizer.",
     "Luis está aprendiendo Rust para reescribir el redimensionador de imágenes.",
     "Who is rewriting the image resizer?", "¿Quién va a reescribir el redimensionador de imágenes?"),
    ("The rate limit is one hundred requests per minute per customer.",
     "El límite es de cien peticiones por minuto por cliente.",
     "What is the API rate limit?", "¿Cuál es el límite de peticiones de la API?"),
    ("Product analytics events are deduplicated by message id.",
     "Los eventos de analítica de producto se deduplican por message id.",
     "How are duplicate analytics events removed?", "¿Cómo se eliminan los eventos duplicados?"),
]

# (question, the vault-example/ note that answers it): English questions for Spanish notes, then
# Spanish questions for English notes.
NOTE_QUESTIONS = [
    ("quarterly goals and objectives", "Notas/Objetivos del trimestre.md"),
    ("monthly AWS cost per service", "Analyses/costes-infraestructura.qmd"),
    ("books I want to read in Spanish", "Notas/Lecturas pendientes.md"),
    ("ideas to improve the data pipeline", "Notas/Ideas para el pipeline de datos.md"),
    ("meeting with the data team", "Notas/Reunión con el equipo de datos.md"),
    ("¿cómo revertimos un despliegue?", "Engineering/Deployment.md"),
    ("ajustes de autovacuum en postgres", "Engineering/Postgres Tuning.md"),
    ("verificar la firma de los webhooks de Stripe", "Projects/Payments/Stripe Integration.md"),
    ("qué hacer en los primeros minutos de un incidente", "Engineering/Incident Runbook.md"),
    ("reembolsos y disputas de pagos", "Projects/Payments/Refunds and Disputes.md"),
    ("claves de idempotencia para los pagos", "Decisions/ADR-002 Idempotency Keys for Payments.md"),
    ("estrategia de pruebas", "Engineering/Testing Strategy.md"),
]


def hit_rates(ranks: list[int]) -> dict[str, float]:
    return {"hit@1": round(sum(r == 1 for r in ranks) / len(ranks), 3),
            "hit@3": round(sum(r > 0 for r in ranks) / len(ranks), 3)}


def run_direction(store_spanish: bool, model: str) -> dict[str, float]:
    """Stores the facts in one language, asks in the other; returns Hit@1 and Hit@3."""
    vault = Path(tempfile.mkdtemp(prefix="engram-bilingual-"))
    (vault / ".engram").mkdir()
    settings = load_settings(vault, model=model, now="2026-11-30 12:00:00")
    try:
        with VaultMemory(vault, settings) as memories:
            stored = write_memories(memories, [MemoryInput(content=f[1] if store_spanish else f[0], project="p",
                                                           source_id=f"fact-{n}") for n, f in enumerate(FACTS)])
            ids = [r["id"] for r in stored["results"]]
            ranks = []
            for n, fact in enumerate(FACTS):
                hits = recall(memories, fact[2] if store_spanish else fact[3], 3, reinforce=False)
                ranks.append(next((r for r, h in enumerate(hits, 1) if h["id"] == ids[n]), 0))
    finally:
        shutil.rmtree(vault, ignore_errors=True)
    return hit_rates(ranks)


def run_notes(model: str) -> dict[str, dict[str, float]]:
    """Compiles a copy of vault-example/ with `model`, asks NOTE_QUESTIONS; returns Hit@1 and Hit@3 per search."""
    workdir = Path(tempfile.mkdtemp(prefix="engram-bilingual-notes-"))
    try:
        vault = copy_example(workdir / "vault")
        settings = load_settings(vault, model=model)
        compile_vault(vault, settings)
        embedder = load_embedder(model)
        ranks: dict[str, list[int]] = {"hybrid (query)": [], "vector (vsearch)": []}
        for question, note in NOTE_QUESTIONS:
            found = {"hybrid (query)": hybrid_search(vault, question, 3, embedder=embedder,
                                                     graph_bonus=settings.graph_bonus),
                     "vector (vsearch)": vector_search(vault, question, 3, embedder=embedder)}
            for name, results in found.items():
                ranks[name].append(next((r for r, h in enumerate(results, 1) if h["file"] == note), 0))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {name: hit_rates(r) for name, r in ranks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="", help="multilingual-e5-small or a sentence-transformers directory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = args.model or load_settings(Path(tempfile.gettempdir())).model
    result = {"model": model, "facts": len(FACTS),
              "spanish notes, english questions": run_direction(True, model),
              "english notes, spanish questions": run_direction(False, model),
              "vault-example notes": run_notes(model)}
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    print(f"{model}, {len(FACTS)} facts")
    for name in ("spanish notes, english questions", "english notes, spanish questions"):
        print(f"  {name:<34} Hit@1 {result[name]['hit@1']:.0%}  Hit@3 {result[name]['hit@3']:.0%}")
    print(f"vault-example, {len(NOTE_QUESTIONS)} questions across languages")
    for name, row in result["vault-example notes"].items():
        print(f"  {name:<34} Hit@1 {row['hit@1']:.0%}  Hit@3 {row['hit@3']:.0%}")


if __name__ == "__main__":
    main()
