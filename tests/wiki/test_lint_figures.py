"""Claim-level citations: a figure a page states must be in a source it cites."""

from __future__ import annotations

import pytest

from compiler.wiki.lint import figures, lint_wiki
from compiler.wiki.pages import write_page
from compiler.wiki.sources import ingest_source

SOURCE = b"# Queues\n\nThe default visibility timeout is 30 seconds. Keys expire after twenty-four hours.\n" \
         b"A pool of 1,000 connections is too many; PostgreSQL 16 ships it.\n"


@pytest.mark.parametrize(("text", "found"), [
    ("The timeout is 60 seconds.", {"60"}),
    ("twenty-four hours, Forty, five, a hundred", {"24", "40", "5", "100"}),
    ("1,000 pages and 3.12 and 8080.", {"1000", "3.12", "8080"}),
    ("ADR-003 on 2026-10-14 at 10:30, v2.5, 1.5x, https://x.org/a/1, #12, H2O", set()),
])
def test_figures_are_numbers_stated_not_parts_of_names_dates_or_addresses(text, found):
    assert figures(text) == found


def uncited(wiki, body: str, **page) -> list[dict]:
    source = ingest_source(wiki, SOURCE, "queues.md")["source"]["text"]
    write_page(wiki, "Queue Facts", body, kind="concept", sources=[source], **page)
    return [f for f in lint_wiki(wiki)["findings"] if f["kind"] == "uncited"]


def test_a_figure_none_of_the_cited_sources_holds_is_an_uncited_claim_on_its_line(wiki):
    found = uncited(wiki, "Queues hide messages.\n\nThe default visibility timeout is 60 seconds.\n")
    assert [(f["file"], f["line"]) for f in found] == [("wiki/concepts/Queue Facts.md", 12)]
    assert "60 is in none of the sources" in found[0]["message"] and found[0]["related"] == ["raw/queues.md"]


def test_figures_the_source_holds_in_digits_or_words_are_cited(wiki):
    assert uncited(wiki, "The timeout is 30 seconds; keys last 24 hours; 1000 connections are too many "
                         "on PostgreSQL 16.\n") == []


def test_a_page_citing_memories_is_not_checked_figure_by_figure(wiki):
    assert uncited(wiki, "The timeout is 60 seconds.\n", memories=["m-1"]) == []
