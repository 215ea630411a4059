"""benchmarks/notes.py's question sets: the dev part and the held-out parts, scored apart."""

from __future__ import annotations

from benchmarks import notes


def test_every_part_loads_with_its_part_and_languages() -> None:
    questions = notes.load_questions(list(notes.PARTS))
    parts = {q["part"] for q in questions}
    assert parts == {"dev", "heldout", "heldout2"}
    for part in parts:
        mine = [q for q in questions if q["part"] == part]
        assert {q["lang"] for q in mine} == {"en", "es"}
        assert all(q["q"].strip() and q["answers"] for q in mine)
        assert all(a.endswith(".md") and a.split("/")[0] in {"npm", "undici", "markdownlint"}
                   for q in mine for a in q["answers"])
    held_out = [q for q in questions if q["part"] == "heldout"]
    assert sum(q["lang"] == "en" for q in held_out) >= 40 and sum(q["lang"] == "es" for q in held_out) >= 15
    dev_texts = {q["q"].lower() for q in questions if q["part"] == "dev"}
    assert not any(q["q"].lower() in dev_texts for q in held_out)  # held out: no dev question again


def test_dev_groups_keep_the_keys_of_before_and_held_out_ones_are_prefixed() -> None:
    assert notes.groups_of({"part": "dev", "lang": "es"}) == ("all", "es")
    assert notes.groups_of({"part": "heldout", "lang": "en"}) == ("heldout-all", "heldout-en")
