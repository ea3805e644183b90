"""Call every method of the protocol once against a real daemon and print each request and
reply as Markdown (how the examples in docs/protocol.md were produced).

    .venv/bin/python examples/protocol_tour.py > /tmp/tour.md

Runs a private daemon and a private team server (`memoryd-team`, SQLite) in a temporary HOME,
with no model, so nothing of yours is read or written. Long strings in replies are shortened
for the page.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memoryd_client import Client, DaemonUnavailable, RpcError


def shorten(value: Any, limit: int = 160) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    if isinstance(value, list):
        items = [shorten(v, limit) for v in value[:4]]
        return items + ([f"… {len(value) - 4} more"] if len(value) > 4 else [])
    if isinstance(value, dict):
        return {k: shorten(v, limit) for k, v in value.items()}
    return value


def show(conn: Client, method: str, params: dict[str, Any] | None, request_id: int) -> Any:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        request["params"] = params
    try:
        result = conn.call(method, params)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
    except RpcError as exc:
        result = None
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        reply = {"jsonrpc": "2.0", "id": request_id, "error": error}
    print(f"### `{method}`\n")
    print("```json\n→ " + json.dumps(shorten(request), ensure_ascii=False))
    print("← " + json.dumps(shorten(reply), ensure_ascii=False, indent=2) + "\n```\n")
    return result


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="mdtour-") as tmp:
        root = Path(tmp)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "MEMORYD_", "CLAUDE_", "XDG_"))
        }
        env.update(
            HOME=str(root / "home"),
            XDG_STATE_HOME=str(root / "state"),
            MEMORYD_MANAGED_DIR=str(root / "managed"),
        )
        (root / "home").mkdir()
        project = root / "proj"
        (project / ".claude" / "rules").mkdir(parents=True)
        (project / "CLAUDE.md").write_text(
            "# Project\n\nRun `make check` before committing.\n@./docs/style.md\n"
        )
        (project / "docs").mkdir()
        (project / "docs" / "style.md").write_text("Prefer small functions.\n")
        (project / ".claude" / "rules" / "api.md").write_text(
            "---\npaths: src/api/**\n---\nAPI handlers validate input.\n"
        )
        subprocess.run(["git", "init", "-q", str(project)], check=True, env=env)
        subprocess.run(
            [
                "git",
                "-C",
                str(project),
                "remote",
                "add",
                "origin",
                "https://github.com/acme/widgets.git",
            ],
            check=True,
            env=env,
        )
        team_bin = str(Path(sys.executable).parent / "memoryd-team")
        database = f"sqlite:///{root / 'team.db'}"
        created = subprocess.run(
            [team_bin, "token", "create", "--repo", "acme/widgets", "--database", database],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        team = subprocess.Popen(
            [
                team_bin,
                "serve",
                "--port",
                str(port),
                "--database",
                database,
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        env.update(
            MEMORYD_TEAM_URL=f"http://127.0.0.1:{port}",
            MEMORYD_TEAM_TOKEN=created.stdout.strip().splitlines()[-1],
        )
        _wait_for_port(port)
        sock = root / "s" / "memoryd.sock"
        daemon = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    conn = Client(sock, timeout=30).connect()
                    break
                except DaemonUnavailable:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            cwd = str(project)
            messages = [
                {"role": "user", "content": "Please stop using spaces, we use tabs in Go."},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Understood: tabs from now on."}],
                },
            ]
            steps: list[tuple[str, dict[str, Any] | None]] = [
                ("status", None),
                ("rpc.methods", None),
                (
                    "get_context",
                    {"cwd": cwd, "session_id": "s1", "touched_paths": [f"{cwd}/src/api/users.py"]},
                ),
                (
                    "memory.write",
                    {
                        "cwd": cwd,
                        "type": "feedback",
                        "name": "Tabs in Go",
                        "description": "the user wants tabs in Go files",
                        "body": "Indent Go with tabs.\n\n**Why:** team style\n\n**How to apply:** run gofmt",
                    },
                ),
                ("memory.list", {"cwd": cwd}),
            ]
            request_id = 1
            for method, params in steps:
                result = show(conn, method, params, request_id)
                request_id += 1
            path = str(Path(result["memories"][0]["path"])) if result else ""
            more: list[tuple[str, dict[str, Any] | None]] = [
                ("memory.read", {"cwd": cwd, "path": path}),
                (
                    "memory.write",
                    {
                        "cwd": cwd,
                        "type": "feedback",
                        "name": "Tabs in Go",
                        "description": "the user wants tabs in Go files",
                        "body": "Indent Go with tabs, always.\n\n**Why:** team style\n\n**How to apply:** run gofmt",
                        "file": Path(path).name,
                    },
                ),
                ("memory.history", {"cwd": cwd, "path": path}),
            ]
            for method, params in more:
                result = show(conn, method, params, request_id)
                request_id += 1
            version = (
                result["versions"][0]["version"] if result and result.get("versions") else "missing"
            )
            rest: list[tuple[str, dict[str, Any] | None]] = [
                ("memory.restore", {"cwd": cwd, "path": path, "version": version}),
                (
                    "memory.remember",
                    {
                        "cwd": cwd,
                        "text": "Deploys happen on Thursdays after the QA sign-off.",
                        "type": "project",
                    },
                ),
                # What `memctl memory` sends before it saves an edited copy of that memory.
                (
                    "memory.snapshot",
                    {"cwd": cwd, "path": "project_deploys_happen_on_thursdays.md"},
                ),
                ("memory.reconcile", {"cwd": cwd}),
                (
                    "recall",
                    {
                        "cwd": cwd,
                        "query": "which indentation in Go?",
                        "session_id": "s1",
                        "limit": 2,
                    },
                ),
                (
                    "after_turn",
                    {
                        "session_id": "s1",
                        "cwd": cwd,
                        "messages": messages,
                        "read_paths": [f"{cwd}/docs/style.md"],
                    },
                ),
                (
                    "after_tool",
                    {
                        "session_id": "s1",
                        "cwd": cwd,
                        "tool": "Read",
                        "read_paths": [f"{cwd}/docs/style.md"],
                    },
                ),
                ("compact", {"session_id": "s1", "cwd": cwd, "messages": messages}),
                ("settings.get", {"cwd": cwd}),
                ("settings.set", {"key": "autoDreamEnabled", "value": True}),
                ("includes.list", {"cwd": cwd}),
                ("includes.approve", {"cwd": cwd}),
                ("includes.revoke", {"cwd": cwd}),
                ("magicdocs.list", {"cwd": cwd}),
                ("memory.dream", {"cwd": cwd}),
                (
                    "memory.write",
                    {
                        "cwd": cwd,
                        "type": "reference",
                        "name": "Incident runbook",
                        "team": True,
                        "description": "where the on-call runbook lives",
                        "body": "The runbook is the wiki page Ops/On-call.",
                    },
                ),
                ("team.push", {"cwd": cwd}),
                ("team.pull", {"cwd": cwd}),
                ("team.status", {"cwd": cwd}),
                ("memory.delete", {"cwd": cwd, "path": path}),
                ("subscribe", {"events": ["memory/saved", "worker/error"]}),
                ("memory.read", {"cwd": cwd, "path": "/etc/passwd"}),
                ("get_context", {"cwd": "relative/dir"}),
                ("shutdown", None),
            ]
            for method, params in rest:
                show(conn, method, params, request_id)
                request_id += 1
            conn.close()
            daemon.wait(30)
        finally:
            if daemon.poll() is None:
                daemon.terminate()
                daemon.wait(30)
            team.terminate()
            team.wait(30)
    return 0


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
