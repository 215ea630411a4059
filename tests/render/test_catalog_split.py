"""A catalog too long for one page: catalog.md links a page per top folder, which lists its notes."""

from __future__ import annotations

from compiler.core.settings import Settings
from compiler.notes.links import resolve_links
from compiler.notes.parse import parse_note
from compiler.pipeline.spine import compile_vault
from compiler.render.notes import VaultView, render_note_pages, template_environment

FILES = {
    "Projects/Alpha.md": "---\ntags: [ops]\n---\n# Alpha\n\nThe payments rollout plan.\n",
    "Projects/Sub/Beta.md": "# Beta\n\nRefund queue notes. #ops #queue\n",
    "People/Ana.md": "# Ana\n\nOwns the ledger.\n",
    "[[Odd]] #x|y/Gamma.md": "# Gamma\n\nA folder name that is markup.\n",
    "Inbox.md": "# Inbox\n\nLoose thoughts.\n",
}


def pages(split: int | None) -> dict[str, str]:
    notes = [parse_note(p, t.encode())[0] for p, t in sorted(FILES.items())]
    links, _ = resolve_links(notes)
    return render_note_pages(VaultView(notes, links, {}, [], catalog_split=split), template_environment(None), "_engram")


def test_a_vault_over_the_limit_gets_a_page_per_top_folder() -> None:
    found = pages(split=4)
    catalog = found["catalog.md"]
    assert {p for p in found if p.startswith("catalog/")} == {
        "catalog/folders/Projects.md", "catalog/folders/People.md", "catalog/folders/[[Odd]] #x|y.md", "catalog/root.md"}
    # catalog.md names each folder page with its count, and the tags with theirs; no note is listed on it
    assert "[[_engram/catalog/folders/Projects|Projects]] (2 notes)" in catalog
    assert "[[_engram/catalog/folders/People|People]] (1 note)" in catalog
    assert "- `#ops` (2)" in catalog and "- `#queue` (1)" in catalog
    assert "Alpha" not in catalog and "pie title Notes per top folder" in catalog
    projects = found["catalog/folders/Projects.md"]
    assert "### Projects/Sub" in projects and "[[Projects/Sub/Beta|Beta]] — Refund queue notes." in projects
    assert "[[_engram/catalog|vault catalog]]" in projects
    listed = [line for page, text in found.items() if page.startswith("catalog/") for line in text.splitlines()
              if line.startswith("- [")]
    assert len(listed) == len(FILES)  # every note on exactly one folder page
    odd = found["catalog/folders/[[Odd]] #x|y.md"]
    assert "# Catalog: \\[\\[Odd\\]\\] \\#x\\|y\n" in odd  # the folder name is text: no link, no tag


def test_at_or_under_the_limit_the_catalog_is_one_page() -> None:
    assert pages(split=5)["catalog.md"] == pages(split=None)["catalog.md"]
    assert not any(p.startswith("catalog/") for p in pages(split=5))


def test_a_vault_that_shrinks_under_the_limit_loses_its_folder_pages(make_vault, fake_embedder) -> None:
    vault = make_vault(FILES)
    compile_vault(vault, Settings(catalog_split=4), embedder=fake_embedder)
    assert (vault / "_engram/catalog/folders/People.md").is_file()
    (vault / "People/Ana.md").unlink()
    report = compile_vault(vault, Settings(catalog_split=4), embedder=fake_embedder)
    assert not (vault / "_engram/catalog").exists() or not any((vault / "_engram/catalog").rglob("*.md"))
    assert "_engram/catalog/folders/People.md" in report.deleted
    assert "Projects/Alpha" in (vault / "_engram/catalog.md").read_text()


def test_the_health_digest_moves_with_every_field_of_a_link_or_a_missing_target_it_shows():
    from dataclasses import fields, replace

    from compiler.notes.records import Link, ResolvedLink
    from compiler.render.notes import Missing, _health_inputs

    link = ResolvedLink("a.md", "b.md", Link("B", 3, "wikilink", "H", "", "shown"), "ambiguous", ("b.md", "x/b.md"))
    missing = Missing("Nowhere", "note", 2, ("a.md",))
    health = {"broken": [link], "ambiguous": [link], "notes_wanted": [missing], "files_wanted": [missing]}
    base = _health_inputs(health)
    changed = [replace(link, **{f.name: "other" if f.name != "candidates" else ("c.md",)})
               for f in fields(link) if f.name != "link"]
    changed += [replace(link, link=replace(link.link, **{f.name: 9 if f.name == "line" else "other"}))
                for f in fields(link.link)]
    for other in changed:
        for name in ("broken", "ambiguous"):
            assert _health_inputs({**health, name: [other]}) != base, (name, other)
    for other in [replace(missing, **{f.name: 9 if f.name == "links" else ("b.md",) if f.name == "sources" else "x"})
                  for f in fields(missing)]:
        for name in ("notes_wanted", "files_wanted"):
            assert _health_inputs({**health, name: [other]}) != base, (name, other)
