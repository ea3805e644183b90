"""memoryd installs as an ordinary Python application: build the wheel, install it, run it.

The wheel is built from a copy of the source (so the checkout gets no `build/`) without build
isolation and installed with `--no-index`, so nothing is downloaded. The fresh virtual
environment gets its third-party packages from this test run's own site-packages through a
`.pth` line (a plain path: the editable install's import hooks there are not run), so what is
imported as memoryd is the wheel's copy. Every command is started by its absolute path from
the new environment's `bin/`, as pipx and `uv tool install` would put it on PATH.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from memoryd_client.version import build_version, checkout_commit

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "memoryd", "memoryd_team", "clients")
COMMANDS = ("memoryd", "memctl", "memoryd-mcp", "memoryd-team")

pytestmark = pytest.mark.slow


def _run(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=300, **kwargs
    )  # type: ignore[call-overload]


def built_version(wheel: Path) -> str:
    """The version `wheel` was built with: its copied checkout's, read from the copy's `.git`
    (`memoryd.__version__` is read once a run, and a commit landing since made it another)."""
    return build_version(wheel.parent.parent / "src")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    commit = checkout_commit(REPO)
    if commit is not None:
        # The checkout's commit, as its .git holds it: the wheel's version names it as the
        # checkout's does (memoryd_client.version), which the tests below compare.
        (src / ".git").mkdir()
        (src / ".git" / "HEAD").write_text(f"{commit}\n")
    built = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--quiet",
        "--wheel-dir",
        root / "dist",
        src,
    )
    assert built.returncode == 0, built.stderr
    (found,) = (root / "dist").glob("memoryd-*.whl")
    return found


def test_the_wheel_holds_every_package_and_declares_the_server_extra(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
        (entry_points_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(entry_points_name).decode()
    packages = {n.split("/", 1)[0] for n in names if "/" in n and ".dist-info" not in n}
    assert packages == {"memoryd", "memoryd_team", "memctl", "memoryd_client"}
    assert "memoryd_client/py.typed" in names
    for unit in ("memoryd.service", "memoryd.socket", "com.memoryd.daemon.plist"):
        assert f"memctl/units/{unit}" in names  # `memctl service install` renders these
    assert any(n.endswith(".toml") and n.startswith("memoryd") for n in names)  # secret rules
    assert f"Version: {built_version(wheel)}" in metadata
    if checkout_commit(REPO) is not None:  # the checkout's commit, as memoryd_client.version
        assert re.fullmatch(r"0\.1\.0\+g[0-9a-f]{12}", built_version(wheel))
    for command in COMMANDS:
        assert f"{command} = " in entry_points
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # The team server's packages come only with the extra: the base install stays lean.
    for server_only in ("starlette", "uvicorn", "asyncpg"):
        (line,) = [r for r in requires if re.match(rf"Requires-Dist: {server_only}\b(?!-)", r)]
        assert 'extra == "server"' in line


def _fresh_environment(wheel: Path, root: Path, deps: str) -> tuple[Path, dict[str, str], Path]:
    """A new virtual environment under `root` with the wheel installed and its third-party
    packages from the folder `deps`: the environment, the commands' env and their HOME."""
    venv = root / "app"
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-deps",
        "--no-index",
        "--quiet",
        wheel,
    )
    assert installed.returncode == 0, installed.stderr
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    Path(site.stdout.strip(), "_memoryd_test_deps.pth").write_text(deps + "\n")

    home = root / "home"
    home.mkdir()
    # A login session's runtime folder: without one `service install` refuses (su, sudo -u).
    (root / "run").mkdir(mode=0o700)
    env = {
        "HOME": str(home),
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "XDG_RUNTIME_DIR": str(root / "run"),
        "LANG": "C.UTF-8",
    }
    return venv, env, home


def test_installed_commands_run_from_a_fresh_environment(wheel: Path, tmp_path: Path) -> None:
    venv, env, home = _fresh_environment(wheel, tmp_path, sysconfig.get_paths()["purelib"])
    python = venv / "bin" / "python"
    where = _run(
        python,
        "-c",
        "import memoryd, memctl, memoryd_team; print(memoryd.__file__, memctl.__file__)",
        env=env,
        cwd=home,
    )
    assert where.returncode == 0, where.stderr
    assert all(p.startswith(str(venv)) for p in where.stdout.split()), where.stdout

    for command in COMMANDS:
        script = venv / "bin" / command
        assert script.is_file(), command
        # The script runs the environment's own interpreter, wherever it is called from.
        assert script.read_text().splitlines()[0] == f"#!{python}"
        shown = _run(script, "--version", env=env, cwd=home)
        assert shown.returncode == 0, (command, shown.stderr)
        assert shown.stdout.strip() == f"{command} {built_version(wheel)}"
        helped = _run(script, "--help", env=env, cwd=home)
        assert helped.returncode == 0, (command, helped.stderr)
        assert "usage:" in helped.stdout
    # Nothing was written to HOME by asking for help.
    assert os.listdir(home) == []

    # The service and the Claude Code hooks name this installation, wherever it lives.
    service = _run(venv / "bin" / "memctl", "service", "install", "--dry-run", env=env, cwd=home)
    # The dry run asks systemd what the real run would find: exit 1 where no user manager
    # answers (a container, CI), as the real run would; the units are shown either way.
    assert service.returncode in (0, 1), service.stderr
    assert "Traceback" not in service.stderr
    assert f"ExecStart={venv / 'bin' / 'memoryd'} --socket " in service.stdout
    wired = _run(venv / "bin" / "memctl", "claude-code", "install", env=env, cwd=home)
    assert wired.returncode == 0, wired.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    commands = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == [f"{venv / 'bin' / 'memctl'} hook stop"]
    servers = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert servers["memoryd"]["command"] == str(venv / "bin" / "memoryd-mcp")


# What the MCP SDK brings (a web server) and what must not come with a base install.
NOT_IN_THE_BASE_INSTALL = {"mcp", "starlette", "uvicorn", "sse-starlette", "asyncpg"}


def test_the_base_install_pulls_no_web_server_nor_the_mcp_sdk() -> None:
    """`[project.dependencies]` and all they require in turn (as installed here, markers
    evaluated for this machine) hold neither the MCP SDK nor a web server."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pending = [(Requirement(text), frozenset({""})) for text in declared]
    pulled: set[str] = set()
    while pending:
        requirement, extras = pending.pop()
        marker = requirement.marker
        if marker is not None and not any(marker.evaluate({"extra": e}) for e in extras):
            continue
        name = canonicalize_name(requirement.name)
        if name in pulled:
            continue
        pulled.add(name)
        wanted = frozenset({"", *requirement.extras})
        pending += [(Requirement(text), wanted) for text in importlib.metadata.requires(name) or []]
    assert {"anthropic", "httpx", "pydantic"} <= pulled  # the walk went somewhere
    assert pulled.isdisjoint(NOT_IN_THE_BASE_INSTALL), pulled & NOT_IN_THE_BASE_INSTALL


def test_the_wheel_declares_the_mcp_sdk_as_the_mcp_extra(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (metadata_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
    assert "Provides-Extra: mcp" in metadata.splitlines()
    (line,) = [r for r in metadata.splitlines() if re.match(r"Requires-Dist: mcp\b(?![-_])", r)]
    assert 'extra == "mcp"' in line


def test_the_mcp_extra_excludes_sdks_without_the_server_memoryd_mcp_imports() -> None:
    """mcp_tools imports `mcp.server.mcpserver`, which mcp 2 introduced (1.x has FastMCP): an
    older SDK already in the environment must not satisfy `memoryd[mcp]`, else memoryd-mcp
    would tell the user to install what they just installed."""
    assert (
        "from mcp.server.mcpserver import"
        in (REPO / "clients" / "memoryd_client" / "mcp_tools.py").read_text()
    )
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (sdk,) = [r for r in map(Requirement, extra["mcp"]) if canonicalize_name(r.name) == "mcp"]
    assert not sdk.specifier.contains("1.30.0"), sdk
    assert sdk.specifier.contains(importlib.metadata.version("mcp")), sdk


def test_a_base_environment_runs_all_but_the_mcp_server_and_says_what_to_install(
    wheel: Path, tmp_path: Path
) -> None:
    """The installed wheel beside every third-party package of this run but the MCP SDK."""
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name == "mcp" or re.fullmatch(r"mcp-[^-]+\.dist-info", entry.name):
            continue
        (deps / entry.name).symlink_to(entry)
    venv, env, home = _fresh_environment(wheel, tmp_path / "base", str(deps))
    bin_dir = venv / "bin"
    absent = _run(bin_dir / "python", "-c", "import mcp", env=env, cwd=home)
    assert "No module named 'mcp'" in absent.stderr

    shown = _run(bin_dir / "memoryd-mcp", "--version", env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"memoryd-mcp {built_version(wheel)}"
    refused = _run(bin_dir / "memoryd-mcp", "--cwd", str(home), env=env, cwd=home)
    assert refused.returncode == 2
    assert refused.stdout == ""
    (message,) = refused.stderr.splitlines()
    assert message.startswith("memoryd-mcp: this needs the MCP SDK (mcp is missing)")
    assert "pipx install --force '.[mcp]'" in message  # from the checkout: no index has it

    # Claude Code gets the hooks; no MCP server that would fail in every session.
    wired = _run(bin_dir / "memctl", "claude-code", "install", env=env, cwd=home)
    assert wired.returncode == 0, wired.stderr
    assert "MCP server not added" in wired.stdout
    assert "pip install '.[mcp]'" in wired.stdout
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    commands = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == [f"{bin_dir / 'memctl'} hook stop"]
    assert not (home / ".claude.json").exists()
    # A project's settings approve no server that is not there.
    project = home / "proj"
    project.mkdir()
    wired = _run(bin_dir / "memctl", "claude-code", "install", "--project", str(project), env=env)
    assert wired.returncode == 0, wired.stderr
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert "hooks" in local
    assert "enabledMcpjsonServers" not in local
    assert not (project / ".mcp.json").exists()
    # An earlier install (with the SDK) left a server entry and its approval: taken out, since
    # it would fail in every session; other servers stay.
    earlier = {"mcpServers": {"memoryd": {"command": "memoryd-mcp"}, "other": {"command": "x"}}}
    (project / ".mcp.json").write_text(json.dumps(earlier))
    local["enabledMcpjsonServers"] = ["memoryd", "other"]
    (project / ".claude" / "settings.local.json").write_text(json.dumps(local))
    wired = _run(bin_dir / "memctl", "claude-code", "install", "--project", str(project), env=env)
    assert wired.returncode == 0, wired.stderr
    assert "MCP server removed (an earlier install's entry could not start)" in wired.stdout
    assert json.loads((project / ".mcp.json").read_text()) == {
        "mcpServers": {"other": {"command": "x"}}
    }
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert local["enabledMcpjsonServers"] == ["other"]
    # A settings file memctl refuses to edit: the entries to merge by hand hold no server.
    (home / ".claude" / "settings.json").write_text("[]")
    refused = _run(bin_dir / "memctl", "claude-code", "install", env=env, cwd=home)
    assert refused.returncode == 2
    assert "memoryd-mcp" not in refused.stderr
    assert "memctl" in refused.stderr


BLOCK_SERVER_EXTRA = """
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("starlette", "uvicorn", "asyncpg"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from memoryd_team.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--port", "8765"],
        ["token", "list", "--database", "postgresql://127.0.0.1:1/none"],
    ],
)
def test_memoryd_team_without_the_server_extra_says_what_to_install(
    argv: list[str], tmp_path: Path
) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    result = _run(sys.executable, "-c", BLOCK_SERVER_EXTRA, *argv, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "install memoryd[server]" in result.stderr
    # From the checkout: no `memoryd` of ours is on a package index for pipx to fetch.
    assert "pipx install --force '.[server]'" in result.stderr


def _set_up_checkout(tmp_path: Path, python: Path) -> Path:
    """A checkout holding scripts/setup whose .venv was set up (its stamp newer than
    pyproject.toml), its `bin/python` a link to `python`."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup", root / "scripts" / "setup")
    (root / "pyproject.toml").write_text("")
    os.utime(root / "pyproject.toml", (1, 1))
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(python)
    (root / ".venv" / ".memoryd-setup").write_text("")
    return root


def test_setup_runs_npm_only_when_asked_for_node(tmp_path: Path) -> None:
    """scripts/serve (setup without MEMORYD_SETUP_NODE) installs no Node packages: it ran
    `npm ci` (204 packages) for the VS Code tests whenever npm was on PATH."""
    python, _ = _fake_python(tmp_path, "python3.11")  # a venv of its own: set up here
    root = _set_up_checkout(tmp_path, python=python)
    (root / "clients" / "vscode").mkdir(parents=True)
    (root / "clients" / "vscode" / "package-lock.json").write_text("{}")
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "npm-calls"
    (tools / "npm").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    (tools / "npm").chmod(0o755)
    env = _setup_env(PATH=f"{tools}:{os.environ['PATH']}")
    _run_setup(root, env)
    assert not calls.exists()
    _run_setup(root, {**env, "MEMORYD_SETUP_NODE": "1"})
    assert calls.read_text().split()[0] == "ci"


# A Python whose venvs have pip only when its `-m venv` made them (a marker beside bin/python).
# A venv made by two runs at once fails in one of them, as `python -m venv` does on the
# other's half-made files (`{calls}.slow` makes the making last long enough to overlap).
FAKE_PYTHON = """#!/bin/sh
echo "$*" >> {calls}
if [ "$1 $2" = "-m venv" ]; then
  mkdir "$3.busy" 2>/dev/null || {{ echo "Error: [Errno 17] File exists: '$3/bin/python'" >&2; exit 1; }}
  if [ -e "{calls}.slow" ]; then sleep 1; fi
  mkdir -p "$3/bin" && rm -f "$3/bin/python" && cp "$0" "$3/bin/python" && touch "$3/bin/pip-ok"
  rmdir "$3.busy"
elif [ "$1 $2" = "-m pip" ] && [ ! -e "$(dirname "$0")/pip-ok" ]; then
  echo "$0: No module named pip" >&2
  exit 1
fi
exit 0
"""


def _fake_python(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """FAKE_PYTHON as `name`, and the file it records its arguments in."""
    calls = tmp_path / "python-calls"
    python = tmp_path / name
    python.write_text(FAKE_PYTHON.format(calls=calls))
    python.chmod(0o755)
    return python, calls


def _setup_env(**extra: str) -> dict[str, str]:
    """This environment without MEMORYD_SETUP_* (as a plain scripts/serve runs setup), and
    `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_SETUP_")}
    return {**env, **extra}


def _run_setup(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`root`'s scripts/setup run under `env`, which it must pass. Bash is named by its path:
    `env`'s PATH may not lead to it."""
    done = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(root / "scripts" / "setup")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def _setup_afresh(root: Path, python: Path, calls: Path) -> str:
    """Run scripts/setup with `python`; assert it made .venv again and set it up: its stderr."""
    done = _run_setup(root, _setup_env(PYTHON=str(python)))
    ran = calls.read_text().splitlines()
    assert "-m venv .venv" in ran
    assert any(line.startswith("-m pip install") and "-e .[dev]" in line for line in ran), ran
    assert (root / ".venv" / ".memoryd-setup").exists()
    assert "installing memoryd and its tools into .venv" in done.stderr  # not silent for minutes
    return done.stderr


def test_setup_makes_the_venv_afresh_when_its_python_is_gone(tmp_path: Path) -> None:
    """A system upgrade removed the venv's Python (python3.11 gone, 3.13 in its place): setup
    made a venv over the old one with the new Python, kept the stamp, installed nothing, and
    scripts/serve failed (`.venv/bin/memoryd: cannot execute`) until .venv was deleted."""
    root = _set_up_checkout(tmp_path, python=tmp_path / "gone" / "python3.11")
    old_packages = root / ".venv" / "lib" / "python3.11" / "site-packages"
    old_packages.mkdir(parents=True)
    python, calls = _fake_python(tmp_path, "python3.13")
    assert "no longer runs" in _setup_afresh(root, python, calls)
    assert not old_packages.exists()  # the old version's packages went with it


def test_setup_makes_the_venv_afresh_when_it_was_left_without_pip(tmp_path: Path) -> None:
    """A first scripts/serve interrupted while `python -m venv` ran ensurepip leaves a
    .venv/bin/python without pip and no stamp: every later run failed with "No module named
    pip" until .venv was deleted by hand."""
    python, calls = _fake_python(tmp_path, "python3.11")
    root = _set_up_checkout(tmp_path, python=python)
    (root / ".venv" / ".memoryd-setup").unlink()  # killed before it was set up
    assert "has no pip (a first run interrupted" in _setup_afresh(root, python, calls)


def _venv_importing_memoryd_from(tmp_path: Path, folder: Path) -> Path:
    """A checkout whose set-up .venv (a real one, stamped) imports memoryd from `folder`, as
    an editable install made there does."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup", root / "scripts" / "setup")
    (root / "memoryd").mkdir()
    (root / "memoryd" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text("")
    os.utime(root / "pyproject.toml", (1, 1))
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    (site_packages,) = venv.glob("lib/python3*/site-packages")
    (site_packages / "checkout.pth").write_text(f"{folder}\n")
    (venv / ".memoryd-setup").write_text("")
    return root


def test_setup_makes_the_venv_afresh_when_the_checkout_moved(tmp_path: Path) -> None:
    """A checkout moved (or copied) elsewhere keeps a .venv set up for the old folder: its
    scripts' `#!` lines and its editable install name it. scripts/serve failed (`cannot
    execute: required file not found`), or, the old folder still there, ran its code."""
    original = tmp_path / "original"
    (original / "memoryd").mkdir(parents=True)
    (original / "memoryd" / "__init__.py").write_text("")
    root = _venv_importing_memoryd_from(tmp_path, original)
    python, calls = _fake_python(tmp_path, "python3.11")
    assert "another folder" in _setup_afresh(root, python, calls)


def test_setup_keeps_a_venv_set_up_for_this_checkout(tmp_path: Path) -> None:
    root = _venv_importing_memoryd_from(tmp_path, tmp_path / "checkout")
    python, calls = _fake_python(tmp_path, "python3.11")
    assert _run_setup(root, _setup_env(PYTHON=str(python))).stderr == ""
    assert not calls.exists()  # its own Python ran every check; none was looked for
    assert (root / ".venv" / ".memoryd-setup").exists()


def test_setup_runs_a_set_up_venv_with_no_python_on_path(tmp_path: Path) -> None:
    """A .venv that works needs no Python on PATH: run from a shell without pyenv's shims,
    setup stopped at "memoryd needs Python 3.11 or newer on PATH" and scripts/serve with it."""
    python, calls = _fake_python(tmp_path, "python3.11")
    root = _set_up_checkout(tmp_path, python=python)
    tools = tmp_path / "tools"  # what setup runs besides its Python, and no python3*
    tools.mkdir()
    for tool in ("dirname",):
        (tools / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    env = {k: v for k, v in _setup_env(PATH=str(tools)).items() if not k.startswith("PYTHON")}
    _run_setup(root, env)
    assert "-m venv .venv" not in calls.read_text().splitlines()


def _path_without(tmp_path: Path, tool: str) -> str:
    """A PATH of one folder linking every command on this PATH but `tool`."""
    folder = tmp_path / f"path-without-{tool}"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for command in Path(directory or ".").glob("*"):
            link = folder / command.name
            if command.name != tool and not link.exists() and os.access(command, os.X_OK):
                link.symlink_to(command)
    return str(folder)


@pytest.mark.parametrize("flock", [True, False], ids=["flock", "no-flock"])
def test_two_setups_at_once_make_one_venv_and_run_no_apt_get(tmp_path: Path, flock: bool) -> None:
    """scripts/serve and scripts/check started together on a fresh checkout: both made .venv,
    one's `python -m venv` failed on the other's files, and it took that for Debian's missing
    venv package: deleted .venv under the other, ran `apt-get install python3.X-venv` (with
    sudo: a password prompt), and failed "install python3-venv" though it was installed.
    macOS has no flock(1): there both still made .venv."""
    python, calls = _fake_python(tmp_path, "python3.11")
    calls.with_name(calls.name + ".slow").touch()
    root = _set_up_checkout(tmp_path, python=python)
    shutil.rmtree(root / ".venv")  # a fresh checkout
    tools = tmp_path / "tools"
    tools.mkdir()
    apt_calls = tmp_path / "apt-calls"
    (tools / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {apt_calls}\nexit 1\n')
    (tools / "apt-get").chmod(0o755)
    path = os.environ["PATH"] if flock else _path_without(tmp_path, "flock")
    env = _setup_env(PYTHON=str(python), PATH=f"{tools}:{path}")
    runs = [
        subprocess.Popen(
            ["bash", str(root / "scripts" / "setup")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    assert [code for code, _out, _err in results] == [0, 0], results
    assert not apt_calls.exists()
    assert calls.read_text().splitlines().count("-m venv .venv") == 1
    assert (root / ".venv" / ".memoryd-setup").exists()
