"""A benchmark run as `python benchmarks/x.py` has benchmarks/ first on its import path, so a script
named like a standard-library module hides that module from everything the run imports
(benchmarks/secrets.py hid `secrets` from huggingface_hub and broke the first ONNX export)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_no_benchmark_script_shadows_a_standard_library_module() -> None:
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    assert scripts, "no benchmark scripts found"
    assert not scripts & set(sys.stdlib_module_names)
