"""The build state's head: every command learns the index's model from a few bytes, not the whole state."""

from __future__ import annotations

import json

from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.settings import Settings
from compiler.pipeline.spine import VaultPaths, compile_vault
from compiler.pipeline.state_head import head_path, recorded_model

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


def test_an_older_engrams_json_state_is_reused_once_then_replaced(make_vault, fake_embedder):
    """The first compile after an upgrade reads state.json (no rebuild, nothing re-embedded) and
    leaves state.sqlite in its place; recorded_model reads the old file until then."""
    from compiler.pipeline.state import load_state

    vault = make_vault(NOTES)
    compile_vault(vault, Settings(model="multilingual-e5-small"), embedder=fake_embedder)
    paths = VaultPaths(vault.resolve())
    state = load_state(paths.state)[0]
    legacy = paths.state.with_name("state.json")
    legacy.write_text(json.dumps({
        "version": 1, "model": state.model, "model_setting": state.model_setting, "fingerprint": state.fingerprint,
        "parser": state.parser, "files": {p: [s.size, s.mtime_ns, s.sha256, s.inode] for p, s in state.files.items()},
        "notes": {p: n.to_dict() for p, n in state.notes.items()}, "pages": state.pages,
        "note_renders": {p: list(r) for p, r in state.note_renders.items()}}))
    paths.state.unlink()
    head_path(paths.state).unlink()
    assert recorded_model(paths) == "multilingual-e5-small"
    (vault / "Deploy.md").write_text(NOTES["Deploy.md"] + "\nCanary first.\n")
    report = compile_vault(vault, Settings(model="multilingual-e5-small"), embedder=fake_embedder)
    assert (report.rebuild_reason, report.changed, report.embedded) == ("", ["Deploy.md"], 1)
    assert paths.state.is_file() and not legacy.exists()
    assert load_state(paths.state)[0].notes["Deploy.md"].sha256 != state.notes["Deploy.md"].sha256
