"""The architecture as a test: the import contracts in pyproject.toml hold, and no module cycle exists.

`lint-imports` (import-linter) checks the layers and that each heavy dependency stays in its one
package; the cycle check below looks at single modules, which a layer contract cannot see.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx

ROOT = Path(__file__).resolve().parents[2]


def module_graph() -> nx.DiGraph:
    """Returns the import graph of compiler's modules (type-checking imports left out, as the contracts do)."""
    imports = grimp.build_graph("compiler", exclude_type_checking_imports=True)
    graph = nx.DiGraph()
    for module in imports.modules:
        graph.add_node(module)
        for imported in imports.find_modules_directly_imported_by(module):
            graph.add_edge(module, imported)
    return graph


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_module_imports_itself_through_others():
    graph = module_graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_check_sees_a_cycle():
    graph = module_graph()
    graph.add_edge("compiler.core.errors", "compiler.cli.main")  # an arrow up closes a loop
    assert any(len(c) > 1 for c in nx.strongly_connected_components(graph))
