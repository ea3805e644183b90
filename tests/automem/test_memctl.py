"""`memctl remember`, `recall`, `memory-history`, `memory-restore` as real subprocesses."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from memoryd.automem.recall.pick import NO_TOPIC
from tests.automem.conftest import file_day
from tests.conftest import DaemonHandle


async def _start_memctl(handle: DaemonHandle, *args: str | bytes) -> asyncio.subprocess.Process:
    """`memctl` against the daemon, its standard streams pipes."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(handle.socket_path),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _memctl(
    handle: DaemonHandle, *args: str | bytes, stdin: bytes | None = None
) -> tuple[int, str, str]:
    proc = await _start_memctl(handle, *args)
    out, err = await proc.communicate(stdin)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_remember_history_restore(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    code, out, err = await _memctl(
        daemon,
        "remember",
        "Deploys need a green canary first.",
        "--type",
        "project",
        "--cwd",
        str(project),
    )
    assert code == 0, err
    assert out.startswith("saved [project] Deploys need a green canary first: ")
    path = Path(out.rsplit(": ", 1)[1].strip())
    assert path.parent == memdir
    code, out, _ = await _memctl(
        daemon,
        "--json",
        "remember",
        "-",
        "--type",
        "project",
        "--cwd",
        str(project),
        stdin=b"Deploys need a green canary first!",
    )
    assert code == 0
    result = json.loads(out)
    assert result["created"] is False  # the same name: updated, old text kept
    code, out, _ = await _memctl(daemon, "memory-history", path.name, "--cwd", str(project))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == str(path)
    version = lines[1].split()[0]
    code, out, _ = await _memctl(
        daemon, "memory-restore", path.name, version, "--cwd", str(project)
    )
    assert code == 0
    assert out.strip() == f"restored {path} to {version}"
    assert "first." in path.read_text()


async def test_errors_exit_nonzero(daemon: DaemonHandle, project: Path) -> None:
    code, _, err = await _memctl(
        daemon, "memory-history", "../../etc/passwd.md", "--cwd", str(project)
    )
    assert code == 1
    assert "-32002" in err
    code, _, err = await _memctl(daemon, "remember", "   ", "--cwd", str(project))
    assert code == 2
    assert "empty" in err


async def test_recall_shows_what_an_agent_would_get(daemon: DaemonHandle, project: Path) -> None:
    for text in (
        "Deploys go through the canary cluster first.",
        "Dana owns the billing service.",
        "Use tabs in Go files.",
    ):
        code, _, err = await _memctl(daemon, "remember", text, "--cwd", str(project))
        assert code == 0, err
    code, out, err = await _memctl(
        daemon, "recall", "which cluster gets deploys first?", "--cwd", str(project)
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].endswith(" (ranked locally):")
    # Each memory a block: number, type and title; its description; its file.
    assert lines[1] == "1. [project] Deploys go through the canary cluster first"
    assert lines[2] == "   Deploys go through the canary cluster first."
    assert Path(lines[3].strip()).is_file()

    # JSON: the recall result as the daemon sent it; the query from standard input.
    code, out, _ = await _memctl(
        daemon,
        "--json",
        "recall",
        "-",
        "--limit",
        "1",
        "--local",
        "--cwd",
        str(project),
        stdin=b"who owns billing?",
    )
    assert code == 0
    result = json.loads(out)
    assert result["selector"] == "local"
    assert [m["name"] for m in result["memories"]] == ["Dana owns the billing service"]

    # --why: what the local ranker saw in each memory
    code, out, err = await _memctl(
        daemon, "recall", "which cluster gets deploys first?", "--why", "--cwd", str(project)
    )
    assert code == 0, err
    # (it names no date: it is dated by its file's last write)
    day = file_day(out.splitlines()[3].strip())
    assert (
        out.splitlines()[4]
        == f"   why: words cluster, deploys, first · date {day} (file time) · lexical 1.00"
    )

    code, out, _ = await _memctl(daemon, "recall", "kubernetes ingress", "--cwd", str(project))
    assert (code, out.strip()) == (0, "no memory recalled (ranked locally)")
    code, out, _ = await _memctl(daemon, "recall", "go ahead", "--cwd", str(project))
    assert (code, out.strip()) == (0, f"no memory recalled: {NO_TOPIC}")


async def test_recall_refuses_bad_usage(daemon: DaemonHandle, project: Path) -> None:
    code, _, err = await _memctl(daemon, "recall", "  ", "--cwd", str(project))
    assert (code, err.strip()) == (2, "memctl: nothing to recall: the query is empty")
    code, _, err = await _memctl(daemon, "recall", "x", "--limit", "6", "--cwd", str(project))
    assert code == 2
    assert "invalid choice: 6" in err


async def test_text_that_is_not_utf8_is_refused_before_it_is_sent(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Bytes that do not decode reach Python as lone surrogates, which JSON cannot carry: the
    # daemon would answer with a parse error about surrogates; memctl says what is wrong.
    cwd = ("--cwd", str(project))
    code, _, err = await _memctl(daemon, "remember", "-", *cwd, stdin=b"keep \xff this")
    assert (code, err.strip()) == (2, "memctl: the text is not valid UTF-8")
    code, _, err = await _memctl(daemon, "remember", b"keep \xff this", *cwd)
    assert (code, err.strip()) == (2, "memctl: the text is not valid UTF-8")
    code, _, err = await _memctl(daemon, "recall", "-", *cwd, stdin=b"\xfe\xff commits")
    assert (code, err.strip()) == (2, "memctl: the query is not valid UTF-8")
    code, _, err = await _memctl(daemon, "call", "recall", b'{"cwd": "/", "query": "\xff"}')
    assert (code, err.strip()) == (2, "memctl: params is not valid UTF-8")
    assert not memdir.exists() or not any(memdir.glob("*.md"))  # nothing was saved
    # UTF-8 that is not ASCII is text like any other.
    code, out, err = await _memctl(daemon, "remember", "-", *cwd, stdin="Café hours: 8–16".encode())
    assert code == 0, err
    assert out.startswith("saved [project] Café hours")


async def test_call_reads_its_params_from_standard_input_for_a_dash(daemon: DaemonHandle) -> None:
    """`-` is standard input, as for `remember` and `recall` (docs/clients.md); it used to be
    parsed as JSON, so params over an argument's 128 KiB could not be given at all."""
    code, out, err = await _memctl(daemon, "call", "status", "-", stdin=b"{}")
    assert code == 0, err
    assert '"protocol_version"' in out
    code, _, err = await _memctl(daemon, "call", "status", "-", stdin=b"not json")
    assert code == 2
    assert err.startswith("memctl: params is not valid JSON")
    code, _, err = await _memctl(daemon, "call", "status", "-", stdin=b'{"x": "\xff"}')
    assert (code, err.strip()) == (2, "memctl: params is not valid UTF-8")
