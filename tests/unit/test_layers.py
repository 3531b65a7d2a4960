"""Every import points down: broker -> coordinator -> storage -> protocol.

Read from the sources' syntax trees, so an import anywhere counts: at the top, under
``TYPE_CHECKING``, or inside a function (where one would dodge a cycle at run time). No package
imports anything first-party inside a function either: a cycle shows as an import error at once
instead of hiding in a function body.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["protocol", "storage", "coordinator", "broker"]  # each may import only those before it


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, first-party package imported, inside a function) for each import of ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    in_function.add(id(sub))
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top in LAYERS:
                out.append((node.lineno, top, id(node) in in_function))
    return out


@pytest.mark.parametrize("package", LAYERS)
def test_imports_point_down(package):
    allowed = set(LAYERS[:LAYERS.index(package) + 1])
    wrong = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, top, inside in _imports(path):
            if top not in allowed:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
            elif inside:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {top} inside a function")
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_every_kind_of_import(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from broker.broker import Broker\n"
                      "def f():\n    import broker.net.server\n")
    assert _imports(sample) == [(3, "broker", False), (5, "broker", True)]
