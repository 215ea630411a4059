"""A model that cannot load fails recall loudly (issue 11, item 8): exit 1 and one line naming the
cause from the CLI, a tool error from MCP; never `[]` with exit 0 as if the vault held nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.core.errors import ModelLoadError
from compiler.core.settings import Settings
from compiler.mcp_server.server import MemoryServer, build_server
from tests.conftest import FakeEmbedder

NOW = "2026-11-30 12:00:00"
CAUSE = "cannot load embedding model 'all-MiniLM-L6-v2': No module named 'torch'"
QUERY = "how do we roll back a deploy"


def _broken_model(model: str):
    raise ModelLoadError(CAUSE)


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n\nRoll back with the previous image tag.\n"})


def _add_memory(vault: Path, monkeypatch) -> None:
    monkeypatch.setattr("compiler.memory.vault.load_embedder", lambda model: FakeEmbedder())
    result = CliRunner().invoke(main, ["memory", "add", "We roll back a deploy with the release script",
                                       "--vault", str(vault), "--now", NOW], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("with_memories", [False, True])
def test_recall_names_the_model_that_cannot_load(vault, monkeypatch, with_memories):
    if with_memories:
        _add_memory(vault, monkeypatch)
    monkeypatch.setattr("compiler.memory.vault.load_embedder", _broken_model)
    result = CliRunner().invoke(main, ["recall", QUERY, "--vault", str(vault), "--no-reinforce", "--json",
                                       "--now", NOW], catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"engram: {CAUSE}"]


def test_mcp_recall_is_a_tool_error_naming_the_cause(vault, monkeypatch):
    from tests.mcp_server.test_mcp import ToolFailed, call

    monkeypatch.setattr("compiler.memory.vault.load_embedder", _broken_model)
    memory = MemoryServer(vault, Settings(now=NOW))

    async def run() -> None:
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(build_server(memory)) as session:
            for name, args in (("recall_memory", {"query": QUERY}), ("mem_search", {"query": QUERY})):
                with pytest.raises(ToolFailed, match="cannot load embedding model"):
                    await call(session, name, args)

    import asyncio

    try:
        asyncio.run(run())
    finally:
        memory.close()


def _recall_without_torch(vault, tmp_path, **env_vars):
    shim = tmp_path / "shim" / "torch"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text('raise ImportError("torch is disabled for this test")\n')
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim.parent), str(root)]), **env_vars}
    return subprocess.run([str(Path(sys.executable).parent / "engram"), "recall", QUERY, "--vault", str(vault),
                           "--no-reinforce", "--json"], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.integration
def test_recall_without_torch_runs_on_onnx(vault, tmp_path):
    from compiler.core.settings import BUNDLED_MODEL
    from compiler.embed.onnx_minilm import OnnxEmbedder

    OnnxEmbedder.load(BUNDLED_MODEL)  # the ONNX file exists (exported here, with torch, when it did not)
    done = _recall_without_torch(vault, tmp_path)
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)


def test_recall_on_torch_without_torch_fails_in_a_real_process(vault, tmp_path):
    done = _recall_without_torch(vault, tmp_path, ENGRAM_INFERENCE="torch")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot load embedding model" in lines[0] and "torch is disabled" in lines[0]
