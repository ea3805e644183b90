"""The import graph keeps its shape: layers never import the daemon, core imports no layer,
clients never import memoryd, the team server shares only the wire vocabulary with the daemon,
and the pure domain modules docs/architecture.md names open no socket, loop or log, nor read the
clock.

Read from the source with `ast` (every import, also those inside functions and under
TYPE_CHECKING), so a wrong import fails here before it shapes the code around it.
"""

from __future__ import annotations

import ast
import re
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


# What core/ may use of the rest of memoryd (docs/architecture.md): the edges, and llm/client.py
# for a type. Any other module is above it: a layer, or the daemon's own (`diagnose`).
CORE_USES = {
    "memoryd",
    "memoryd.fsutil",
    "memoryd.gitfacts",
    "memoryd.llm.client",
    "memoryd.paths",
    "memoryd.settings",
}


def _core_outsiders(package: Path) -> list[str]:
    """What the `memoryd.core` modules under `package` import of memoryd beyond CORE_USES."""
    core = [(module, path) for module, path in _modules(package) if _within(module, "memoryd.core")]
    assert core, f"no memoryd.core under {package}"
    return sorted(
        {
            f"{module} imports {name}"
            for module, path in core
            for name in _imports(module, path)
            if _within(name, "memoryd")
            and not _within(_module_of(name), "memoryd.core")
            and _module_of(name) not in CORE_USES
        }
    )


def test_core_imports_no_layer() -> None:
    # Imports point down only: core/ is below every layer. A list of layers to refuse let a
    # module that is none (memoryd/diagnose.py, the daemon's) through.
    assert _core_outsiders(REPO / "memoryd") == []


def test_the_core_check_sees_what_core_may_not_use(tmp_path: Path) -> None:
    core = tmp_path / "memoryd" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text(
        "from memoryd import diagnose, paths\n"
        "from memoryd.core.project import Project\n"
        "from memoryd.llm.client import ModelClient\n"
        "import memoryd.automem.index\n"
    )
    assert _core_outsiders(tmp_path / "memoryd") == [
        "memoryd.core.bad imports memoryd.automem.index",
        "memoryd.core.bad imports memoryd.diagnose",
    ]


# What the team server may use of memoryd: the wire vocabulary and the secret scanner it shares
# with the daemon, and the helpers for private files and memoryd's folders; never a layer.
TEAM_SERVER_SHARES = {
    "memoryd",  # __version__
    "memoryd.fsutil",
    "memoryd.paths",
    "memoryd.team",
    "memoryd.team.protocol",
    "memoryd.team.secrets",
}


def _module_of(name: str) -> str:
    """`name` if it is a module of the repository, else the module it is a name in."""
    path = REPO.joinpath(*name.split("."))
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return name
    return name.rpartition(".")[0]


def test_the_team_server_shares_only_the_wire_vocabulary() -> None:
    outside = {
        f"{module} imports {name}"
        for module, path in _modules(REPO / "memoryd_team")
        for name in _imports(module, path)
        if _within(name, "memoryd") and _module_of(name) not in TEAM_SERVER_SHARES
    }
    assert sorted(outside) == []


# DESIGN.md: "Pure domain (no sockets, no event loop, no clock reads, no logging setup)".
_IMPURE = (
    "asyncio",
    "socket",
    "selectors",
    "subprocess",
    "time",
    "logging",
    "structlog",
    "httpx",
    "anthropic",
    "uvloop",
    "watchfiles",
    "memoryd.daemon",
    "memoryd.fsutil",
    "memoryd.fswatch",
    "memoryd.gitfacts",
    "memoryd.gitsafe",
    "memoryd.settings",
    "memoryd.llm.client",
    "memoryd.rules.realfs",
    "memoryd.team.sync.client",
    "memoryd.team.sync.localfs",
)
_CLOCK_READS = {"now", "today", "utcnow"}


def _impurities(module: str, path: Path) -> list[str]:
    found = [
        f"{module} imports {name}"
        for name in _imports(module, path)
        if any(_within(name, impure) for impure in _IMPURE)
    ]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        # datetime.now(), date.today(): a clock read, whatever the import's spelling.
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _CLOCK_READS
            and ast.unparse(node.func.value).rpartition(".")[2] in {"date", "datetime"}
        ):
            found.append(f"{module} reads the clock: {ast.unparse(node)}")
    return found


def _pure_modules() -> list[tuple[str, Path]]:
    """The modules architecture.md's "Pure domain" paragraph names, found in the tree; for a
    folder it names (`automem/recall/`), its modules but those its `__init__` says are not."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    paragraph = text.split("- **Pure domain**", 1)[1].split("\n- **", 1)[0]
    named = [n for n in re.findall(r"`([\w/]+(?:\.py|/))`", paragraph) if n != "__init__.py"]
    assert len(named) > 10, paragraph  # the paragraph was found and read
    files = []
    for name in named:
        # Written from memoryd/ (`rules/globs.py`), from automem/ (`recall/pasted.py`) or from
        # the repository (`memoryd_team/storage/plan.py`, `clients/memctl/claude_code.py`).
        places = [REPO / "memoryd" / name, REPO / "memoryd" / "automem" / name, REPO / name]
        found = [place for place in places if place.is_file() or (place / "__init__.py").is_file()]
        assert len(found) == 1, f"architecture.md names {name}: found at {found}"
        files += _package_pure_modules(found[0]) if found[0].is_dir() else found
    modules = []
    for path in dict.fromkeys(files):  # recall/'s modules are also named one by one
        parts = path.relative_to(REPO).with_suffix("").parts
        modules.append((".".join(parts[1:] if parts[0] == "clients" else parts), path))
    return modules


def _package_pure_modules(package: Path) -> list[Path]:
    """The modules of `package` but those its docstring excepts ("All of it is pure domain
    logic but `pick`, which ...")."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    said = re.search(r"pure\s+domain\s+logic\s+but\s+((?:`\w+`(?:,\s+|\s+and\s+)?)+)", doc or "")
    assert said is not None, f"{package}/__init__.py does not say which of it is pure"
    impure = set(re.findall(r"`(\w+)`", said.group(1)))
    modules = sorted(package.glob("*.py"))
    assert impure <= {path.stem for path in modules}, impure
    return [path for path in modules if path.stem not in impure and path.stem != "__init__"]


def test_pure_domain_modules_open_no_socket_loop_or_log_nor_read_the_clock() -> None:
    assert [line for module, path in _pure_modules() for line in _impurities(module, path)] == []


def test_the_purity_check_sees_an_impure_module(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import time\n"
        "from datetime import date\n"
        "def today():\n"
        "    from memoryd.fsutil import atomic_write_bytes\n"
        "    return date.today()\n"
    )
    assert _impurities("memoryd.bad", bad) == [
        "memoryd.bad imports time",
        "memoryd.bad imports memoryd.fsutil",
        "memoryd.bad imports memoryd.fsutil.atomic_write_bytes",
        "memoryd.bad reads the clock: date.today()",
    ]


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
