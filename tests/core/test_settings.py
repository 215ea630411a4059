"""engram.toml: defaults, layering, and errors that name the file, the line and the closest known key."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.commands.setup import ENGRAM_TOML
from compiler.core.errors import UsageError
from compiler.core.settings import (
    KNOWN_KEYS,
    MULTILINGUAL_MODEL,
    SYNC_KEYS,
    Settings,
    key_lines,
    load_settings,
)
from compiler.sync.exchange import sync_setting

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_engram_environment(monkeypatch):
    """The caller's ENGRAM_* variables would override the files these tests write."""
    for name in ("ENGRAM_VAULT", "ENGRAM_MODEL", "ENGRAM_CHROMA_URL", "ENGRAM_NOW", "ENGRAM_PROJECT"):
        monkeypatch.delenv(name, raising=False)


def settings_of(tmp_path: Path, text: str, **overrides) -> Settings:
    (tmp_path / "engram.toml").write_text(text, encoding="utf-8")
    return load_settings(tmp_path, **overrides)


def error_of(tmp_path: Path, text: str) -> UsageError:
    with pytest.raises(UsageError) as caught:
        settings_of(tmp_path, text)
    return caught.value


def test_no_file_gives_the_defaults(tmp_path):
    assert load_settings(tmp_path) == Settings()


def test_known_keys_at_top_level_and_under_engram(tmp_path):
    settings = settings_of(tmp_path, 'out = "gen"\nignore = "Templates/**"\n[engram]\nrelated_max = 7\ngraph_bonus = 1\n')
    assert (settings.out, settings.ignore, settings.related_max) == ("gen", ("Templates/**",), 7)
    assert settings.graph_bonus == 1.0 and isinstance(settings.graph_bonus, float)


def test_options_beat_the_environment_which_beats_the_file(tmp_path, monkeypatch):
    (tmp_path / "engram.toml").write_text('model = "from-file"\nchroma_url = "http://file"\n')
    monkeypatch.setenv("ENGRAM_MODEL", "from-env")
    settings = load_settings(tmp_path, chroma_url="http://option")
    assert (settings.model, settings.chroma_url) == ("from-env", "http://option")


def test_the_model_brings_its_thresholds_unless_one_is_set(tmp_path):
    settings = settings_of(tmp_path, f'model = "{MULTILINGUAL_MODEL}"\nmerge_min = 0.96\n')
    assert (settings.reinforce_min, settings.merge_min) == (0.98, 0.96)


def test_an_unknown_key_names_the_file_the_line_and_the_closest_key(tmp_path):
    error = error_of(tmp_path, '# settings\nout = "_engram"\nmodle = "multilingual-e5-small"\n')
    assert str(error) == "engram.toml:3: unknown key 'modle' (did you mean 'model'?)"
    assert (error.path, error.line, error.exit_code) == ("engram.toml", 3, 2)


def test_an_unknown_key_far_from_any_gets_no_suggestion(tmp_path):
    assert str(error_of(tmp_path, "\nzzzzzz = 1\n")) == "engram.toml:2: unknown key 'zzzzzz'"


@pytest.mark.parametrize(("text", "expected"), [
    ('[engram]\nout = "x"\nmax_note_byte = 10\n', "engram.toml:3: unknown key 'max_note_byte' (did you mean 'max_note_bytes'?)"),
    ("max-section-chars = 300\n", "engram.toml:1: unknown key 'max-section-chars' (did you mean 'max_section_chars'?)"),
    ('Model = "x"\n', "engram.toml:1: unknown key 'Model' (did you mean 'model'?)"),
    ('sync_remtoe = "up"\n', "engram.toml:1: unknown key 'sync_remtoe' (did you mean 'sync_remote'?)"),
    ('[synk]\nremote = "up"\n', "engram.toml:1: unknown key 'synk' (did you mean 'sync'?)"),
    ('"quoted key" = 1\n', "engram.toml:1: unknown key 'quoted key'"),
])
def test_unknown_keys_wherever_they_are_written(tmp_path, text, expected):
    assert str(error_of(tmp_path, text)) == expected


def test_an_unknown_key_inside_sync_is_an_error(tmp_path):
    error = error_of(tmp_path, 'out = "_engram"\n\n[sync]\nremote = "origin"\nremtoe = "upstream"\n')
    assert str(error) == "engram.toml:5: unknown key 'remtoe' in [sync] (did you mean 'remote'?)"
    error = error_of(tmp_path, 'sync = { remote = "origin", colour = "blue" }\n')
    assert str(error) == ("engram.toml:1: unknown key 'colour' in [sync] "
                          "(known: remote, branch, created_by, max_failures, stale_lock_seconds, redact)")


def test_sync_keys_still_reach_the_sync_code(tmp_path):
    settings = settings_of(tmp_path, '[sync]\nremote = "up"\nstale_lock_seconds = 5\nmax_failures = 1\n')
    assert sync_setting(settings, "remote", "origin") == "up"
    assert sync_setting(settings, "stale_lock_seconds", 60.0) == 5.0
    assert sync_setting(settings, "max_failures", 3) == 1
    assert sync_setting(settings, "branch", "") == ""
    top = settings_of(tmp_path, 'sync_created_by = "laptop"\n')
    assert sync_setting(top, "created_by", "") == "laptop"
    nested = settings_of(tmp_path, '[engram.sync]\nbranch = "main"\n')
    assert sync_setting(nested, "branch", "") == "main"


@pytest.mark.parametrize(("text", "expected"), [
    ("\nmax_note_bytes = 1.5\n", "engram.toml:2: `max_note_bytes` must be an integer, got 1.5"),
    ('related_max = true\n', "engram.toml:1: `related_max` must be an integer, got True"),
    ('graph_bonus = "high"\n', "engram.toml:1: `graph_bonus` must be a number, got 'high'"),
    ("model = 3\n", "engram.toml:1: `model` must be a string, got 3"),
    ("ignore = [1, 2]\n", "engram.toml:1: `ignore` must be a list of strings, got [1, 2]"),
    ('[engram]\n\nout = "../outside"\n', "engram.toml:3: `out` must be a plain folder inside the vault, got '../outside'"),
    ('now = "yesterday"\n', "engram.toml:1: `now` must look like 2026-11-30 12:00:00 (UTC), got 'yesterday'"),
    ('[sync]\nmax_failures = "3"\n', "engram.toml:2: `[sync] max_failures` must be an integer, got '3'"),
    ('sync_branch = 1\n', "engram.toml:1: `sync_branch` must be a string, got 1"),
    ('sync = "origin"\n', "engram.toml:1: `sync` must be a table ([sync]) of sync settings"),
    ('engram = 1\n', "engram.toml:1: `engram` must be a table ([engram]) of settings"),
    ('out = "x"\nmodel = \n', "engram.toml:2: Invalid value (column 9)"),
])
def test_bad_values_name_the_line(tmp_path, text, expected):
    assert str(error_of(tmp_path, text)) == expected


def test_not_utf8_names_the_file(tmp_path):
    (tmp_path / "engram.toml").write_bytes(b'out = "\xff"\n')
    with pytest.raises(UsageError, match=r"^engram.toml: not UTF-8"):
        load_settings(tmp_path)


def test_bad_environment_and_options_name_their_source(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGRAM_NOW", "soon")
    with pytest.raises(UsageError, match=r"^ENGRAM_NOW: `now` must look like"):
        load_settings(tmp_path)
    monkeypatch.delenv("ENGRAM_NOW")
    with pytest.raises(UsageError, match=r"^--out: `out` must be a plain folder"):
        load_settings(tmp_path, out="/etc")


def test_key_lines_skips_multiline_strings_and_reads_dotted_and_inline_keys():
    text = ('a = """\nb = 1\n"""\nb = 2\n[t . "u"]\nc.d = 3\ne = { f = 1, "g" = 2 }\n'
            '[[arr]]\nh = 4\nlist = [\n  "x = 1",\n]\n')
    lines = key_lines(text)
    assert lines[("a",)] == 1 and lines[("b",)] == 4
    assert lines[("t", "u")] == 5 and lines[("t", "u", "c", "d")] == 6
    assert lines[("t", "u", "e", "f")] == lines[("t", "u", "e", "g")] == 7
    assert lines[("arr", "h")] == 9 and ("x",) not in lines


def test_through_the_cli_a_bad_key_is_one_line_and_exit_2(tmp_path):
    vault = tmp_path / "vault"
    (vault / ".engram").mkdir(parents=True)
    (vault / "engram.toml").write_text('out = "_engram"\nignore = ["Templates/**"]\nmodle = "x"\n')
    done = CliRunner().invoke(main, ["check", str(vault)], catch_exceptions=False)
    assert done.exit_code == 2
    assert done.output == "engram: engram.toml:3: unknown key 'modle' (did you mean 'model'?)\n"
    done = CliRunner().invoke(main, ["search", "--vault", str(vault), "anything"], catch_exceptions=False)
    assert (done.exit_code, done.output.splitlines()) == (2, ["engram: engram.toml:3: unknown key 'modle' "
                                                              "(did you mean 'model'?)"])


def test_every_line_of_the_setup_template_parses_when_uncommented(tmp_path):
    assignments = [line.lstrip("# ") for line in ENGRAM_TOML.splitlines() if re.match(r"#\s*\w+\s*=", line)]
    assert assignments, "the engram.toml template lost its example lines"
    for line in assignments:
        settings_of(tmp_path, line + "\n")  # raises on an unknown key or a bad value
    assert settings_of(tmp_path, ENGRAM_TOML) == Settings()  # as written, all comments: every default


def test_the_example_vault_settings_parse():
    assert load_settings(ROOT / "vault-example").ignore == ("Templates/**",)


def test_every_sync_setting_the_code_reads_is_a_declared_sync_key():
    """A `sync_setting(settings, "key", default)` call with an undeclared key would be rejected in engram.toml."""
    calls = set()
    for path in (ROOT / "compiler").rglob("*.py"):
        calls |= set(re.findall(r"""sync_setting\(\s*\w+\s*,\s*["'](\w+)["']\s*,\s*([^)]+)\)""", path.read_text()))
    assert calls, "no sync_setting(...) calls found: has the sync code moved?"
    for key, default in sorted(calls):
        assert key in SYNC_KEYS, f"sync_setting reads '{key}', which SYNC_KEYS does not declare"
        assert ast.literal_eval(default.strip()) == SYNC_KEYS[key], f"'{key}': default {default} in the code, {SYNC_KEYS[key]!r} declared"


def test_known_keys_are_the_settings_fields():
    assert set(KNOWN_KEYS) == {f.name for f in fields(Settings)} - {"extra"}
