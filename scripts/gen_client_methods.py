"""Writes `AsyncMethods` in clients/memoryd_client/methods.py from `SyncMethods`.

The sync class is the one written by hand; the async one is the same methods with `async def`
and `await self.call(...)`, kept as plain code in the file so type checkers see every
signature. Run after changing `SyncMethods`: `.venv/bin/python scripts/gen_client_methods.py`.
tests/clients/test_client_library.py fails when the two drift apart.
"""

from __future__ import annotations

import ast
import copy
import subprocess
import sys
from pathlib import Path

METHODS = Path(__file__).resolve().parent.parent / "clients" / "memoryd_client" / "methods.py"
ASYNC_DOC = "Typed methods over an awaitable `call`."


class _ToAsync(ast.NodeTransformer):
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AsyncFunctionDef:
        self.generic_visit(node)
        fields = {name: getattr(node, name) for name in node._fields}
        return ast.copy_location(ast.AsyncFunctionDef(**fields), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "call"
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            return ast.copy_location(ast.Await(node), node)
        return node


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"no class {name} in {METHODS}")


def async_from_sync(tree: ast.Module) -> ast.ClassDef:
    """`AsyncMethods` as it must be, derived from the module's `SyncMethods`."""
    cls = copy.deepcopy(_class(tree, "SyncMethods"))
    cls.name = "AsyncMethods"
    first = cls.body[0]
    assert isinstance(first, ast.Expr)
    assert isinstance(first.value, ast.Constant)
    first.value.value = ASYNC_DOC
    converted = _ToAsync().visit(cls)
    assert isinstance(converted, ast.ClassDef)
    return ast.fix_missing_locations(converted)


def main() -> int:
    text = METHODS.read_text(encoding="utf-8")
    tree = ast.parse(text)
    old = _class(tree, "AsyncMethods")
    lines = text.splitlines(keepends=True)
    start = old.lineno - 1 - len(old.decorator_list)
    assert old.end_lineno is not None
    new = ast.unparse(async_from_sync(tree)) + "\n"
    METHODS.write_text("".join(lines[:start]) + new + "".join(lines[old.end_lineno :]))
    ruff = Path(sys.executable).with_name("ruff")
    subprocess.run([str(ruff), "format", str(METHODS)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
