"""A source's bytes → the Markdown an agent reads and search indexes: HTML through markdownify (and
BeautifulSoup), PDF text through pypdf, both imported only when such a source arrives.

Only the readable text survives: scripts, styles, frames and forms are dropped, and a link whose
scheme is not http(s) or mailto (`javascript:`, `obsidian://`, `data:`) keeps its words and loses
its target, so a clipped page cannot bring live content into the vault. A relative link points into
the site it was clipped from, not into the vault: it is resolved against the origin when that is a
web address, else it keeps only its words (in a vault, `[Blog](/blog)` is a broken link to a note).
"""

from __future__ import annotations

import io
import re
from urllib.parse import urljoin
from typing import Any

from compiler.core.errors import InputError

# Characters that would turn text into markup: HTML tags (a page *showing* `&lt;script&gt;` has
# `<script>` in its text) and the brackets of [[links]] and ![[embeds]]. Escaped, they stay words.
_LIVE_TEXT = re.compile(r"[<>\[\]]")
SAFE_LINK = re.compile(r"^(?:https?:|mailto:)", re.IGNORECASE)
RELATIVE_LINK = re.compile(r"^(?![\w+.-]+:)[^\s]")  # no scheme: "/blog", "../a.png", "page.html#x"
_DROPPED = ["script", "style", "iframe", "frame", "frameset", "noscript", "template", "object", "embed", "form",
            "head", "svg", "canvas"]


def media_of(name: str, data: bytes) -> str:
    """Returns "markdown", "text", "html" or "pdf" from the name's suffix, else from the bytes;
    raises InputError for anything else (a binary file)."""
    lowered = name.lower()
    if lowered.endswith(".pdf") or data.startswith(b"%PDF-"):
        return "pdf"
    # Before the suffix: a zip renamed .md or UTF-16 saved as .txt decodes as "UTF-8" full of NULs.
    if b"\x00" in data[:8192]:
        raise InputError(f"{name}: a binary file; engram ingests Markdown, text, HTML and PDF")
    for suffixes, media in (((".md", ".markdown", ".qmd"), "markdown"), ((".txt", ".text"), "text"),
                            ((".html", ".htm", ".xhtml"), "html")):
        if lowered.endswith(suffixes):
            return media
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return "html"
    if name != "-" and "." in name.rsplit("/", 1)[-1]:
        raise InputError(f"{name}: not a Markdown, text, HTML or PDF file (by its suffix)")
    return "markdown"


def decoded(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{name}: not UTF-8 text (byte {error.start}); save it as UTF-8 and ingest again") from None


def html_to_markdown(name: str, data: bytes, origin: str = "") -> tuple[str, str]:
    """Returns (the page's <title>, its body as Markdown); relative links resolve against `origin`."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    def target(el: Any, attribute: str) -> bool:
        """Makes el[attribute] absolute where it can; True when the result is safe to keep."""
        value = (el.get(attribute) or "").strip()
        if RELATIVE_LINK.match(value) and SAFE_LINK.match(origin) and not value.startswith("#"):
            el[attribute] = value = urljoin(origin, value)
        return bool(SAFE_LINK.match(value))

    class _Converter(MarkdownConverter):  # a link keeps its words; an unsafe or unreachable target is dropped
        def convert_a(self, el: Any, text: str, *args: Any, **kwargs: Any) -> str:
            return super().convert_a(el, text, *args, **kwargs) if target(el, "href") else text

        def convert_img(self, el: Any, text: str, *args: Any, **kwargs: Any) -> str:
            return super().convert_img(el, text, *args, **kwargs) if target(el, "src") else ""

        def escape(self, text: str, parent_tags: Any) -> str:  # text nodes only: code is left as it is
            return inert_text(super().escape(text, parent_tags))

    soup = BeautifulSoup(data, "html.parser")
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for element in soup(_DROPPED):
        element.decompose()
    text = _Converter(heading_style="ATX", bullets="-").convert_soup(soup)
    return title, re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def pdf_to_markdown(name: str, data: bytes) -> tuple[str, str]:
    """Returns (the PDF's title metadata, its text, a `## Page N` heading per page)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        title = str((reader.metadata or {}).get("/Title") or "").strip()
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as error:
        raise InputError(f"{name}: not a readable PDF ({error})") from None
    if not any(p.strip() for p in pages):
        raise InputError(f"{name}: the PDF has no text layer (a scan?); engram does not run OCR")
    body = "\n\n".join(f"## Page {n}\n\n{inert_text(text.strip())}" for n, text in enumerate(pages, 1) if text.strip())
    return title, body + "\n"


def inert_text(text: str) -> str:
    """Returns `text` with each tag or link bracket backslash-escaped: Obsidian shows it, runs nothing."""
    return _LIVE_TEXT.sub(lambda m: "\\" + m.group(0), text)


def markdown_title(text: str) -> str:
    """Returns the first `# heading` of a Markdown text, or its frontmatter `title:`, or ""."""
    found = re.search(r"^title:\s*[\"']?(.+?)[\"']?\s*$", text[:2000], re.MULTILINE) if text.startswith("---") else None
    heading = re.search(r"^#\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
    return (found or heading).group(1).strip() if (found or heading) else ""
