"""Wiki fixtures: a vault with the clock pinned, its WikiLayout, and a tiny real PDF with a text layer."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from compiler.core.settings import load_settings
from compiler.wiki.layout import WikiLayout

NOW = "2026-03-04 05:06:07"


@pytest.fixture
def make_wiki(make_vault) -> Callable[..., WikiLayout]:
    """Returns a factory: {path: text or bytes} (+ engram.toml lines) → the vault's WikiLayout, clock pinned."""

    def make(files: dict[str, str | bytes] | None = None, toml: str = "") -> WikiLayout:
        vault = make_vault({"engram.toml": f'now = "{NOW}"\n{toml}', **(files or {})})
        return WikiLayout.of(vault, load_settings(vault))

    return make


@pytest.fixture
def wiki(make_wiki) -> WikiLayout:
    return make_wiki()


@pytest.fixture
def make_pdf() -> Callable[..., bytes]:
    return pdf_bytes


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, bytes]]:
    return files_of


def pdf_bytes(*pages: str, title: str = "") -> bytes:
    """Returns a PDF whose pages show `pages` in Helvetica (a real text layer; a blank page for "")."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for text in pages:
        page = writer.add_blank_page(300, 300)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = DecodedStreamObject()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream.set_data(f"BT /F1 12 Tf 20 150 Td ({escaped}) Tj ET".encode("latin-1") if text else b"")
        page[NameObject("/Contents")] = writer._add_object(stream)
    if title:
        writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def files_of(root: Path) -> dict[str, bytes]:
    """Returns every file under `root` by relative path, with its bytes (what "nothing changed" compares)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
