"""A file's parse is remembered only while the file is unchanged."""

from __future__ import annotations

import os

from compiler.core.file_memo import FileMemo


def test_a_parse_is_reused_until_the_file_changes(tmp_path):
    path = tmp_path / "page.md"
    path.write_bytes(b"one")
    calls = []
    memo: FileMemo[str] = FileMemo()

    def parse(data: bytes) -> str:
        calls.append(data)
        return data.decode().upper()

    assert memo.get(path, parse) == memo.get(path, parse) == "ONE" and len(calls) == 1
    path.write_bytes(b"three")  # in place, another size
    assert memo.get(path, parse) == "THREE"
    stat = os.stat(path)
    path.write_bytes(b"seven")  # in place, the same size: the clock tells it
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert memo.get(path, parse) == "SEVEN"
    other = tmp_path / "new.md"
    other.write_bytes(b"eight")
    os.utime(other, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns))
    os.replace(other, path)  # an atomic write: a new inode, even with the same size and time
    assert memo.get(path, parse) == "EIGHT"
    assert memo.get(path, parse, scope="other layout") == "EIGHT" and len(calls) == 5


def test_the_oldest_files_are_forgotten_past_the_limit(tmp_path):
    memo: FileMemo[bytes] = FileMemo(limit=2)
    files = [tmp_path / f"{n}.md" for n in range(3)]
    for path in files:
        path.write_bytes(path.name.encode())
        memo.get(path, bytes)
    calls = []
    memo.get(files[0], lambda data: calls.append(data) or data)
    assert calls == [b"0.md"]  # forgotten, so parsed again
