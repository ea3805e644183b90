"""The team server is its own package: the daemon's code never imports it or its web stack."""

from __future__ import annotations

import ast
from pathlib import Path

import memoryd

SERVER_ONLY = ("memoryd_team", "starlette", "uvicorn", "asyncpg")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_daemon_package_imports_nothing_of_the_server() -> None:
    root = Path(memoryd.__file__).parent
    offenders = {
        f"{path.relative_to(root)}: {name}"
        for path in root.rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in SERVER_ONLY
    }
    assert offenders == set()


def test_the_server_extra_holds_the_web_stack() -> None:
    import tomllib

    pyproject = tomllib.loads(
        (Path(memoryd.__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    )
    base = " ".join(pyproject["project"]["dependencies"])
    server = " ".join(pyproject["project"]["optional-dependencies"]["server"])
    for package in SERVER_ONLY[1:]:
        assert package not in base
        assert package in server
    assert pyproject["project"]["scripts"]["memoryd-team"] == "memoryd_team.cli:main"
