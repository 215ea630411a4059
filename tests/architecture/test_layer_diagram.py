"""docs/architecture.md cannot drift from the code: its layer diagram and its module table are
generated from the real imports and docstrings, and this test fails when the page differs.

    python tests/architecture/test_layer_diagram.py --write    # rewrite both blocks after a change

The diagram is one Mermaid `flowchart TD` node per package under `compiler` and one edge per
package that imports another (type-checking imports left out, as the import contracts do). The
table lists each package's modules with the summary of its docstring (its first paragraph).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: make the worktree's `compiler` importable for grimp
    sys.path.insert(0, str(ROOT))

import grimp  # noqa: E402

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = "compiler"
BLOCKS = ("layers", "modules")


def layers() -> list[list[str]]:
    """Returns the layers top to bottom, each its packages, as the layers contract in pyproject.toml lists them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c.get("type") == "layers")
    return [[name.strip().removeprefix(f"{PACKAGE}.") for name in layer.split("|")] for layer in contract["layers"]]


def layer_order() -> list[str]:
    """Returns the packages top to bottom (within a layer as the contract lists them)."""
    return [name for layer in layers() for name in layer]


def package_graph() -> tuple[list[str], list[tuple[str, str]], dict[str, list[str]]]:
    """Returns (packages in layer order, package-to-package imports, each package's modules)."""
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=True, cache_dir=None)
    modules: dict[str, list[str]] = {}
    edges: set[tuple[str, str]] = set()
    for module in graph.modules:
        parts = module.split(".")
        if len(parts) < 2 or not _is_package(f"{PACKAGE}.{parts[1]}"):
            continue  # compiler itself and its top-level modules (__main__) are not a layer
        modules.setdefault(parts[1], []).append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")
            if len(target) > 1 and target[1] != parts[1] and _is_package(f"{PACKAGE}.{target[1]}"):
                edges.add((parts[1], target[1]))
    order = layer_order()
    rank = {name: (order.index(name) if name in order else len(order), name) for name in modules}
    packages = sorted(modules, key=rank.__getitem__)
    return (packages, sorted(edges, key=lambda e: (rank[e[0]], rank[e[1]])),
            {name: sorted(found) for name, found in modules.items()})


def _is_package(module: str) -> bool:
    return (ROOT / Path(*module.split(".")) / "__init__.py").is_file()


def _source(module: str) -> Path:
    base = ROOT / Path(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def summary(module: str) -> str:
    """Returns the first paragraph of a module's docstring on one line ('' without a docstring)."""
    doc = ast.get_docstring(ast.parse(_source(module).read_text(encoding="utf-8"))) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def render_layers() -> str:
    """Returns the Mermaid diagram of the packages and their imports (deterministic)."""
    packages, edges, _ = package_graph()
    lines = ["```mermaid", "flowchart TD"]
    lines += [f"  {name}[{PACKAGE}.{name}]" for name in packages]
    lines += [f"  {source} --> {target}" for source, target in edges]
    return "\n".join([*lines, "```"])


def render_modules() -> str:
    """Returns one Markdown table per package, bottom layer first: each module and its docstring summary."""
    packages, _, modules = package_graph()
    out: list[str] = []
    for name in reversed(packages):
        package = f"{PACKAGE}.{name}"
        about = summary(package)
        caption = f" — {about}" if about and about.lower() != name else ""
        out += [f"### `{package}`{caption}", "", "| module | what it holds |", "| --- | --- |"]
        for module in modules[name]:
            if module == package:
                continue
            path = _source(module).relative_to(ROOT).as_posix()
            out.append(f"| `{path}` | {_cell(summary(module)) or '(no docstring)'} |")
        out.append("")
    return "\n".join(out).rstrip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


RENDER = {"layers": render_layers, "modules": render_modules}


def block(text: str, name: str) -> str:
    """Returns what sits between `<!-- name:start -->` and `<!-- name:end -->` in `text`."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    assert start in text and end in text, f"{DOC.relative_to(ROOT)} lacks the markers {start} / {end}"
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def rewrite(text: str) -> str:
    """Returns `text` with every generated block replaced by what the code gives now."""
    for name in BLOCKS:
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        head, rest = text.split(start, 1)
        tail = rest.split(end, 1)[1]
        text = f"{head}{start}\n{RENDER[name]()}\n{end}{tail}"
    return text


HINT = "docs/architecture.md is out of date: run `python tests/architecture/test_layer_diagram.py --write`"


def test_the_layer_diagram_is_the_real_import_graph():
    assert block(DOC.read_text(encoding="utf-8"), "layers") == render_layers(), HINT


def test_the_module_table_lists_every_module_with_its_docstring():
    assert block(DOC.read_text(encoding="utf-8"), "modules") == render_modules(), HINT


def test_the_diagram_has_every_package_and_only_downward_edges():
    packages, edges, _ = package_graph()
    assert set(packages) == set(layer_order()), "a package is missing from the layers contract in pyproject.toml"
    level = {name: depth for depth, layer in enumerate(layers()) for name in layer}
    assert all(level[a] < level[b] for a, b in edges), [e for e in edges if level[e[0]] >= level[e[1]]]


def test_rewrite_is_stable():
    text = DOC.read_text(encoding="utf-8")
    assert rewrite(rewrite(text)) == rewrite(text)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/architecture/test_layer_diagram.py --write")
    DOC.write_text(rewrite(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"rewrote the generated blocks of {DOC.relative_to(ROOT)}")
