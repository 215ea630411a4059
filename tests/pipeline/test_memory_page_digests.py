"""Observation pages are checked from a digest of their inputs and their file's stat, not rendered
again: a compile renders the pages whose memory, links, strength or template changed, and still
restores a page that a person edited or deleted."""

from __future__ import annotations

import os
from pathlib import Path

from compiler.core.settings import Settings
from compiler.memory.edits import update_memory
from compiler.memory.input import MemoryInput
from compiler.memory.vault import VaultMemory
from compiler.memory.write import write_memories
from compiler.pipeline.spine import BuildReport, VaultPaths, compile_vault
from compiler.pipeline.state import load_state
from compiler.render.notes import PACKAGE_TEMPLATES

SETTINGS = Settings(now="2026-11-30 12:00:00")  # pinned: strength does not move between compiles
MEMORIES = [MemoryInput(content=text, project=project, created_at="2026-11-29 10:00:00") for text, project in (
    ("The payments API runs on PostgreSQL 16.", "payments"),
    ("Grafana dashboards watch the nightly backup.", "backup"),
    ("The CI runner caches Docker layers in S3.", "ci"),
    ("Kafka has three brokers in the staging cluster.", "staging"),
)]


def compiled(make_vault, fake_embedder) -> tuple[Path, list[str]]:
    vault = make_vault({"Home.md": "# Home\n\nNotes.\n"})
    with VaultMemory(vault, SETTINGS, embedder=fake_embedder) as memory:
        ids = [r["id"] for r in write_memories(memory, MEMORIES)["results"]]
    first = compile_vault(vault, SETTINGS, embedder=fake_embedder)
    assert first.memories["pages_rendered"] == len(MEMORIES)
    return vault, ids


def compile_again(vault: Path, fake_embedder) -> BuildReport:
    (vault / "Home.md").write_text(f"# Home\n\nNotes, edited {os.urandom(4).hex()}.\n")  # a real build, not a no-op
    return compile_vault(vault, SETTINGS, embedder=fake_embedder)


def observation_pages(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in (vault / "_engram/memory").rglob("*.md")
            if p.name != "archive.md"}


def test_a_compile_with_no_memory_change_renders_no_observation_page(make_vault, fake_embedder):
    vault, _ = compiled(make_vault, fake_embedder)
    report = compile_again(vault, fake_embedder)
    assert report.changed == ["Home.md"] and report.memories["pages_rendered"] == 0
    records = load_state(VaultPaths(vault.resolve()).state)[0].memory_renders
    assert sorted(f"_engram/{p}" for p in records if p.startswith("memory/")) == sorted(observation_pages(vault))
    assert sorted(p for p in records if not p.startswith("memory/")) == [f"projects/{p}.md" for p in sorted(
        ("backup", "ci", "payments", "staging"))]  # kept too: none of their members moved
    assert not any(p.startswith("_engram/projects/") for p in report.written)


def test_one_memory_added_or_updated_renders_only_its_page(make_vault, fake_embedder):
    vault, ids = compiled(make_vault, fake_embedder)
    before = observation_pages(vault)
    with VaultMemory(vault, SETTINGS, embedder=fake_embedder) as memory:
        write_memories(memory, [MemoryInput(content="The webhook relay retries with exponential backoff.",
                                            project="webhooks", created_at="2026-11-29 11:00:00")])
    added = compile_vault(vault, SETTINGS, embedder=fake_embedder)
    assert added.memories["pages_rendered"] == 1
    [new_page] = set(observation_pages(vault)) - set(before)
    assert {p: b for p, b in observation_pages(vault).items() if p != new_page} == before
    with VaultMemory(vault, SETTINGS, embedder=fake_embedder) as memory:
        update_memory(memory, ids[2], content="The CI runner caches Docker layers in GCS.")
    updated = compile_vault(vault, SETTINGS, embedder=fake_embedder)
    assert updated.memories["pages_rendered"] == 1
    [changed] = [p for p, b in observation_pages(vault).items() if b != before.get(p) and p != new_page]
    assert "GCS" in (vault / changed).read_text() and changed in updated.written


def test_a_template_change_renders_every_page(make_vault, fake_embedder):
    vault, _ = compiled(make_vault, fake_embedder)
    overrides = vault / ".engram" / "templates"
    overrides.mkdir()
    (overrides / "memory.md.j2").write_text((PACKAGE_TEMPLATES / "memory.md.j2").read_text() + "\nOur footer.\n")
    report = compile_vault(vault, SETTINGS, embedder=fake_embedder)
    assert report.memories["pages_rendered"] == len(MEMORIES)
    assert all(b.endswith(b"Our footer.\n") for b in observation_pages(vault).values())


def test_a_page_edited_by_hand_or_deleted_is_restored_and_one_only_touched_is_not_rendered(make_vault, fake_embedder):
    vault, _ = compiled(make_vault, fake_embedder)
    pages = observation_pages(vault)
    edited, deleted, touched, _ = sorted(pages)
    (vault / edited).write_bytes(pages[edited].replace(b"importance: 0.50", b"importance: 0.99"))  # not the content
    (vault / deleted).unlink()
    os.utime(vault / touched, ns=(1, 1))  # the stat moved, the bytes did not
    report = compile_vault(vault, SETTINGS, embedder=fake_embedder)
    assert report.memories["pages_rendered"] == 2 and report.memories["edits"] == []
    assert sorted(report.written) == sorted([edited, deleted])
    assert observation_pages(vault) == pages
    again = compile_again(vault, fake_embedder)  # the touched page's new stat was recorded: not even read again
    assert again.memories["pages_rendered"] == 0
    assert load_state(VaultPaths(vault.resolve()).state)[0].memory_renders[touched.removeprefix("_engram/")][2] == 1


def test_a_page_edited_in_its_content_becomes_an_update_and_is_rendered_from_it(make_vault, fake_embedder):
    vault, _ = compiled(make_vault, fake_embedder)
    pages = observation_pages(vault)
    page = next(p for p, b in pages.items() if b"PostgreSQL 16" in b)
    (vault / page).write_bytes(pages[page].replace(b"PostgreSQL 16.", b"PostgreSQL 17."))
    report = compile_vault(vault, SETTINGS, embedder=fake_embedder)
    assert len(report.memories["edits"]) == 1 and report.memories["pages_rendered"] == 1
    assert b"PostgreSQL 17." in (vault / page).read_bytes() and b"History" in (vault / page).read_bytes()


def test_a_memory_retitled_changes_the_digest_of_the_pages_that_link_it(tmp_path):
    from dataclasses import replace
    from datetime import datetime, timezone

    from compiler.memory.model import Observation
    from compiler.render.memory import render_memory_pages
    from compiler.render.notes import template_environment

    a = Observation(id="mem-a", project="p", title="Alpha", content="Alpha runs on Postgres.",
                    created_at="2026-11-29 10:00:00", links=(("mem-b", 0.8),))
    b = Observation(id="mem-b", project="p", title="Beta", content="Beta reads from Alpha.", created_at="2026-11-29 10:00:00")
    c = Observation(id="mem-c", project="q", title="Gamma", content="Gamma stands alone.", created_at="2026-11-29 10:00:00")
    now, env = datetime(2026, 11, 30, tzinfo=timezone.utc), template_environment(None)
    first = render_memory_pages({o.id: o for o in (a, b, c)}, set(), now, env)
    assert len(first.pages) == 3 + 2 + 2 and not first.kept  # three observations, two projects, archive, base
    retitled = replace(b, title="Beta service")
    again = render_memory_pages({o.id: o for o in (a, retitled, c)}, set(), now, env,
                                unchanged=lambda page, digest: first.digests.get(page) == digest)
    assert sorted(again.page_ids[p] for p in again.kept) == ["mem-c"]  # Alpha's page links Beta by its title: rendered
    assert "Beta service" in again.pages[ids_page(again, "mem-a")]


def ids_page(pages, memory_id: str) -> str:
    return next(p for p, i in pages.page_ids.items() if i == memory_id)


def test_a_render_from_the_last_one_matches_a_full_render_after_every_kind_of_change():
    """Retitled, newly linked, deleted, archived and restored memories: digesting only the pages
    near the changed memories gives the digests, pages and ids of a full render."""
    from dataclasses import replace
    from datetime import datetime, timezone

    from compiler.memory.model import Observation
    from compiler.render.memory import LastRender, render_memory_pages
    from compiler.render.notes import template_environment

    def obs(n: int, links=(), **more) -> Observation:
        return Observation(id=f"mem-{n:02d}", project=f"p{n % 3}", title=f"Memory {n}", content=f"Fact number {n}.",
                           created_at="2026-11-29 10:00:00", links=links, **more)

    now, env = datetime(2026, 11, 30, tzinfo=timezone.utc), template_environment(None)
    before = {o.id: o for o in [obs(n, links=((f"mem-{(n + 1) % 12:02d}", 0.5 + n / 100),)) for n in range(12)]}
    first = render_memory_pages(before, {"mem-11"}, now, env)
    last = LastRender(key=first.key, projects=first.projects, shown=now, changed=frozenset(),
                      pages={i: p for p, i in first.page_ids.items()}, digests=first.digests)
    after = dict(before)
    after["mem-03"] = replace(before["mem-03"], title="Memory three, retitled")  # its neighbours link it by title
    after["mem-07"] = replace(before["mem-07"], deleted_at="2026-11-30 09:00:00")
    after["mem-20"] = obs(20, links=(("mem-05", 0.9),))  # new, linked to an old memory
    changed = frozenset({"mem-03", "mem-07", "mem-20"})
    pruned = {"mem-09"}  # archived now; mem-11 is back
    full = render_memory_pages(after, pruned, now, env)
    reused = render_memory_pages(after, pruned, now, env, last=replace(last, changed=changed))
    assert (reused.digests, reused.page_ids, reused.pages) == (full.digests, full.page_ids, full.pages)
    on_disk = lambda page, digest: first.digests.get(page) == digest  # noqa: E731
    kept = render_memory_pages(after, pruned, now, env, on_disk, last=replace(last, changed=changed))
    assert kept.kept == render_memory_pages(after, pruned, now, env, on_disk).kept
    # Only the pages near a change are digested: mem-01 links and is linked by unchanged memories alone.
    far = ids_page(first, "mem-01")
    trusted = render_memory_pages(after, pruned, now, env, last=replace(last, changed=changed,
                                                                        digests={**first.digests, far: "recorded"}))
    assert trusted.digests[far] == "recorded" and trusted.digests[ids_page(first, "mem-00")] == full.digests[ids_page(first, "mem-00")]
    # One memory saved: the pages of the other projects are kept as they are on disk.
    added = render_memory_pages({**before, "mem-20": after["mem-20"]}, {"mem-11"}, now, env, on_disk,
                                last=replace(last, changed=frozenset({"mem-20"})))
    assert sorted(p for p in added.pages if p.startswith("projects/")) == ["projects/p2.md"]
    assert {"projects/p0.md", "projects/p1.md"} <= added.kept
    # A memory saved into a new project: the other projects' folders stay, so does the last render.
    newcomer = Observation(id="mem-30", project="p9", title="Memory 30", content="Fact thirty.",
                           created_at="2026-11-29 10:00:00", links=(("mem-04", 0.7),))
    grown = {**before, "mem-30": newcomer}
    full = render_memory_pages(grown, {"mem-11"}, now, env)
    reused = render_memory_pages(grown, {"mem-11"}, now, env, last=replace(last, changed=frozenset({"mem-30"}),
                                                                            digests={**first.digests, far: "recorded"}))
    assert reused.digests.pop(far) == "recorded"  # not digested: it is far from the new memory
    assert reused.digests == {p: d for p, d in full.digests.items() if p != far} and reused.pages == full.pages
    renamed = render_memory_pages({**grown, "mem-31": replace(newcomer, id="mem-31", project="P0")}, {"mem-11"}, now,
                                  env, last=replace(last, changed=frozenset({"mem-31"}), digests={far: "recorded"}))
    assert renamed.digests[far] != "recorded"  # "P0" slugs as "p0" does: p0's folder moved, every page digested
    # Another instant shown, template or project folders: every page is digested again.
    later = render_memory_pages(after, pruned, datetime(2026, 12, 1, tzinfo=timezone.utc), env, on_disk,
                                last=replace(last, changed=changed))
    assert not later.kept


def test_a_compile_after_memory_writes_records_the_digests_a_full_compile_makes(make_vault, fake_embedder, tmp_path):
    """The digests reused from the last build are the ones a build from nothing computes."""
    import shutil

    vault, ids = compiled(make_vault, fake_embedder)
    with VaultMemory(vault, SETTINGS, embedder=fake_embedder) as memory:
        write_memories(memory, [MemoryInput(content="The payments API on PostgreSQL 16 pages the on-call team.",
                                            project="payments", created_at="2026-11-29 11:00:00")])
        update_memory(memory, ids[1], content="Grafana dashboards watch the hourly backup.")
    compile_vault(vault, SETTINGS, embedder=fake_embedder)
    state = load_state(VaultPaths(vault.resolve()).state)[0]
    assert state.memory_mark["count"] == "6"  # the five saves and the update: the next build starts from here
    fresh = tmp_path / "fresh"
    shutil.copytree(vault, fresh)
    shutil.rmtree(fresh / ".engram" / "cache")
    shutil.rmtree(fresh / "_engram")
    compile_vault(fresh, SETTINGS, embedder=fake_embedder)
    rebuilt = load_state(VaultPaths(fresh.resolve()).state)[0]
    assert {p: r[0] for p, r in state.memory_renders.items()} == {p: r[0] for p, r in rebuilt.memory_renders.items()}
    assert observation_pages(vault) == {p: b for p, b in observation_pages(fresh).items()}
