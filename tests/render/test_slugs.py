"""Memory page names (issue 14, item 9): readable in every script, safe on every file system."""

from __future__ import annotations

import pytest

from compiler.render.memory import SLUG_BYTES, project_slugs, slugify


@pytest.mark.parametrize("title, slug", [
    ("Решение: использовать Postgres", "решение-использовать-postgres"),
    ("Απόφαση για τη βάση", "απόφαση-για-τη-βάση"),
    ("语义图谱 检索", "语义图谱-检索"),
    ("日本語のメモ", "日本語のメモ"),
    ("한국어 메모", "한국어-메모"),
    ("Diseño del pipeline", "diseno-del-pipeline"),  # Latin accents fold as before
    ("Deploys are blue-green!", "deploys-are-blue-green"),
    ("CON", "m-con"), ("", "memory"), ("?*<>|", "memory"),
    ("a\u202eevil\u200bname", "a-evil-name"),  # bidi override and zero-width space are not letters
])
def test_titles_in_any_script_give_readable_slugs(title, slug):
    assert slugify(title) == slug


def test_slugs_are_bounded_in_bytes_and_characters():
    assert len(slugify("x" * 300, 50)) == 50
    cjk = slugify("中" * 300, 200)
    assert len(cjk.encode("utf-8")) <= SLUG_BYTES and cjk == "中" * (SLUG_BYTES // 3)


def test_projects_named_in_other_scripts_get_distinct_folders():
    slugs = project_slugs(["Проект", "проект", "项目"])
    assert slugs["项目"] == "项目" and len(set(slugs.values())) == 3
