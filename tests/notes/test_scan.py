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


def test_symlinks_and_fifos_that_are_not_read_are_each_named_once(make_vault, tmp_path):
    vault = make_vault({**NOTES, "Real/Inside.md": "# Inside\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Secret.md").write_text("# Secret\n")
    (vault / "Linked").symlink_to(vault / "Real", target_is_directory=True)
    (vault / "Away").symlink_to(outside, target_is_directory=True)
    (vault / "secret.md").symlink_to(outside / "Secret.md")
    (vault / "gone.md").symlink_to(vault / "missing.md")
    (vault / "alias.md").symlink_to(vault / "Home.md")  # a link to a note inside the vault is read
    os.mkfifo(vault / "pipe.md")
    (vault / ".hidden-link").symlink_to(outside)  # hidden: ignored, as any hidden file
    scan = scan_vault(vault, (), {})  # returns at once: a FIFO is never opened
    assert [s.path for s in scan.notes] == ["Analyses/cost.qmd", "Home.md", "Lonely.md", "Real/Inside.md", "alias.md"]
    assert [(w.file, w.kind, w.message) for w in scan.skipped] == [
        ("Away", "skipped", "symlinked folder, not followed: its notes are not indexed"),
        ("Linked", "skipped", "symlinked folder, not followed: its notes are not indexed"),
        ("gone.md", "skipped", "symlink to a missing file, skipped"),
        ("pipe.md", "skipped", "not a regular file (a FIFO), skipped"),
        ("secret.md", "skipped", "symlink to a file outside the vault, skipped"),
    ]


def test_ignore_globs_as_one_regex_match_fnmatch_glob_by_glob():
    import fnmatch
    import itertools

    from compiler.notes.scan import is_ignored

    globs = ["_engram", "drafts/", "*.tmp", "a/*/c", "[Tt]emplates", "**/x?", "q[!0-9]*", ""]
    paths = ["_engram", "_engram/p.md", "drafts/n.md", "draftsy.md", "a.tmp", "a/b/c", "a/b/c/d.md", "Templates/t.md",
             "temp/x1", "x1", "qa", "q1", "notes/n.md", "a/b/d", "\u00e9/x.md"]

    def one_by_one(path, ignore):
        return any(fnmatch.fnmatchcase(path, g.rstrip("/")) or fnmatch.fnmatchcase(path, g.rstrip("/") + "/*")
                   for g in ignore)

    for size in (0, 1, 3):
        for ignore in itertools.combinations(globs, size):
            for path in paths:
                assert is_ignored(path, ignore) == one_by_one(path, ignore), (path, ignore)
