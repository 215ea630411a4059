"""The build state's head: every command learns the index's model from a few bytes, not the whole state."""

from __future__ import annotations

import json

from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.compile import VaultPaths, compile_vault
from compiler.commands.state_head import head_path, recorded_model
from compiler.core.settings import Settings

NOTES = {"Deploy.md": "# Deploy\n\nWe deploy with blue-green releases.\n"}


def test_the_model_comes_from_the_head_without_reading_the_state(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(model="multilingual-e5-small"), embedder=fake_embedder)
    paths = VaultPaths(vault.resolve())
    assert json.loads(head_path(paths.state).read_bytes())["model_setting"] == "multilingual-e5-small"
    paths.state.write_text("{ not json: the head is all a search reads")
    assert recorded_model(paths) == "multilingual-e5-small"
    result = CliRunner().invoke(main, ["search", "--vault", str(vault), "--json", "blue-green"], catch_exceptions=False)
    assert result.exit_code == 0 and json.loads(result.output)[0]["file"] == "Deploy.md"


def test_a_state_without_a_head_is_read_whole_and_a_deleted_state_means_no_model(make_vault, fake_embedder):
    vault = make_vault(NOTES)
    compile_vault(vault, Settings(model="multilingual-e5-small"), embedder=fake_embedder)
    paths = VaultPaths(vault.resolve())
    head_path(paths.state).unlink()  # as an older engram left it
    assert recorded_model(paths) == "multilingual-e5-small"
    compile_vault(vault, Settings(model="multilingual-e5-small"), embedder=fake_embedder)
    head_path(paths.state).write_bytes(b"")  # unreadable: the state answers
    assert recorded_model(paths) == "multilingual-e5-small"
    paths.state.unlink()  # deleted to force a rebuild: the head beside it says nothing any more
    assert recorded_model(paths) == ""
