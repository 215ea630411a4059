"""Secrets never leave the machine through git: credentials in an exported memory become a placeholder.

    AKIAIOSFODNN7EXAMPLE  →  [redacted:aws-access-key]

The local journal keeps the original; only the chunk (what git carries) holds the placeholder.
Each rule is a provider's documented key format (the shapes detect-secrets and gitleaks match),
plus two generic ones: a password in a URL, and a high-entropy value assigned to a name
(`API_KEY=...`, `password: ...`), a secret named in prose ("… with secret wJalr…"), JWTs,
and long high-entropy base64 runs on their own (detect-secrets' base64 detector at its 4.5 bits,
minus images, integrity hashes and hex). detect-secrets itself was not taken: its hex and base64
entropy detectors fire on commit hashes and base64 images (exactly what notes hold), with its
filters on it misses secrets written in prose, its private-key detector finds the BEGIN line but
not the block, and it knows no Anthropic keys. `benchmarks/redaction.py` measures both on one
labelled set of secrets and look-alikes.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rule:
    kind: str  # the placeholder's name: [redacted:<kind>]
    pattern: re.Pattern[str]
    group: str = "secret"  # the named group replaced (the rest of the match stays: "postgres://app:" …)
    accept: Callable[[re.Match[str]], bool] = lambda match: True  # a second look (entropy) after the pattern


def placeholder(kind: str) -> str:
    """Returns what a secret of `kind` becomes in a chunk: `[redacted:<kind>]`."""
    return f"[redacted:{kind}]"


_MIN_PARTIAL = 8  # a shorter start of a secret says too little to hide
_PLACEHOLDER = re.compile(r"\[redacted:[a-z-]+\]")
# A name that says its value is a secret ends with one of these (`GITHUB_TOKEN`, `db_password`,
# `apiKey`); `tokenizer` or `author` do not.
_SECRET_NAME = re.compile(r"(?i)(secret|token|passw(or)?d|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|"
                          r"secret[_-]?key|signing[_-]?key|credentials?|auth)$")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")  # a shell or .env variable: the only names a bare high-entropy value needs
_WORD = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_CID = re.compile(r"Qm[1-9A-HJ-NP-Za-km-z]{44}")  # an IPFS content id (CIDv0, base58)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def entropy(text: str) -> float:
    """Returns the Shannon entropy of `text` in bits per character (a random 24-character key ≈ 4.3,
    an English word ≈ 3; never above log2 of the length)."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values()) if text else 0.0


def _classes(text: str) -> int:
    """Returns how many of lower case, upper case, digits and other characters `text` mixes."""
    return sum(any(test(c) for c in text) for test in (str.islower, str.isupper, str.isdigit,
                                                       lambda c: not c.isalnum()))


def _wordy(text: str) -> bool:
    """True when words cover half of `text` (`sentence-transformers/all-MiniLM-L6-v2`): a name, not a key."""
    return sum(len(w) for w in _WORD.findall(text)) * 2 >= len(text)


def _assigned_secret(match: re.Match[str]) -> bool:
    """True when an assigned value looks like a credential, not a word, a hash or an id.

    A name that says secret (`password: …`, `API_KEY=…`) needs a value of 8+ characters mixing
    character kinds. A bare `ENV_NAME=value` needs a long, high-entropy value that is no run of
    words. Pure hex (commit hashes, digests) and UUIDs are ids; paths and URLs are not secrets."""
    name, value = match["name"], match["secret"]
    if value.startswith("/") or value.lower() in ("null", "none", "true", "false"):
        return False
    if _SECRET_NAME.search(name):
        return len(value) >= 8 and _classes(value) >= 2 and not value.startswith(("$", "{{", "<", "%"))
    if match["sep"] != "=" or not _ENV_NAME.fullmatch(name) or _HEX.fullmatch(value) or _UUID.fullmatch(value):
        return False
    return len(value) >= 20 and _classes(value) >= 3 and entropy(value) >= 4.0 and not _wordy(value)


def _looks_like_credential(value: str, name: str = "") -> bool:
    """True for a value that mixes character kinds, is no run of words, no id and no path or URL.
    A password may be short and made of a word ("hunter2"): a letter and a digit or symbol will do."""
    if value.startswith(("/", "$", "{{", "<", "%", "http")) or _HEX.fullmatch(value) or _UUID.fullmatch(value):
        return False
    if name.lower().startswith("pass") and len(value) >= 6:
        return any(c.isalpha() for c in value) and any(not c.isalpha() for c in value)
    if len(value) >= 16:  # long enough that words inside it ("…EXAMPLEKEY") do not make it a name
        return _classes(value) >= 3 and entropy(value) >= 3.5
    return len(value) >= 8 and _classes(value) >= 2 and not _wordy(value) and entropy(value) >= 3.0


_LINKING = frozenset("is was are were be to as now reads becomes equals".split())
_WORDS_JOINED = re.compile(r"[A-Za-z]+(?:[-_'][A-Za-z]+)*")  # "user-friendly", "two-factor": words, not a key


def _named_in_prose(match: re.Match[str]) -> bool:
    """True when the words after a secret's name link it to a credential-looking value."""
    words = match["words"].split()
    if words and words[-1].lower() not in _LINKING:
        return False
    value = match["secret"].rstrip("*!.,?;:)")  # Markdown emphasis and sentence ends are not part of it
    return not _WORDS_JOINED.fullmatch(value) and _looks_like_credential(value, match["name"])


def _random_run(match: re.Match[str]) -> bool:
    """True for a long run that is random, not an image, a digest, hex, a path or a name."""
    value, before = match["secret"], match.string[max(0, match.start() - 8):match.start()].lower()
    if before.endswith(("base64,", "sha1-", "sha256-", "sha384-", "sha512-", "/")) or _HEX.fullmatch(value.strip("=")):
        return False
    if value.startswith(("pk_live_", "pk_test_", "sha1-", "sha256-", "sha384-", "sha512-")) or _CID.fullmatch(value):
        return False  # public keys by design (Stripe's publishable ones), integrity hashes, IPFS content ids
    if _encoded_text(value) or _in_url(match):
        return False
    words = sum(len(w) for w in _WORD.findall(value))
    return _classes(value.rstrip("=")) >= 3 and entropy(value) >= 4.5 and words * 4 < len(value) * 3


def _in_url(match: re.Match[str]) -> bool:
    """True when the run is part of a URL (a query's tracking id, a path): named keys in URLs are
    the assigned-secret rule's, and a password in one the url-password rule's."""
    text = match.string
    start = max(text.rfind(c, 0, match.start()) for c in " \t\n(<[\"'") + 1
    word = text[start:match.start()]
    return "://" in word or word.startswith("www.")


def _encoded_text(value: str) -> bool:
    """True when `value` is base64 of readable text (a payload shown encoded), not of random bytes."""
    try:
        data = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(data) >= 16 and sum(32 <= b < 127 or b in (9, 10, 13) for b in data) >= 0.95 * len(data)


def _rule(kind: str, pattern: str, flags: int = 0, **options: Any) -> Rule:
    return Rule(kind, re.compile(pattern, flags), **options)


# Order matters: the first rule to claim a span names it (an Anthropic key is also "sk-…").
RULES: tuple[Rule, ...] = (
    _rule("private-key", r"(?P<secret>-----BEGIN[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----"
                         r".*?(-----END[ A-Z0-9]*PRIVATE KEY( BLOCK)?-----|\Z))", re.DOTALL),
    _rule("aws-access-key", r"(?<![A-Za-z0-9])(?P<secret>(AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16})(?![A-Za-z0-9])"),
    _rule("github-token", r"(?<![A-Za-z0-9_])(?P<secret>(gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{40,255}))"),
    _rule("anthropic-key", r"(?<![A-Za-z0-9_-])(?P<secret>sk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_-]{32,})"),
    _rule("openai-key", r"(?<![A-Za-z0-9_-])(?P<secret>sk-((proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|"
                        r"[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|[A-Za-z0-9]{48}))(?![A-Za-z0-9_-])"),
    _rule("slack-token", r"(?<![A-Za-z0-9])(?P<secret>xox[abposre]-[A-Za-z0-9-]{10,})"),
    _rule("slack-webhook", r"(?P<secret>https://hooks\.slack\.com/(services|workflows)/[A-Za-z0-9/_-]{20,})"),
    _rule("stripe-key", r"(?<![A-Za-z0-9])(?P<secret>(sk|rk)_(live|test)_[A-Za-z0-9]{16,})"),
    # scheme://user:password@host — only the password goes; the user and host say what it was for.
    _rule("bearer-token", r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)"),
    _rule("url-password", r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@\[\]]+:(?P<secret>[^\s@/\[\]]+)@"),
    _rule("jwt", r"(?<![A-Za-z0-9_-])(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    # Prose: "with secret wJalr…", "the password is Tr0ub4dor&3", "api key for the vendor is Zx8…" —
    # a secret word, then the value, or a few words ending on one that links a name to its value
    # ("is", "to", "="): "password manager like 1Password" names no password. One line only.
    _rule("named-secret", r"(?i)\b(?P<name>secret(?:[ _-]access)?(?:[ _-]key)?|password|passphrase|passwd|token|"
                          r"api[ _-]?key|access[ _-]?key|private[ _-]?key|credentials?)\b"
                          r"(?P<words>(?:[ \t]+[A-Za-z]{1,12}\b){0,4}?)(?:[ \t]*(?:=|:|->|→|-)(?=[ \t]))?"
                          r"(?:[ \t]+|[ \t]*[:=][ \t]*)[\"'`]?(?=[A-Za-z]*[^A-Za-z\s])"
                          r"(?P<secret>[A-Za-z0-9+/=_\-.~!@#$%^&*]{5,}[A-Za-z0-9+/=_\-~!@#$%^&*])",
          accept=lambda m: _named_in_prose(m)),
    # NAME=value, NAME: value, "name": "value" — the value goes when it looks like a credential.
    _rule("assigned-secret", r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)[\"']?\s*(?P<sep>=|:)\s*[\"']?(?P<secret>[^\s\"',;`]+)",
          accept=_assigned_secret),
    # A long high-entropy run of base64 characters on its own (detect-secrets' Base64HighEntropyString,
    # at its default 4.5 bits): not a data: URI (an image), an integrity hash, hex, a URL or words.
    _rule("high-entropy", r"(?<![A-Za-z0-9+/=_.:-])(?P<secret>[A-Za-z0-9+/_-]{32,}={0,2})(?![A-Za-z0-9+/=_.-])",
          accept=lambda m: _random_run(m)),
)


@dataclass
class Redactions:
    """What a redaction pass found: per memory, how many secrets of each kind (each distinct value once)."""

    found: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # memory → kind → secret values

    def note(self, memory: str, kind: str, value: str) -> None:
        self.found.setdefault(memory, {}).setdefault(kind, set()).add(value)

    def hide_partials(self, text: str, memory: str) -> str:
        """Returns `text` with any start (8+ characters) of a secret found in `memory` replaced.

        A title is the content's first line cut to a length: a key across the cut leaves a start
        too short for its rule, still a secret."""
        for kind, values in self.found.get(memory, {}).items():
            for value in sorted(values, key=len, reverse=True):
                start = next((value[:n] for n in range(len(value), _MIN_PARTIAL - 1, -1) if value[:n] in text), "")
                text = text.replace(start, placeholder(kind)) if start else text
        return text

    def report(self) -> dict[str, Any]:
        """Returns {"count": secrets redacted, "memories": {memory id: {kind: count}}} (sorted, JSON-ready)."""
        memories = {m: {k: len(v) for k, v in sorted(kinds.items())} for m, kinds in sorted(self.found.items())}
        return {"count": sum(sum(k.values()) for k in memories.values()), "memories": memories}


def redact_text(text: str, memory: str = "", seen: Redactions | None = None) -> str:
    """Returns `text` with every credential replaced by its placeholder; notes each in `seen`."""
    for rule in RULES:
        text = rule.pattern.sub(lambda match, rule=rule: _replace(match, rule, memory, seen), text)
    return text


def _replace(match: re.Match[str], rule: Rule, memory: str, seen: Redactions | None) -> str:
    secret = match[rule.group]
    if _PLACEHOLDER.search(secret) or not rule.accept(match):
        return match[0]
    if seen is not None:
        seen.note(memory, rule.kind, secret)
    start, end = match.start(rule.group) - match.start(), match.end(rule.group) - match.start()
    return match[0][:start] + placeholder(rule.kind) + match[0][end:]


def redact_value(value: Any, memory: str, seen: Redactions) -> Any:
    """Returns `value` (a JSON value) with every string in it redacted, keys left as they are."""
    if isinstance(value, str):
        return redact_text(value, memory, seen)
    if isinstance(value, list):
        return [redact_value(v, memory, seen) for v in value]
    if isinstance(value, dict):
        return {k: redact_value(v, memory, seen) for k, v in value.items()}
    return value
