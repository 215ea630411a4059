"""How well secrets are kept out of exported chunks: `python benchmarks/redaction.py [--json] [--verbose]`.

A labelled set of memory texts: secrets in the shapes agents and people write them (provider keys,
assigned values, passwords in URLs, bearer tokens, JWTs, private keys, and secrets named in prose:
"Deploy key AKIA… with secret wJalr…") and look-alikes that must stay as they are (commit hashes,
digests, UUIDs, base64 images, integrity hashes, model names, paths, URLs, content ids, sentences
about passwords and tokens). The secret values are random, made here from a seed, in each
provider's documented shape. For each text it checks `compiler.sync.redact.redact_text` — a secret
counts as caught when its value is gone from the text, a look-alike as kept when the text comes
back unchanged — and, when the package is installed (it is in the test extra), Yelp's
detect-secrets 1.5 with its default plugins and filters, scanning the text as a file: caught when
a finding overlaps the secret, a look-alike lost when anything is found in it. Precision and recall
are printed for both. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import string
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from a checkout

from compiler.sync.redact import redact_text  # noqa: E402

RND = random.Random(20261206)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RND.choice(alphabet) for _ in range(n))


B64 = ALNUM + "+/"
AWS_SECRET = rand(40, B64)
SECRETS: list[tuple[str, str]] = [  # (text, the secret in it)
    ("Deploy key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    (f"CI user has access key AKIA{rand(16, string.ascii_uppercase + string.digits)} and secret {AWS_SECRET}", AWS_SECRET),
    (f"aws_secret_access_key = {rand(40, B64)}", ""),
    (f"export GITHUB_TOKEN=ghp_{rand(36)}", ""),
    (f"Use token ghp_{rand(36)} for the release bot", ""),
    ("The staging password is Tr0ub4dor&3 until Friday", "Tr0ub4dor&3"),
    ("db: postgres://app:s3cr3t-Pa55@db.internal:5432/prod", "s3cr3t-Pa55"),
    (f"curl -H 'Authorization: Bearer {rand(40)}' https://api.example.com", ""),
    (f"Alerts post to https://hooks.slack.com/services/T{rand(8)}/B{rand(8)}/{rand(24)}", ""),
    (f"The agent's key is sk-ant-api03-{rand(90, ALNUM + '-_')}", ""),
    (f"OpenAI key sk-proj-{rand(60, ALNUM + '-_')} is in the runner", ""),
    (f"Stripe sk_live_{rand(24)} charges the test card", ""),
    (f"Session cookie eyJ{rand(30, ALNUM + '-_')}.eyJ{rand(40, ALNUM + '-_')}.{rand(43, ALNUM + '-_')}", ""),
    ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(rand(64, B64) for _ in range(4)) +
     "\n-----END RSA PRIVATE KEY-----", ""),
    (f"The api key for the vendor is {rand(20)}", ""),
    ("passphrase: 7hG#k2!pQz9", "7hG#k2!pQz9"),
    (f"Credentials are {rand(18)} for the read replica", ""),
    (f"api_key={rand(12)}", ""),
    (f"SENDGRID_API_KEY=SG.{rand(22, ALNUM + '-_')}.{rand(43, ALNUM + '-_')}", ""),
    (f"Google Maps key AIza{rand(35, ALNUM + '-_')} in the web app", ""),
    (f"npm publish token npm_{rand(36)}", ""),
    (f"Slack bot token: xoxb-{rand(12, string.digits)}-{rand(12, string.digits)}-{rand(24)}", ""),
    (f"Temporary key ASIA{rand(16, string.ascii_uppercase + string.digits)} expires at noon", ""),
    (f"Here is the secret: {rand(32, '0123456789abcdef')}", ""),  # a hex secret: hex is also what ids look like
    ("mysql -u root -pS3cretP4ss! prod", "S3cretP4ss!"),
    ("My password is hunter2", "hunter2"),  # short and weak: a secret all the same
    (f"Blob {rand(44, B64)} was the signing key", ""),
]
STAY: list[str] = [
    "Fixed in commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39, see PR #412.",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 matches the release.",
    "request 9b2f6c1e-7d3a-4e8b-a1c5-0f6e2d9b4a71 timed out",
    "![chart](data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n" + RND.randbytes(600)).decode() + ")",
    "\"integrity\": \"sha512-" + base64.b64encode(RND.randbytes(64)).decode() + "\"",
    "image ghcr.io/org/app@sha256:" + rand(64, "0123456789abcdef"),
    "model: sentence-transformers/all-MiniLM-L6-v2",
    "See https://github.com/org/repo/blob/3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39/src/main.py#L10",
    "The password reset flow emails a link valid for 24 hours.",
    "The token limit is 4096 tokens per request.",
    "The API key rotation happens monthly.",
    "Store the secret in 1Password, never in the repo.",
    "password: ${DB_PASSWORD}",
    "pod api-7d9f8b6c5d-x2k4q restarted",
    "AbstractSingletonProxyFactoryBean wraps the client",
    "The payload SGVsbG8gd29ybGQsIHRoaXMgaXMgYSB0ZXN0IG1lc3NhZ2U= is plain text in base64",
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393 size 1320",
    "Publishable keys are public: pk_live_" + rand(24),
    "Demo: https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    "Events land in s3://bucket/2026/12/06/events-00042.parquet",
    "Bearer tokens expire after an hour.",
    "Clone git@github.com:org/repo.git and run make.",
    "Pinned torch 2.13.0+cpu build 20261206",
    "AWS access keys start with AKIA; temporary ones with ASIA.",
    "Data in /var/lib/postgresql/16/main/base/16384/2619_fsm",
    "Posted in channel C024BE91L",
    "Credentials: see the vault note [[Deploy Secrets]].",
    "The report is pinned at QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG on IPFS",
    "tokenizer: porter-unicode61, author: jsmith1985, API_VERSION=2023-06-01",
    "The secret sauce is the retry budget.",
]


def secret_of(text: str, secret: str) -> str:
    """Returns the secret value a labelled text holds: given, or its longest random-looking token."""
    if secret:
        return secret
    tokens = [t.strip("'\",:") for t in text.replace("=", " ").replace("@", " ").split()]
    return max(tokens, key=len)


def detect_secrets_scan() -> Any:
    """Returns a function text → [found values] through detect-secrets, or None when not installed."""
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scan(text: str) -> list[str]:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "memory.txt")
            Path(path).write_text(text, encoding="utf-8")
            found = SecretsCollection()
            with default_settings():
                found.scan_file(path)
            return [s.secret_value or "" for f in found.files for s in found[f]]

    return scan


DATA = REPO.parent / "shared" / "data"


def conversation_turns() -> dict[str, list[str]]:
    """Returns the turns of the evaluation conversations (../shared/data), by benchmark, one text
    each and deduplicated: tens of thousands of texts people and assistants wrote, with no real
    secret in them (a few documentation examples like `password "password123"` aside), so every
    text redaction alters there is a false positive, on data the rules were not written from."""
    out: dict[str, list[str]] = {}
    locomo, longmemeval = DATA / "locomo-dev.json", DATA / "longmemeval-dev.json"
    if locomo.exists():
        out["locomo"] = sorted({turn["text"] for sample in json.loads(locomo.read_text())
                                for key, session in sample["conversation"].items()
                                if key.startswith("session_") and isinstance(session, list) for turn in session})
    if longmemeval.exists():
        out["longmemeval"] = sorted({turn["content"] for question in json.loads(longmemeval.read_text())
                                     for session in question["haystack_sessions"] for turn in session})
    return out


def score(caught: list[bool], kept: list[bool]) -> dict[str, Any]:
    true, false = sum(caught), sum(not k for k in kept)
    return {"secrets": len(caught), "caught": true, "look_alikes": len(kept), "altered": false,
            "recall": round(true / len(caught), 3), "precision": round(true / (true + false), 3) if true + false else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--verbose", action="store_true", help="name every secret missed and look-alike altered")
    args = parser.parse_args()
    labelled = [(text, secret_of(text, secret)) for text, secret in SECRETS]
    ours_caught = [value not in redact_text(text) for text, value in labelled]
    ours_kept = [redact_text(text) == text for text in STAY]
    summary: dict[str, Any] = {"engram": score(ours_caught, ours_kept),
                               "missed": [t for (t, _), ok in zip(labelled, ours_caught) if not ok],
                               "altered": [redact_text(t) for t, ok in zip(STAY, ours_kept) if not ok]}
    scan = detect_secrets_scan()
    if scan:
        theirs_caught = [any(f and (f in value or value in f) for f in scan(text)) for text, value in labelled]
        theirs_kept = [not scan(text) for text in STAY]
        summary["detect_secrets"] = score(theirs_caught, theirs_kept)
        summary["detect_secrets_missed"] = [t for (t, _), ok in zip(labelled, theirs_caught) if not ok]
        summary["detect_secrets_altered"] = [t for t, ok in zip(STAY, theirs_kept) if not ok]
    # The same rules on conversations nobody labelled: how many texts they alter (engram only:
    # detect-secrets scans a file per text, minutes for this many).
    summary["conversations"] = {}
    for name, texts in conversation_turns().items():
        altered = [t for t in texts if redact_text(t) != t]
        summary["conversations"][name] = {"texts": len(texts), "altered": len(altered),
                                          "altered_share": round(len(altered) / len(texts), 5),
                                          "examples": [redact_text(t)[:200] for t in altered[:10]]}
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    print(f"{len(SECRETS)} secrets, {len(STAY)} look-alikes")
    for name in ("engram", "detect_secrets"):
        if name not in summary:
            print(f"  {name:<15} not installed: pip install detect-secrets==1.5.0 to compare")
            continue
        row = summary[name]
        print(f"  {name:<15} recall {row['recall']:.0%} ({row['caught']}/{row['secrets']})  precision "
              f"{row['precision']:.0%}  look-alikes altered {row['altered']}/{row['look_alikes']}")
    for name, row in summary["conversations"].items():
        print(f"  on {name}'s {row['texts']:,} conversation turns (no labels, no real secrets): "
              f"{row['altered']} altered ({row['altered_share']:.2%})")
    if args.verbose:
        for row in summary["conversations"].values():
            for text in row["examples"]:
                print(f"    conversation altered: {text[:110]}")
        for key in ("missed", "altered", "detect_secrets_missed", "detect_secrets_altered"):
            for text in summary.get(key, []):
                print(f"    {key}: {text[:110]}")


if __name__ == "__main__":
    main()
