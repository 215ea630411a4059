"""Secrets never leave the machine through git (issue 11, item 10): credentials in an exported
memory reach the chunk as `[redacted:<kind>]`, the local journal keeps them, and texts full of
hashes, ids and base64 are left alone.

The keys below are made up in the shape each provider documents (built from a seeded generator,
so no real credential sits in this file).
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import shutil
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import main
from compiler.events.journal import MemoryEvent, append_events
from compiler.events.store import read_vault_chunks
from compiler.memory.fold import fold
from compiler.sync.redact import Redactions, entropy, redact_text

_RANDOM = random.Random(11)
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def token(length: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RANDOM.choice(alphabet) for _ in range(length))


PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" + token(40) + "\n"
       + token(70) + "\n-----END OPENSSH PRIVATE KEY-----")
SECRETS = {  # kind → (text holding it, the secret itself)
    "aws-access-key": "AKIA" + token(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    "github-token": "ghp_" + token(36),
    "anthropic-key": "sk-ant-api03-" + token(93, _ALNUM + "-_") + "AA",
    "openai-key": "sk-proj-" + token(48, _ALNUM + "-_") + "T3BlbkFJ" + token(20),
    "slack-token": "xoxb-123456789012-1234567890123-" + token(24),
    "slack-webhook": "https://hooks.slack.com/services/T0" + token(8) + "/B0" + token(8) + "/" + token(24),
    "stripe-key": "sk_live_" + token(24),
    "private-key": PEM,
    "bearer-token": "eyJhbGciOiJIUzI1NiJ9." + token(30) + "." + token(20),
}
TEXTS = {  # kind → a memory as an agent would save it
    "aws-access-key": f"The staging deploy user has access key {SECRETS['aws-access-key']}, rotate it in May.",
    "github-token": f"CI pushes tags with {SECRETS['github-token']} (repo scope).",
    "anthropic-key": f"The eval harness reads {SECRETS['anthropic-key']} from its config.",
    "openai-key": f"export OPENAI_KEY_FOR_DOCS={SECRETS['openai-key']}",
    "slack-token": f"The alert bot token is {SECRETS['slack-token']}.",
    "slack-webhook": f"Alerts post to {SECRETS['slack-webhook']}",
    "stripe-key": f"Payments test mode: {SECRETS['stripe-key']}",
    "private-key": f"The deploy box key:\n{PEM}\nkeep it in 1Password.",
    "bearer-token": f"curl -H 'Authorization: Bearer {SECRETS['bearer-token']}' https://api.internal/v1",
}


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_each_kind_of_credential_becomes_its_placeholder(kind):
    seen = Redactions()
    redacted = redact_text(TEXTS[kind], "mem-1", seen)
    assert SECRETS[kind] not in redacted and f"[redacted:{kind}]" in redacted
    assert seen.report() == {"count": 1, "memories": {"mem-1": {kind: 1}}}
    assert redact_text(redacted) == redacted  # a placeholder is never redacted again


@pytest.mark.parametrize("text, expected", [
    ("db is postgres://app:s3cr3t-Pa55@db.internal:5432/prod",
     "db is postgres://app:[redacted:url-password]@db.internal:5432/prod"),
    ("SIGNING_HOOK=Zx8Qm2Lp9Rt4Vw7Ky1Nb5Hc3", "SIGNING_HOOK=[redacted:assigned-secret]"),
    ("the admin password: hunter2go!", "the admin password: [redacted:named-secret]"),
    ('settings {"api_key": "a8F3kL0pQ9zX"}', 'settings {"api_key": "[redacted:assigned-secret]"}'),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws_secret_access_key = [redacted:assigned-secret]"),
    ("GITHUB_TOKEN=x9" + "Kq" * 10, "GITHUB_TOKEN=[redacted:assigned-secret]"),
    # issue 28: a secret written in prose, after the word that names it
    ("Deploy key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "Deploy key [redacted:aws-access-key] with secret [redacted:named-secret]"),
    ("The api key for the vendor is Zx8Qm2Lp9Rt4Vw7Ky1Nb", "The api key for the vendor is [redacted:named-secret]"),
    ("My password is hunter2", "My password is [redacted:named-secret]"),
    ("Blob iIOSXFc6Nh7/PtZNYAAvjIrXTa9cDxIzLjz9ilp2 was the signing key",
     "Blob [redacted:high-entropy] was the signing key"),
])
def test_passwords_in_urls_and_assigned_secrets_lose_only_the_value(text, expected):
    assert redact_text(text) == expected


def _png_like(size: int) -> str:
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + random.Random(size).randbytes(size)).decode()


MUST_STAY = [
    "Fixed in commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 (short 3f2a9c1), see PR #412.",
    "COMMIT_SHA=3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 and sha256: "
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    f"request_id: {uuid.UUID(int=7)} and RUN_ID={uuid.UUID(int=2**127 + 5)}",
    f"# Architecture\n\nThe flow:\n\n![diagram](data:image/png;base64,{_png_like(6000)})\n\nThen the queue.",
    "Antidisestablishmentarianism, internationalization and supercalifragilisticexpialidocious.",
    "model: sentence-transformers/all-MiniLM-L6-v2 and MODEL=sentence-transformers/all-MiniLM-L6-v2",
    "tokenizer: porter-unicode61, author: jsmith1985, max_tokens: 4096, API_VERSION=2023-06-01",
    "The password: rotated every 90 days; the token = regenerated on login.",
    "Docs at https://user@example.com/path and https://example.com:8443/x?a=b; clone git@github.com:org/repo.git",
    "Meeting at 10:30: discuss Q3 roadmap, ETA=2026-12-01; the task-force uses sk-learn.",
    "DATABASE_URL=postgres://db.internal:5432/prod and PATH=/usr/local/bin:/usr/bin",
    "Publishable keys are public: pk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2",
    "The payload SGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG1lc3NhZ2U= is plain text in base64",
    "Pinned at QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG on IPFS; the password is rotated monthly.",
    '"integrity": "sha512-' + base64.b64encode(random.Random(3).randbytes(64)).decode() + '"',
]


@pytest.mark.parametrize("text", MUST_STAY, ids=range(len(MUST_STAY)))
def test_hashes_ids_base64_and_words_are_left_alone(text):
    seen = Redactions()
    assert redact_text(text, "mem-1", seen) == text
    assert seen.report() == {"count": 0, "memories": {}}


def test_random_base64_and_hex_never_trip_a_rule():
    generator = random.Random(3)
    for _ in range(200):
        blob = base64.b64encode(generator.randbytes(3000)).decode()
        digest = generator.randbytes(20).hex()
        text = f"![x](data:image/png;base64,{blob}) commit {digest} SHA={digest} id={uuid.uuid4()}"
        assert redact_text(text) == text


def test_entropy_tells_keys_from_words():
    assert entropy("Zx8Qm2Lp9Rt4Vw7Ky1Nb5Hc3") > 4.0 > entropy("internationalization")


# -- export → import on a second vault ----------------------------------------------------------------

def run(*args: str) -> tuple[int, dict, str]:
    """Returns (exit code, the --json output, stderr) of one engram command."""
    result = CliRunner().invoke(main, catch_exceptions=False, args=[*args, "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}, result.stderr


def _save(memory: str, content: str, at: str) -> MemoryEvent:
    """Returns a save event titled as the write path titles it: the first line, cut short."""
    title = content.splitlines()[0][:30]
    return MemoryEvent(f"ev-{memory}", "save", memory, at, {"content": content, "title": title,
                       "project": "ops", "category": "fact", "importance": 0.5, "kind": "memory"})


@pytest.fixture
def laptop(make_vault) -> Path:
    vault = make_vault({".obsidian/app.json": "{}", "Home.md": "# Home\n"})
    append_events(vault / ".engram", [
        _save("mem-aws", TEXTS["aws-access-key"], "2026-11-30 12:00:00"),
        _save("mem-pem", TEXTS["private-key"] + f" Also {SECRETS['github-token']}", "2026-11-30 12:01:00"),
        _save("mem-plain", MUST_STAY[0], "2026-11-30 12:02:00"),
        _save("mem-gh", TEXTS["github-token"], "2026-11-30 12:03:00")])  # its title ends in the key's start
    return vault


def test_export_redacts_the_chunk_and_a_second_vault_gets_only_placeholders(laptop, tmp_path):
    code, status, err = run("sync", "status", "--vault", str(laptop))
    assert status["pending_export"]["redacted"] == {
        "count": 4, "memories": {"mem-aws": {"aws-access-key": 1}, "mem-gh": {"github-token": 1},
                                 "mem-pem": {"github-token": 1, "private-key": 1}}}
    code, exported, err = run("sync", "export", "--vault", str(laptop), "--created-by", "laptop")
    assert code == 0 and exported["redacted"] == status["pending_export"]["redacted"], err
    chunk = laptop / ".engram" / "chunks" / f"{exported['chunk']}.jsonl.gz"
    raw = gzip.decompress(chunk.read_bytes()).decode()
    assert all(secret not in raw for secret in (SECRETS["aws-access-key"], SECRETS["github-token"][:10], "OPENSSH"))
    assert raw.count("[redacted:aws-access-key]") == 2  # the observation record and the save event
    # The laptop keeps the original: its own journal event wins over the chunk's copy.
    here = fold(read_vault_chunks(laptop / ".engram").events() + _journal(laptop))
    assert SECRETS["aws-access-key"] in here["mem-aws"].content

    server = tmp_path / "server"
    (server / ".engram").mkdir(parents=True)
    (server / ".obsidian").mkdir()
    shutil.copytree(laptop / ".engram" / "chunks", server / ".engram" / "chunks")
    shutil.copy(laptop / ".engram" / "manifest.json", server / ".engram" / "manifest.json")
    code, imported, err = run("sync", "import", "--vault", str(server), "--no-compile")
    assert code == 0 and imported["memories_new"] == 4 and not imported["quarantined"], err
    there = fold(read_vault_chunks(server / ".engram").events())
    assert there["mem-aws"].content == TEXTS["aws-access-key"].replace(SECRETS["aws-access-key"],
                                                                       "[redacted:aws-access-key]")
    assert "[redacted:private-key]" in there["mem-pem"].content and "[redacted:github-token]" in there["mem-pem"].content
    assert there["mem-plain"].content == MUST_STAY[0]
    assert there["mem-gh"].title == "CI pushes tags with [redacted:github-token]"


def _journal(vault: Path) -> list[MemoryEvent]:
    from compiler.events.journal import read_journal

    return read_journal(vault / ".engram")[0]


def test_redact_false_exports_memories_as_they_are(laptop):
    (laptop / "engram.toml").write_text("[sync]\nredact = false\n")
    code, status, _ = run("sync", "status", "--vault", str(laptop))
    assert status["redact"] is False and status["pending_export"]["redacted"]["count"] == 0
    code, exported, err = run("sync", "export", "--vault", str(laptop))
    assert code == 0 and exported["redacted"] == {"count": 0, "memories": {}}, err
    raw = gzip.decompress((laptop / ".engram" / "chunks" / f"{exported['chunk']}.jsonl.gz").read_bytes()).decode()
    assert SECRETS["aws-access-key"] in raw


def test_the_human_export_line_names_the_redacted_memories(laptop):
    result = CliRunner().invoke(main, catch_exceptions=False, args=["sync", "export", "--vault", str(laptop)])
    assert result.exit_code == 0
    assert "4 secrets redacted in 3 memories (mem-aws, mem-gh, mem-pem)" in result.stderr


def test_a_redact_setting_that_is_not_a_boolean_is_an_error(laptop):
    (laptop / "engram.toml").write_text('[sync]\nredact = "yes"\n')
    result = CliRunner().invoke(main, catch_exceptions=False, args=["sync", "status", "--vault", str(laptop)])
    assert result.exit_code == 2 and "`[sync] redact` must be true or false" in result.stderr
