"""The import graph keeps its shape: layers never import the daemon, clients never import memoryd.

Read from the source with `ast` (every import, also those inside functions and under
TYPE_CHECKING), so a wrong import fails here before it shapes the code around it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _modules(root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every module `path` imports (`from a import b` counts as a and a.b)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offenders(roots: list[Path], allowed: set[str], forbidden: str) -> list[str]:
    found = []
    for root in roots:
        for module, path in _modules(root):
            if _within(module, forbidden) or module in allowed:
                continue
            found += [
                f"{module} imports {n}" for n in _imports(module, path) if _within(n, forbidden)
            ]
    return sorted(set(found))


def test_no_layer_imports_the_daemon() -> None:
    # `python -m memoryd` starts the daemon: the one module outside it that may name it.
    roots = [REPO / "memoryd", REPO / "memoryd_team"]
    assert _offenders(roots, {"memoryd.__main__"}, "memoryd.daemon") == []


def test_no_client_imports_memoryd() -> None:
    roots = [REPO / "clients" / "memctl", REPO / "clients" / "memoryd_client"]
    assert _offenders(roots, set(), "memoryd") == []
    assert _offenders(roots, set(), "memoryd_team") == []


def test_the_check_sees_a_wrong_import(tmp_path: Path) -> None:
    layer = tmp_path / "memoryd" / "automem"
    layer.mkdir(parents=True)
    (layer / "bad.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from memoryd.daemon.app import Daemon\n"
        "def later():\n"
        "    from ..daemon import wiring\n"
    )
    assert _offenders([tmp_path / "memoryd"], set(), "memoryd.daemon") == [
        "memoryd.automem.bad imports memoryd.daemon",
        "memoryd.automem.bad imports memoryd.daemon.app",
        "memoryd.automem.bad imports memoryd.daemon.app.Daemon",
        "memoryd.automem.bad imports memoryd.daemon.wiring",
    ]
