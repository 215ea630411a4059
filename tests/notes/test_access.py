"""Reading one note for an agent (`get_note`): symlinks are checked by where they really lead."""

from __future__ import annotations

import pytest

from compiler.core.errors import InputError
from compiler.notes.access import read_note


@pytest.fixture
def vault(make_vault):
    return make_vault({"Plan.md": "# Plan\n", ".engram/journal.jsonl": '{"secret": 1}\n',
                       ".git/config": "[remote]\n", "data.txt": "not a note\n", "Sub/Real.md": "# Real\n"})


@pytest.mark.parametrize("link, target, message", [
    ("leak.md", ".engram/journal.jsonl", "a symlink to '.engram/journal.jsonl'"),
    ("git.md", ".git/config", "a symlink to '.git/config'"),
    ("text.md", "data.txt", "only .md and .qmd notes"),
])
def test_a_symlink_to_a_hidden_or_non_note_file_is_refused(vault, link, target, message):
    (vault / link).symlink_to(vault / target)
    with pytest.raises(InputError, match=message):
        read_note(vault, link, 1000)


def test_a_symlinked_folder_into_a_hidden_folder_is_refused(vault):
    (vault / "Docs").symlink_to(vault / ".git")
    (vault / ".git/notes.md").write_text("# hidden\n")
    with pytest.raises(InputError, match="hidden"):
        read_note(vault, "Docs/notes.md", 1000)


def test_a_symlink_to_a_note_inside_the_vault_still_reads(vault):
    (vault / "alias.md").symlink_to(vault / "Sub/Real.md")
    (vault / "Folder").symlink_to(vault / "Sub")
    assert read_note(vault, "alias.md", 1000)["content"] == "# Real\n"
    assert read_note(vault, "Folder/Real", 1000) == {"path": "Folder/Real.md", "content": "# Real\n",
                                                     "bytes": 7, "truncated": False}
