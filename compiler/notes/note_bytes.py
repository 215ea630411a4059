"""A note file's bytes → the text to parse: binary files told apart, NUL bytes dropped, the size
bounded, UTF-8 decoded with BOM and line breaks normalised.

The binary rule: a file with no NUL byte is text (bad UTF-8 is shown as \ufffd and warned about).
A file with NUL bytes is text when, once they are removed, its first BINARY_SNIFF_BYTES are valid
UTF-8 with at most 1% other control characters (Obsidian shows such a note, NULs and all); else
it is binary (an image or archive renamed .md) and skipped with a warning.
"""

from __future__ import annotations

import re

from compiler.core.errors import BuildWarning

BINARY_SNIFF_BYTES = 8192
MAX_CONTROL_SHARE = 0.01  # control characters (not tab, line breaks, form feed, escape) a text may hold

_BOM = b"\xef\xbb\xbf"
_LINE_BREAK_RE = re.compile(r"\r\n?")
_CONTROL_RE = re.compile(r"[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f]")


def text_bytes(path: str, raw: bytes) -> tuple[bytes | None, list[BuildWarning]]:
    """Returns the bytes to index (None for a binary file) and the warnings about NULs or binary."""
    if b"\0" not in raw:
        return raw, []
    if _looks_binary(raw[:BINARY_SNIFF_BYTES].replace(b"\0", b"")):
        return None, [BuildWarning(path, 0, "binary file, skipped", "binary")]
    count = raw.count(b"\0")
    line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
    noun = "NUL byte" if count == 1 else "NUL bytes"
    message = f"{count} {noun} (first on line {line}) removed; the rest is indexed as text"
    return raw.replace(b"\0", b""), [BuildWarning(path, line, message, "nul")]


def _looks_binary(head: bytes) -> bool:
    """True when `head` (NULs removed) is not UTF-8 text with few control characters."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":  # a character cut by the sniff window is fine
            return True
        text = head[:exc.start].decode("utf-8")
    if not text.strip():
        return True  # nothing but NULs and blanks: nothing to index
    return len(_CONTROL_RE.findall(text)) > MAX_CONTROL_SHARE * len(text)


def limit_size(path: str, raw: bytes, max_bytes: int, warnings: list[BuildWarning]) -> bytes:
    """Returns at most `max_bytes` of `raw`, cut after a newline (or a UTF-8 character)."""
    if len(raw) <= max_bytes:
        return raw
    size, limit = _megabytes(len(raw)), _megabytes(max_bytes)
    message = f"note is {size}, over the {limit} limit: only the first {limit} is indexed"
    warnings.append(BuildWarning(path, 0, message, "size"))
    cut = raw.rfind(b"\n", 0, max_bytes)
    if cut >= 0:
        return raw[: cut + 1]
    end = max_bytes
    # No newline at all: step back off UTF-8 continuation bytes so the cut is no encoding error.
    while end > max(0, max_bytes - 4) and raw[end] & 0xC0 == 0x80:
        end -= 1
    return raw[:end]


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def decode(path: str, data: bytes, warnings: list[BuildWarning]) -> str:
    """Returns the text with BOM stripped and line breaks normalised to LF."""
    data = data.removeprefix(_BOM)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        message = f"not valid UTF-8 (first bad byte on line {line}); bad bytes shown as \ufffd"
        warnings.append(BuildWarning(path, line, message, "encoding"))
        text = data.decode("utf-8", errors="replace")
    # A lone CR is a line break for markdown-it too; normalising both keeps line numbers aligned.
    return _LINE_BREAK_RE.sub("\n", text)
