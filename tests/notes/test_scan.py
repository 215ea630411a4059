"""Scan: every note stamped in path order, and only the new or edited ones named for parsing."""

from __future__ import annotations

import os

from compiler.notes.scan import scan_vault

NOTES = {"Home.md": "# Home\n\nSee [[Lonely]].\n", "Lonely.md": "# Lonely\n\nNobody links here.\n",
         "Analyses/cost.qmd": "# Cost\n", "diagram.png": b"\x89PNG"}


def test_scan_names_only_new_and_edited_notes(make_vault):
    vault = make_vault(NOTES)
    first = scan_vault(vault, (), {})
    assert [s.path for s in first.notes] == list(first.edited) == ["Analyses/cost.qmd", "Home.md", "Lonely.md"]
    assert first.attachments == ("diagram.png",)
    (vault / "Lonely.md").write_text("# Lonely\n\nSomebody links here now.\n")
    (vault / "New.md").write_text("# New\n")
    os.utime(vault / "Home.md", ns=(1, 1))  # touched, same bytes: hashed again, not edited
    assert scan_vault(vault, (), {s.path: s for s in first.notes}).edited == ("Lonely.md", "New.md")
