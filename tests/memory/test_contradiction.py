"""Contradiction detector: a labelled table of realistic agent-memory pairs, English and Spanish.

The table was written before the implementation and is labelled by meaning, not by what the
detector manages: a few pairs need world knowledge (a vegetarian does not eat meat) and are
expected to be missed. The precision / recall test measures the whole table.
"""

from __future__ import annotations


import pytest

from compiler.memory.contradiction import MAX_STATEMENTS, Verdict, check_contradiction, statements

T, F = True, False

# (old memory, new memory, contradicts?)
PAIRS: list[tuple[str, str, bool]] = [
    # --- English: contradictions -------------------------------------------------------------
    ("The user prefers TypeScript for new services", "The user decided to abandon TypeScript for Go", T),
    ("Deploys run on Fridays", "We never deploy on Fridays", T),
    ("The feature flag is enabled in production", "The feature flag is disabled in production", T),
    ("Uses PostgreSQL 15", "Uses PostgreSQL 16", T),
    ("The project uses Poetry to manage dependencies", "The project switched from Poetry to uv for dependency management", T),
    ("CI runs on Jenkins", "The team replaced Jenkins with GitHub Actions for CI", T),
    ("The public API is built with REST endpoints", "The public API migrated from REST to GraphQL last sprint", T),
    ("The user no longer uses Vim", "The user uses Vim for all editing", T),
    ("The login redirect bug is fixed in v2.3", "The login redirect bug is still broken in v2.3", T),
    ("The nightly backup job works", "The nightly backup job fails since the disk filled up", T),
    ("The RFC for the new auth flow was approved", "The RFC for the new auth flow was rejected by the security team", T),
    ("The user drinks coffee every morning", "The user stopped drinking coffee", T),
    ("The user likes dark mode in every editor", "The user hates dark mode", T),
    ("Redis caching is enabled for the session store", "We disabled Redis caching for the session store after the outage", T),
    ("The assumption that the cache is shared across workers is true", "The assumption that the cache is shared across workers is false", T),
    ("The user avoids ORMs and writes raw SQL", "The user likes using an ORM for database access", T),
    ("The user prefers spaces over tabs", "The user switched to tabs for indentation", T),
    ("Staging uses the m5.large instance type", "Staging uses the m6i.xlarge instance type", T),
    ("The API rate limit is 100 requests per minute", "The API rate limit was raised to 500 requests per minute", T),
    ("The user is vegetarian", "The user eats meat regularly", T),  # needs world knowledge
    ("The mobile app supports offline mode", "The mobile app does not support offline mode anymore", T),
    ("The user does not want email notifications", "The user wants email notifications for failed builds", T),
    ("Python 3.8 is supported by the SDK", "The SDK dropped support for Python 3.8", T),
    ("The flaky checkout test passes consistently now", "The checkout test still fails intermittently on CI", T),
    ("The team agreed to keep the monolith", "The team decided to split the monolith into microservices", T),
    ("Node 18 is the runtime for the Lambda functions", "The Lambda functions run on Node 20", T),
    ("The user lives in Madrid", "The user moved to Barcelona last year", T),  # needs world knowledge
    ("The user prefers Heroku for side projects", "The user abandoned Heroku for Fly.io after the free tier ended", T),
    ("New integrations should use the v1 REST API", "The v1 REST API is deprecated; new integrations must use v2", T),
    ("The staging database is reachable from the VPN", "The staging database isn't reachable from the VPN", T),
    ("The user prefers Angular for frontend work", "The user used to prefer Angular but now prefers React", T),
    ("The user wants weekly summary emails", "The user asked to stop the weekly summary emails", T),
    ("Type checking runs with mypy in strict mode", "Strict mode in mypy was turned off because of too many false positives", T),
    ("The user is happy with the current CI setup", "The user is frustrated with the slow CI setup", T),
    # --- English: compatible ------------------------------------------------------------------
    ("Never commit secrets to git", "Use environment variables for secrets", F),
    ("The user prefers TypeScript", "The user likes TypeScript's type system", F),
    ("Never deploy on Fridays", "Don't deploy on Fridays without a rollback plan", F),
    ("Tests must not hit the network", "Integration tests use a real Chroma store", F),
    ("The user prefers TypeScript for new services", "The user avoids TypeScript for quick one-off scripts", F),
    ("The feature flag is disabled in staging", "The feature flag is enabled in production", F),
    ("Never store API keys in the repository", "API keys are stored in HashiCorp Vault", F),
    ("The user likes Python for data analysis", "The user uses pandas and Polars for data analysis", F),
    ("The user hates long meetings", "The user prefers async updates over long meetings", F),
    ("Uses PostgreSQL 15 in staging", "Uses PostgreSQL 16 in production", F),
    ("The user prefers short commit messages", "The user writes commit messages in the imperative mood", F),
    ("Not only does the user use Docker, but also Podman for rootless builds", "The user uses Docker for local development", F),
    ("The cache is not disabled in production", "The cache is enabled in production", F),
    ("The user never skips code review", "The user always asks for a code review before merging", F),
    ("The user dislikes Java", "The team is migrating the billing service away from Java", F),
    ("The user prefers Go for CLIs", "The user prefers Rust for performance-critical code", F),
    ("The user uses VS Code", "The user uses VS Code with the Vim extension", F),
    ("Never use print statements for logging", "Use the structlog logger for logging", F),
    ("The user likes Python", "The user doesn't like Python 2", F),
    ("The user prefers Neovim over VS Code", "The user switched from VS Code to Neovim", F),
    ("The billing service is deprecated", "The billing service will be removed in Q3", F),
    ("Bug 123 is fixed in release 2.3", "Bug 456 is fixed in release 2.4", F),
    ("The user prefers pytest over unittest", "The user uses pytest fixtures heavily", F),
    ("The search endpoint is slow under load", "The search endpoint was rewritten to use BM25 via SQLite FTS5", F),
    ("Do not use mocks for the database layer", "Use mocks for the payment gateway in unit tests", F),
    ("The user dislikes meetings before 10am", "The user likes meetings in the afternoon", F),
    ("Avoid global state in the compiler stages", "The compiler stages pass plain data between them", F),
    ("The user isn't a fan of Kubernetes", "The user avoids Kubernetes for small projects", F),
    ("The user loves Rust", "The user is learning Rust on weekends", F),
    ("The cron job no longer fails on weekends", "The cron job works on weekends now", F),
    ("Never force push to main", "Force pushes are fine on feature branches", F),
    ("The user avoids ORMs", "The billing service uses SQLAlchemy's ORM", F),
    ("The user prefers TypeScript", "The user prefers TypeScript, but not for quick scripts", F),
    ("The user prefers PostgreSQL for OLTP workloads", "The user uses ClickHouse, not PostgreSQL, for analytics", F),
    ("Logs are shipped to Loki", "Debug logs are not shipped to Loki to save storage", F),
    ("The user doesn't like tabs", "The user doesn't like trailing whitespace either", F),
    ("The user prefers TypeScript for new services", "The user prefers TypeScript for new services and React for UIs", F),
    ("The deploy script works on macOS", "The deploy script needs bash 5 to work on macOS", F),
    # --- Spanish: contradictions --------------------------------------------------------------
    ("Prefiere TypeScript para servicios nuevos", "Ya no usa TypeScript, ahora usa Go", T),
    ("El usuario usa Vim para editar código", "El usuario dejó de usar Vim y ahora usa Neovim", T),
    ("El proyecto usa MySQL como base de datos", "El proyecto cambió de MySQL a PostgreSQL", T),
    ("La bandera de funcionalidad está activada en producción", "La bandera de funcionalidad está desactivada en producción", T),
    ("Al usuario le gusta trabajar con Docker", "El usuario odia Docker y prefiere Podman", T),
    ("El CI del proyecto corre en Jenkins", "El equipo abandonó Jenkins por GitHub Actions", T),
    ("Los despliegues se hacen los viernes", "Nunca desplegamos los viernes", T),
    ("El usuario prefiere trabajar de noche", "El usuario ya no trabaja de noche; ahora empieza a las 7 de la mañana", T),
    ("El job de backup nocturno funciona", "El job de backup nocturno falla desde que se llenó el disco", T),
    ("El RFC del nuevo flujo de autenticación fue aprobado", "El RFC del nuevo flujo de autenticación fue rechazado por el equipo de seguridad", T),
    ("La API pública usa REST", "La API pública migró de REST a GraphQL", T),
    ("Usa PostgreSQL 15 en producción", "Usa PostgreSQL 16 en producción", T),
    ("El usuario toma café todas las mañanas", "El usuario dejó de tomar café", T),
    ("Reemplazamos Poetry por uv en el monorepo", "El monorepo usa Poetry para gestionar dependencias", T),
    ("La caché de Redis está habilitada para las sesiones", "Deshabilitamos la caché de Redis para las sesiones tras la caída", T),
    ("El usuario odia las reuniones largas", "Al usuario le encantan las reuniones largas de planificación", T),
    ("La suposición de que la caché se comparte entre workers es cierta", "La suposición de que la caché se comparte entre workers es falsa", T),
    ("El build de ARM está roto", "El build de ARM ya funciona", T),
    ("El usuario usa Windows en el trabajo", "El usuario se pasó de Windows a macOS en el trabajo", T),
    ("Los tests de integración no usan la red", "Los tests de integración usan la red para descargar fixtures", T),
    ("El usuario prefiere Heroku para proyectos personales", "El usuario abandonó Heroku por Fly.io", T),
    ("La app móvil soporta modo offline", "La app móvil ya no soporta modo offline", T),
    ("El usuario usa Slack para coordinar al equipo", "El equipo reemplazó Slack con Discord", T),
    ("El usuario prefiere Angular para el frontend", "Antes el usuario prefería Angular, ahora prefiere React", T),
    # --- mixed English / Spanish: contradictions ----------------------------------------------
    ("Prefers TypeScript for new services", "Ya no usa TypeScript, ahora prefiere Go", T),
    ("The user prefers Go for CLIs", "El usuario ya no usa Go para CLIs", T),
    ("Dark mode está activado en el IDE del usuario", "The user disabled dark mode in the IDE", T),
    ("The user likes Kotlin", "Al usuario no le gusta Kotlin", T),
    ("The nightly backup job works", "El job de backup nocturno falla desde ayer", T),
    ("Deploys run on Fridays", "Nunca desplegamos los viernes", T),  # needs a bilingual lexicon
    # --- Spanish: compatible ------------------------------------------------------------------
    ("Nunca subas secretos a git", "Usa variables de entorno para los secretos", F),
    ("El usuario prefiere TypeScript", "Al usuario le gusta el sistema de tipos de TypeScript", F),
    ("Nunca desplegar los viernes", "No desplegar los viernes sin un plan de rollback", F),
    ("Los tests no deben acceder a la red", "Los tests de integración usan un Chroma real", F),
    ("La bandera está desactivada en staging", "La bandera está activada en producción", F),
    ("No solo usa Docker, sino también Podman", "El usuario usa Docker para desarrollo local", F),
    ("El usuario prefiere Neovim antes que VS Code", "El usuario cambió de VS Code a Neovim", F),
    ("El usuario evita usar ORMs en código crítico", "El usuario usa SQLAlchemy Core para consultas complejas", F),
    ("El servicio de facturación está deprecado", "El servicio de facturación se eliminará en el Q3", F),
    ("El usuario usa Python para análisis de datos", "El usuario usa pandas y Polars para análisis de datos", F),
    ("La caché no está desactivada en producción", "La caché está activada en producción", F),
    ("Ya no usamos Jenkins", "El equipo migró de Jenkins a GitHub Actions", F),
    ("No guardes claves de API en el repositorio", "Las claves de API se guardan en Vault", F),
    ("El usuario nunca se salta la revisión de código", "El usuario siempre pide revisión de código antes de hacer merge", F),
    ("El usuario prefiere PostgreSQL para OLTP", "El usuario usa ClickHouse, no PostgreSQL, para analítica", F),
    ("El usuario odia las reuniones largas", "El usuario prefiere las actualizaciones asíncronas antes que las reuniones largas", F),
    ("No desplegamos los viernes", "No desplegamos nunca los viernes por la tarde", F),
    # --- mixed English / Spanish: compatible --------------------------------------------------
    ("Never deploy on Fridays", "No desplegamos los viernes nunca", F),
    ("The user prefers dark mode", "Al usuario le gusta el modo oscuro en todas las apps", F),
    ("The user prefers TypeScript", "Al usuario le gusta TypeScript por su sistema de tipos", F),
    ("The user avoids Kubernetes for small projects", "El usuario no usa Kubernetes en proyectos pequeños", F),
]

MUST_CATCH = [
    ("The user prefers TypeScript for new services", "The user decided to abandon TypeScript for Go"),
    ("Prefiere TypeScript para servicios nuevos", "Ya no usa TypeScript, ahora usa Go"),
    ("Deploys run on Fridays", "We never deploy on Fridays"),
    ("The feature flag is enabled in production", "The feature flag is disabled in production"),
    ("Uses PostgreSQL 15", "Uses PostgreSQL 16"),
]

MUST_NOT_FLAG = [
    ("Never commit secrets to git", "Use environment variables for secrets"),
    # a refusal of a narrower thing ("a different body") than the statement names: vault-example's wiki
    ("Reject the same key with a different request body: the key names one operation.",
     "The server stores the key, a fingerprint of the body and the result in the same transaction."),
    ("The user prefers TypeScript", "The user likes TypeScript's type system"),
    ("Never deploy on Fridays", "Don't deploy on Fridays without a rollback plan"),
    ("Tests must not hit the network", "Integration tests use a real Chroma store"),
    ("The user prefers TypeScript for new services", "The user prefers TypeScript for new services"),  # paraphrase
    ("The user prefers TypeScript", "The user prefers TypeScript and uses strict mode everywhere"),  # elaboration
    ("The user prefers TypeScript", "The staging cluster runs on three nodes"),  # unrelated
    ("The user prefers TypeScript", "El usuario prefiere TypeScript"),  # translation
]

SPANISH = set("áéíóúñ¿¡") | {"usa", "el ", "la ", "los ", "del ", "que "}


def is_spanish(text: str) -> bool:
    lowered = f" {text.lower()} "
    return any(marker in lowered for marker in SPANISH)


def test_table_is_large_balanced_and_bilingual():
    assert len(PAIRS) >= 70
    positives = sum(expected for _, _, expected in PAIRS)
    assert 0.4 <= positives / len(PAIRS) <= 0.6
    assert sum(is_spanish(old) or is_spanish(new) for old, new, _ in PAIRS) >= 25


def test_precision_and_recall_over_the_whole_table():
    tp = fp = fn = 0
    misses: list[str] = []
    for old, new, expected in PAIRS:
        got = check_contradiction(old, new).contradicts
        tp += got and expected
        fp += got and not expected
        fn += expected and not got
        if got != expected:
            misses.append(f"  {'FP' if got else 'FN'}: {old!r} vs {new!r}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(f"\ncontradiction table: {len(PAIRS)} pairs, precision {precision:.3f}, recall {recall:.3f}")
    print("\n".join(misses))
    assert precision >= 0.9
    assert recall >= 0.85


@pytest.mark.parametrize(("old", "new"), MUST_CATCH)
def test_must_catch(old: str, new: str):
    verdict = check_contradiction(old, new)
    assert verdict.contradicts, (old, new)
    assert verdict.reason


@pytest.mark.parametrize(("old", "new"), MUST_NOT_FLAG)
def test_must_not_flag(old: str, new: str):
    verdict = check_contradiction(old, new)
    assert not verdict.contradicts, verdict.reason
    assert verdict.reason == ""


def test_reason_names_the_term_and_both_stances():
    reason = check_contradiction(
        "The user prefers TypeScript for new services", "The user decided to abandon TypeScript for Go"
    ).reason
    assert '"typescript"' in reason.lower()
    assert "prefers" in reason and "abandon" in reason


def test_version_change_reason_names_both_values():
    reason = check_contradiction("Uses PostgreSQL 15", "Uses PostgreSQL 16").reason
    assert "15" in reason and "16" in reason


def test_negation_scope_ends_at_the_clause():
    # "not" belongs to the first clause; the second clause still likes Go.
    assert check_contradiction("The user likes Go", "The user doesn't use Java, and likes Go").contradicts is False
    assert check_contradiction("The user likes Go", "The user likes Java, but not Go").contradicts is True


def test_double_negation_and_not_only():
    assert not check_contradiction("The cache is enabled", "The cache is not disabled").contradicts
    assert not check_contradiction("The user uses Docker", "The user not only uses Docker but also Podman").contradicts
    assert check_contradiction("The cache is enabled", "The cache is not enabled").contradicts


def test_inflected_forms_in_both_languages():
    for old, new in [
        ("The user preferred Vim", "The user hated Vim"),
        ("El usuario prefería Vim", "El usuario odiaba Vim"),
        ("El usuario usaba Vim a diario", "El usuario ya no usa Vim"),
        ("The user is using Vim", "The user avoided Vim"),
    ]:
        assert check_contradiction(old, new).contradicts, (old, new)


def test_verdict_is_frozen_and_deterministic():
    verdict = check_contradiction("Uses PostgreSQL 15", "Uses PostgreSQL 16")
    assert isinstance(verdict, Verdict)
    with pytest.raises(AttributeError):
        verdict.contradicts = False  # type: ignore[misc]
    assert verdict == check_contradiction("Uses PostgreSQL 15", "Uses PostgreSQL 16")


def test_empty_and_identical_texts_do_not_contradict():
    assert check_contradiction("", "") == Verdict(False, "")
    assert not check_contradiction("The user prefers Go", "The user prefers Go").contradicts


def test_a_question_states_nothing():
    # Asking whether something changed is not saying it did; the statement beside it still counts.
    assert not check_contradiction("The user uses Vim", "Does the user not use Vim anymore?").contradicts
    assert check_contradiction("The user uses Vim", "Why ask? The user no longer uses Vim.").contradicts
    assert statements('Is it 3.12? It is "3.12.1" now. Great!') == ('It is "3.12.1" now.', "Great!")


def test_only_short_texts_supersede_each_other():
    # A record of several facts is not an outdated version of a text that flips one of them.
    old = "The user prefers TypeScript for new services. The team meets on Mondays."
    new = "The user decided to abandon TypeScript for Go"
    assert check_contradiction(old, new).contradicts  # two statements: still one update
    longer = old + " Lunch is at noon."
    assert len(statements(longer)) == MAX_STATEMENTS + 1
    assert check_contradiction(longer, new) == Verdict(False, "")
    assert check_contradiction(new, longer) == Verdict(False, "")
