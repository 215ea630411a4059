"""The cyclic collector is paused for the block and comes back as it was, also after an error or
inside another pause."""

from __future__ import annotations

import gc

import pytest

from compiler.core.collector import collector_paused


def test_paused_inside_enabled_after_also_after_an_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with collector_paused():
            assert not gc.isenabled()
            raise ValueError
    assert gc.isenabled()


def test_a_pause_inside_a_pause_leaves_it_to_the_outer_one():
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_compile_runs_with_the_collector_paused(make_vault, fake_embedder, monkeypatch):
    from compiler.core.settings import Settings
    from compiler.pipeline import spine

    seen = []
    original = spine._build
    monkeypatch.setattr(spine, "_build", lambda *a: seen.append(gc.isenabled()) or original(*a))
    spine.compile_vault(make_vault({"a.md": "# A\n\ntext\n"}), Settings(), embedder=fake_embedder)
    assert seen == [False] and gc.isenabled()
