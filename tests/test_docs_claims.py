"""What README.md and docs/*.md state about paths, names and commands is what the code does."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from memoryd_client import default_socket_path
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# The editor plugins' own pages too.
EDITOR_PAGES = [
    REPO / "clients" / "vscode" / "README.md",
    REPO / "clients" / "nvim" / "doc" / "memoryd.txt",
]


def test_the_last_resort_socket_is_stated_as_the_clients_compute_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pages said /tmp/memoryd-<uid>/memoryd.sock; the rule takes $TMPDIR first.
    for name in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "MEMORYD_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() caches its answer
    actual = default_socket_path(platform="linux")
    stated = {
        (page.name, rule)
        for page in PAGES
        for rule in re.findall(r"`([^`\s]*memoryd-<uid>/memoryd\.sock)`", page.read_text())
    }
    assert stated, "no page states the socket rule's last resort"
    for page, rule in sorted(stated):
        path = rule.replace("$TMPDIR", str(tmp_path)).replace("<uid>", str(os.getuid()))
        assert Path(path) == actual, f"{page} states {rule}"


def test_the_client_library_methods_listed_are_the_library_s() -> None:
    from memoryd_client.methods import AsyncMethods, SyncMethods

    text = (REPO / "docs" / "clients.md").read_text()
    found = re.search(r"One method per RPC: (.*?) — on both clients", text, re.S)
    assert found, "docs/clients.md lists memoryd_client's methods"
    listed = re.findall(r"`(\w+)`", found.group(1))
    for mixin in (SyncMethods, AsyncMethods):
        methods = {name for name in vars(mixin) if not name.startswith("_") and name != "call"}
        assert sorted(listed) == sorted(methods), mixin.__name__


def test_every_unit_template_placeholder_is_documented() -> None:
    templates = [*(REPO / "systemd").iterdir(), *(REPO / "launchd").iterdir()]
    used = {p for t in templates for p in re.findall(r"@[A-Z_]+@", t.read_text())}
    assert used, "the templates have placeholders"
    documented = set(re.findall(r"`(@[A-Z_]+@)`", (REPO / "docs" / "operations.md").read_text()))
    assert sorted(used - documented) == []


def _headings(page: Path) -> tuple[list[str], list[str]]:
    """A page's headings, and the bold lead-ins of its paragraphs (`**One writer.**`), which
    the pages cite as sections too."""
    text = page.read_text()
    heads = [
        re.sub(r"^#+\s*", "", line).strip()
        for line in text.splitlines()
        if re.match(r"#{1,6} ", line)
    ]
    bold = re.findall(r"(?:^|\n)\s*(?:- )?\*\*([^*]+?)\.?\*\*", text)
    return heads, bold


def _plain(title: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[`*]", "", title)).strip().lower().rstrip(".")


def _has_section(page: Path, title: str) -> bool:
    heads, bold = _headings(page)
    want = _plain(title)
    return any(
        h == want or h.startswith((want + " (", want + ":")) for h in map(_plain, heads + bold)
    )


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _without_code(text: str) -> str:
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), text)


def test_cross_references_and_links_resolve() -> None:
    wrong = []
    for page in [*PAGES, *EDITOR_PAGES]:
        text = page.read_text()
        # `docs/auto-memory.md`, "Hybrid recall" — a page and a section of it.
        for m in re.finditer(r"`?(?:docs/)?([a-z0-9-]+\.md)`?,?\s+\"([^\"]+)\"", text):
            target = REPO / "docs" / m.group(1)
            if m.group(1) in ("MEMORY.md", "CLAUDE.md") or not re.match(r"[A-Z]", m.group(2)):
                continue  # an example of a memory index line, not a reference
            if not target.exists() or not _has_section(target, m.group(2)):
                wrong.append(f"{page.name}: {m.group(0)!r}")
        # "Pasted code and output" above — a section of the same page.
        for m in re.finditer(r"\"([A-Z][^\"]{2,60})\"\)?\s+(?:above|below)\b", text):
            if not _has_section(page, m.group(1)):
                wrong.append(f"{page.name}: {m.group(0)!r}")
        for m in re.finditer(r"\]\(([^)\s]+)\)", _without_code(text)):
            link = m.group(1)
            if re.match(r"[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = page.parent / path if path else page
            if not target.exists():
                wrong.append(f"{page.name}: link {link}")
            elif anchor and anchor not in {_github_anchor(h) for h in _headings(target)[0]}:
                wrong.append(f"{page.name}: anchor {link}")
    assert wrong == []


def test_environment_variables_named_in_docs_are_read_somewhere() -> None:
    named = {
        v
        for p in [*PAGES, *EDITOR_PAGES]
        for v in re.findall(r"\b(?:MEMORYD|ANTHROPIC|CLAUDE_CODE)_[A-Z0-9_]+\b", p.read_text())
    }
    assert named
    code = "\n".join(
        f.read_text(errors="replace")
        for folder in (
            "memoryd",
            "memoryd_team",
            "clients",
            "scripts",
            "bench",
            "tests",
            "systemd",
            "launchd",
        )
        for f in (REPO / folder).rglob("*")
        if f.is_file()
        and f.suffix in (".py", ".lua", ".ts", "", ".service", ".plist", ".sh")
        and "node_modules" not in f.parts
        and f.name != Path(__file__).name
    )
    assert sorted(v for v in named if v not in code) == []


def test_repository_paths_named_in_docs_exist() -> None:
    missing = []
    for page in [*PAGES, *EDITOR_PAGES]:
        for path in re.findall(
            r"`((?:memoryd|memoryd_team|tests|bench|clients|scripts|systemd|launchd|examples)/[^`*\s]*)`",
            page.read_text(),
        ):
            name = path.split("::")[0]
            # A build output (clients/vscode/out/) exists only after `npm run build`.
            if "/out/" not in name and not (REPO / name).exists():
                missing.append(f"{page.name}: {path}")
    assert missing == []


def _memctl_commands(text: str) -> set[str]:
    spans = set(re.findall(r"`memctl ([^`]+)`", text))
    for block in re.findall(r"```.*?```", text, re.S):  # command lines in code blocks
        line = r"^\s*(?:\$ )?(?:\.venv/bin/)?memctl (.+?)(?:\s+#.*)?$"
        spans |= set(re.findall(line, block, re.M))
    return {s.strip() for s in spans}


def test_memctl_commands_in_docs_are_accepted_by_memctl(capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from memctl.__main__ import build_parser

    placeholders = {"N": "1", "T": "project"}
    refused = []
    for page in [*PAGES, *EDITOR_PAGES]:
        for command in sorted(_memctl_commands(page.read_text())):
            if re.search(r"[…<>|=:]|&&| / ", command):
                continue  # elided, piped or prose around it: not a command line to type
            try:
                words = shlex.split(
                    command.replace("$PWD", "/tmp").replace("[", " ").replace("]", " ")
                )
            except ValueError:
                continue
            argv = [placeholders.get(w, w) for w in words]
            if argv[0] == "hook":
                continue  # the hook's own parser never exits 2 (Claude Code reads it as "block")
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:
                err = capsys.readouterr().err.strip()
                # A command named in prose without its arguments (`memctl recall`) is no error.
                if exc.code not in (0, None) and "arguments are required" not in err:
                    refused.append(f"{page.name}: memctl {command}: {err.splitlines()[-1]}")
    assert refused == []


def test_the_agent_loop_sketch_names_every_parameter_and_result_field() -> None:
    import dataclasses
    import inspect

    from memoryd.agent.loop import AgentResult, run_agent

    text = (REPO / "docs" / "background-writers.md").read_text()
    block = re.search(r"result = await run_agent\((.*?)\n\)\n(# AgentResult:.*?)\n```", text, re.S)
    assert block, "docs/background-writers.md sketches run_agent"
    keywords = set(re.findall(r"^\s{4}(\w+)=", block.group(1), re.M))
    parameters = set(inspect.signature(run_agent).parameters) - {
        "host"
    }  # passed first, by position
    assert sorted(keywords ^ parameters) == []
    comment = block.group(2)
    fields = [f.name for f in dataclasses.fields(AgentResult)]
    assert [f for f in fields if not re.search(rf"\b{f}\b", comment)] == []


def test_auto_memory_methods_table_names_every_parameter() -> None:
    from memoryd.daemon.wiring import rpc_methods

    specs = rpc_methods()
    text = (REPO / "docs" / "auto-memory.md").read_text()
    section = text.split("\n## Methods\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        (method, cell)
        for method, cell in re.findall(r"^\| `([a-z_.]+)` \| `([^`]*)`", section, re.M)
        if method in specs
    ]
    assert len(rows) >= 10
    for method, cell in rows:
        model = specs[method].params
        assert model is not None, method
        documented = {re.sub(r"\?.*", "", word.strip()).split(" ")[0] for word in cell.split(",")}
        fields = {field.alias or name for name, field in model.model_fields.items()}
        assert sorted(documented ^ fields) == [], method


def test_team_memory_page_names_what_team_pull_and_push_add() -> None:
    import ast

    source = (REPO / "memoryd" / "daemon" / "methods" / "team.py").read_text()
    added = {
        node.name: {
            key.value
            for ret in ast.walk(node)
            if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Dict)
            for key in ret.value.keys
            if isinstance(key, ast.Constant)
        }
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.AsyncFunctionDef) and node.name in ("_pull", "_push")
    }
    text = re.sub(r"\s+", " ", (REPO / "docs" / "team-memory.md").read_text())
    said = re.search(r"plus `ok` \((.*?) for a pull; (.*?) for a push", text)
    assert said, "team-memory.md says what team.pull and team.push add"
    assert set(re.findall(r"`(\w+)`", said.group(1))) == added["_pull"]
    assert set(re.findall(r"`(\w+)`", said.group(2))) == added["_push"]


def test_closed_lists_on_the_pages_are_the_code_s() -> None:
    import typing

    from memoryd import errors
    from memoryd.daemon.methods.core import EVENTS
    from memoryd.rules.model import SkipReason

    protocol = (REPO / "docs" / "protocol.md").read_text()
    notifications = protocol.split("\n## Notifications\n", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `([a-z_]+/[a-z_]+)` \|", notifications, re.M)) == EVENTS
    codes = {
        cls.code for cls in vars(errors).values() if isinstance(cls, type) and hasattr(cls, "code")
    }
    table = protocol.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    listed = {int(code) for code in re.findall(r"^\| (-32\d\d\d) \|", table, re.M)}
    assert codes
    assert codes <= listed
    rules = re.sub(r"\s+", " ", (REPO / "docs" / "instruction-files.md").read_text())
    reasons = re.search(r"`skipped\[\]\.reason` is one of (.*?); `detail`", rules)
    assert reasons, "instruction-files.md lists the skip reasons"
    assert set(re.findall(r"`(\w+)`", reasons.group(1))) == set(typing.get_args(SkipReason))


def test_the_memory_size_cap_is_stated_as_the_file_s() -> None:
    # A body under the cap is refused when its frontmatter takes the file over it: the page
    # gave the cap as the body's alone.
    from memoryd.automem.memfile import MAX_FILE_BYTES, render_memory
    from memoryd.errors import TooLarge

    with pytest.raises(TooLarge):
        render_memory("project", "n", "d", "x" * (MAX_FILE_BYTES - 10))
    text = re.sub(r"\s+", " ", (REPO / "docs" / "auto-memory.md").read_text())
    errors = re.search(r"Errors: unknown `type`.*?auto memory off → -32003\.", text)
    assert errors, "auto-memory.md lists memory.write's errors"
    assert f"{MAX_FILE_BYTES:,}" in errors.group(0)
    assert "memory file (frontmatter and body)" in errors.group(0)


def _result_fields(cell: str) -> set[str]:
    """The top-level result fields a table cell names: `a, b` or `a`, `b` (…), not what its
    parentheses say of a field's items; a trailing `?` marks one sent only sometimes."""
    top = re.sub(r"\([^()]*(?:\([^()]*\)[^()]*)*\)", "", cell)
    return {
        word.strip().rstrip("?")
        for span in re.findall(r"`([^`]+)`", top)
        for word in span.split(",")
        if re.fullmatch(r"\s*\w+\??\s*", word)
    }


async def test_auto_memory_methods_table_names_every_result_field(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    cwd = str(project)
    text = (REPO / "docs" / "auto-memory.md").read_text()
    section = text.split("\n## Methods\n", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\| `([a-z_.]+)` \| `[^`]*`[^|]*\| (.*) \|$", section, re.M))
    written = await daemon.call(
        "memory.write", cwd=cwd, type="project", name="Deploys", description="d", body="Thursdays."
    )
    path = written["path"]
    snapshot = await daemon.call("memory.snapshot", cwd=cwd, path=path)
    replies = {
        "memory.write": written,
        "memory.list": await daemon.call("memory.list", cwd=cwd),
        "memory.read": await daemon.call("memory.read", cwd=cwd, path=path),
        "memory.snapshot": snapshot,
        "memory.history": await daemon.call("memory.history", cwd=cwd, path=path),
        "memory.restore": await daemon.call(
            "memory.restore", cwd=cwd, path=path, version=snapshot["version"]
        ),
        "memory.remember": await daemon.call("memory.remember", cwd=cwd, text="Dana owns billing"),
        "memory.reconcile": await daemon.call("memory.reconcile", cwd=cwd),
        "recall": await daemon.call("recall", cwd=cwd, query="when do deploys go out?"),
        "memory.delete": await daemon.call("memory.delete", cwd=cwd, path=path),
    }
    differ = {
        method: sorted(set(reply) ^ _result_fields(table[method]))
        for method, reply in replies.items()
        if not set(reply) <= _result_fields(table[method])
    }
    # A field's own fields, where the cell lists them: `index` (`truncated, cap, …`).
    for method, reply in replies.items():
        for name, listed in re.findall(r"`(\w+)` \([^()`]*?`([\w, ]+)`", table[method]):
            value = reply.get(name)
            item = value[0] if isinstance(value, list) and value else value
            if isinstance(item, dict) and not set(item) <= {w.strip() for w in listed.split(",")}:
                differ[f"{method} {name}"] = sorted(
                    set(item) - {w.strip() for w in listed.split(",")}
                )
    assert differ == {}


async def test_the_error_messages_daemon_md_quotes_are_the_daemon_s(daemon: DaemonHandle) -> None:
    # It quoted `invalid params: cwd: must be an absolute path`: pydantic's "Value error, "
    # and the value given are in the message.
    import asyncio

    reader, writer = await asyncio.open_unix_connection(str(daemon.socket_path))
    replies = []
    for request in (
        {"jsonrpc": "1.0", "id": 1, "method": "status"},
        {"jsonrpc": "2.0", "id": 2, "method": "get_context", "params": {"cwd": "rel"}},
    ):
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        replies.append(json.loads(await reader.readline())["error"]["message"])
    writer.close()
    text = re.sub(r"\s+", " ", (REPO / "docs" / "daemon.md").read_text())
    quoted = re.search(
        r"messages that name the field \(`(.*?)`\).*?pydantic model \(`(.*?)`\)", text
    )
    assert quoted, "daemon.md quotes an envelope error and a params error"
    assert quoted.group(1) in replies[0]
    assert quoted.group(2) in replies[1]


async def test_memctl_watch_example_starts_with_the_line_it_prints(daemon: DaemonHandle) -> None:
    # The page showed "watching memory/saved, session/summary_updated, team/synced, …": the
    # daemon's subscribe reply, which `memctl watch` prints, names them in name order.
    client = await daemon.client()
    try:
        subscribed = (await client.subscribe())["subscribed"]
    finally:
        await client.close()
    line = f"watching {', '.join(subscribed)} (Ctrl-C to stop)"
    example = (REPO / "docs" / "clients.md").read_text().split("$ memctl watch\n", 1)[1]
    assert example.splitlines()[0] == line


def test_readme_says_what_scripts_check_sets_up() -> None:
    # The quick start said `./scripts/check` "sets up .venv (and PostgreSQL)"; it also installs
    # Neovim, Node.js and all-mpnet-base-v2's ~400 MB of weights.
    asked = re.findall(r"MEMORYD_SETUP_(\w+)=1", (REPO / "scripts" / "check").read_text())
    named = {"POSTGRES": "PostgreSQL", "NEOVIM": "Neovim", "NODE": "Node.js", "MPNET": "model"}
    assert sorted(asked) == sorted(named)
    readme = (REPO / "README.md").read_text()
    said = re.search(r"^\./scripts/check +#(.*(?:\n +#.*)*)", readme, re.M)
    assert said, "README's quick start runs ./scripts/check"
    assert [word for word in named.values() if word not in said.group(1)] == []


def test_operations_md_says_whether_the_model_settings_are_read() -> None:
    # The page listed memorydModel and memorydSmallModel among the settings memoryd reads, but
    # only settings.KNOWN_KEYS named them: the models come from MEMORYD_MODEL and
    # MEMORYD_SMALL_MODEL alone. They are no settings now (settings.UNREAD_KEYS); wire them up,
    # and this asks for them to be known keys again and for the page to say so.
    from memoryd import settings

    read = [
        f.relative_to(REPO).as_posix()
        for f in (REPO / "memoryd").rglob("*.py")
        if f.name != "settings.py" and re.search(r"memoryd(Small)?Model", f.read_text())
    ]
    models = {"memorydModel", "memorydSmallModel"}
    assert bool(models & settings.KNOWN_KEYS.keys()) == bool(read), read
    assert (models <= settings.UNREAD_KEYS.keys()) == (read == [])
    page = re.sub(r"\s+", " ", (REPO / "docs" / "operations.md").read_text())
    says_unread = "`memorydModel` and `memorydSmallModel` are not settings" in page
    assert says_unread == (read == []), read


def test_the_project_backup_folder_is_named_as_memctl_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The page said `backups/<project path>/`, which reads as the path's folders under it.
    from memctl.commands.claude_setup import backup_folder

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    folder = backup_folder(Path("/home/ada/src/widgets"))
    assert folder is not None
    assert folder.parent == tmp_path / "memoryd" / "backups"
    assert f"(`backups/{folder.name}/`)" in (REPO / "docs" / "clients.md").read_text()


def test_the_model_retry_statuses_and_find_refusals_are_the_code_s() -> None:
    # The pages said the model client retries "5xx" (it retries 500, 502, 503 and 504 of them)
    # and listed find's refused primaries without -files0-from.
    from memoryd.agent.shell import _FIND_FORBIDDEN, PROGRAMS
    from memoryd.llm.client import RETRYABLE_STATUS

    for page in ("daemon.md", "background-writers.md"):
        text = re.sub(r"\s+", " ", (REPO / "docs" / page).read_text())
        said = re.search(r"retries (?:with backoff on )?((?:\d{3}/)+\d{3})", text)
        assert said, page
        assert {int(code) for code in said.group(1).split("/")} == RETRYABLE_STATUS
    text = re.sub(r"\s+", " ", (REPO / "docs" / "background-writers.md").read_text())
    listed = re.search(r"`find` may not use `([^`]+)`", text)
    assert listed
    assert set(listed.group(1).split()) == _FIND_FORBIDDEN
    programs = re.search(r"`Bash` runs only `([^`]+)`", text)
    assert programs
    assert set(programs.group(1).split()) == PROGRAMS


def test_notification_params_on_the_protocol_page_are_what_the_daemon_sends() -> None:
    # session/summary_updated was listed with `session_id` alone; it carries `path` too.
    import ast

    from memoryd.daemon.methods.core import EVENTS

    sent: dict[str, set[str]] = {}
    for source in (REPO / "memoryd").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if (
                isinstance(node, ast.Call)
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in EVENTS
                and isinstance(node.args[1], ast.Dict)
            ):
                keys = {k.value for k in node.args[1].keys if isinstance(k, ast.Constant)}
                sent.setdefault(node.args[0].value, set()).update(keys)
    assert set(sent) == EVENTS
    protocol = (REPO / "docs" / "protocol.md").read_text()
    table = protocol.split("\n## Notifications\n", 1)[1].split("\n## ", 1)[0]
    documented = {
        event: set(re.findall(r"`(\w+)`", params))
        for event, params in re.findall(r"^\| `([a-z_]+/[a-z_]+)` \| (.*?) \|", table, re.M)
    }
    assert {
        e: sorted(keys - documented[e]) for e, keys in sent.items() if keys - documented[e]
    } == {}


def test_every_memoryd_flag_is_in_the_daemon_page_s_table() -> None:
    # `--log-level`, `--line-limit`, `--no-watch` and `--version` were in `memoryd --help` but
    # not in "Running it", the page's list of how to run it.
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "memoryd", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", shown)) - {"--help"}
    assert flags
    text = (REPO / "docs" / "daemon.md").read_text()
    table = text.split("\n## Running it\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `memoryd (--[a-z-]+)", table, re.M))
    assert sorted(flags - listed) == []


def test_every_memctl_command_is_in_the_clients_page_s_table() -> None:
    # The table of what memctl does listed memory, recall, watch, hook, claude-code and
    # service, not start/stop/restart/status, remember, memory-history/restore, dream,
    # includes or call: each is in `memctl --help`.
    import argparse

    from memctl.__main__ import build_parser

    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = (REPO / "docs" / "clients.md").read_text()
    table = text.split("\n| piece | what | code |\n", 1)[1].split("\n\n", 1)[0]
    named = {
        span.removeprefix("memctl ").split()[0]
        for row in re.findall(r"^\| (`memctl [^|]*)\|", table, re.M)
        for span in re.findall(r"`([^`]+)`", row)
    }
    assert sorted(set(commands.choices) - named) == []


async def test_a_backup_restored_to_the_same_paths_brings_memories_and_history_back(
    short_tmp: Path, tmp_path: Path, isolated_env: IsolatedEnv
) -> None:
    # operations.md, "Back up and restore": copy the rows of "What lives where" marked yes,
    # restore them to the same paths; a memory deleted before the backup comes back from its
    # history, and an include approval holds. The embedding caches are left out, as the table
    # says they may be.
    import shutil

    page = (REPO / "docs" / "operations.md").read_text()
    assert re.search(r"^\| `[^|]*/models/`, `[^|]*/vectors/` \|[^|]*\| no ", page, re.M)
    project = tmp_path / "proj"
    project.mkdir()
    cwd = str(project)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        for name in ("Kept", "Gone"):
            await handle.call(
                "memory.write",
                cwd=cwd,
                type="project",
                name=name,
                description=f"{name.lower()} memory",
                body=f"{name} body.",
            )
        listed = await handle.call("memory.list", cwd=cwd)
        (gone,) = (m["path"] for m in listed["memories"] if m["name"] == "Gone")
        await handle.call("memory.delete", cwd=cwd, path=gone)
        await handle.call("includes.approve", cwd=cwd)
    finally:
        await stop_daemon(handle)
    backup = tmp_path / "backup"
    shutil.copytree(isolated_env.config_dir, backup / "claude")
    shutil.copytree(
        isolated_env.state_dir, backup / "state", ignore=shutil.ignore_patterns("models", "vectors")
    )
    # A new machine: nothing of memoryd's or Claude Code's, then the backup put back.
    shutil.rmtree(isolated_env.config_dir)
    shutil.rmtree(isolated_env.state_dir)
    shutil.copytree(backup / "claude", isolated_env.config_dir)
    shutil.copytree(backup / "state", isolated_env.state_dir)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        listed = await handle.call("memory.list", cwd=cwd)
        assert [m["name"] for m in listed["memories"]] == ["Kept"]
        history = await handle.call("memory.history", cwd=cwd, path=gone)
        assert history["versions"], history
        await handle.call(
            "memory.restore", cwd=cwd, path=gone, version=history["versions"][0]["version"]
        )
        assert "Gone body." in (await handle.call("memory.read", cwd=cwd, path=gone))["content"]
        assert (await handle.call("includes.list", cwd=cwd))["approved"] is True
    finally:
        await stop_daemon(handle)


def test_the_module_map_names_every_module_and_only_modules() -> None:
    # architecture.md's boxes named about half the modules (108 of 207 were on no page), and
    # nothing checked that a module it named was still there.
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    mapped = {
        folder: set(re.findall(r"`([^`]+)`", rest))
        for folder, rest in re.findall(r"^- `([\w/]+)/`: (.*)$", section, re.M)
    }
    roots = ("memoryd", "memoryd_team", "clients/memctl", "clients/memoryd_client")
    folders = {
        f.parent.relative_to(REPO).as_posix()
        for root in roots
        for f in (REPO / root).rglob("*.py")
        if "__pycache__" not in f.parts
    }
    assert sorted(folders ^ mapped.keys()) == []
    wrong = {}
    for folder in sorted(folders):
        here = REPO / folder
        present = {f.stem for f in here.glob("*.py") if f.name != "__init__.py"}
        # A subpackage has a line of its own; named in its parent's too (`recall/`), it exists.
        present |= {f"{d.name}/" for d in here.iterdir() if (d / "__init__.py").is_file()}
        missing = {name for name in present - mapped[folder] if not name.endswith("/")}
        if missing or mapped[folder] - present:
            wrong[folder] = {
                "not mapped": sorted(missing),
                "no such module": sorted(mapped[folder] - present),
            }
    assert wrong == {}


def test_readme_layout_names_every_top_level_folder() -> None:
    # The layout table had no `examples/` or `scripts/`, the folders the quick start runs.
    import subprocess

    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: which folders are the project's is git's list")
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path}
    readme = (REPO / "README.md").read_text()
    table = readme.split("\n## Layout\n", 1)[1].strip().split("\n\n", 1)[0]
    listed = {m.split("/", 1)[0] for m in re.findall(r"`([\w.-]+/)[^`]*`", table)}
    assert sorted(f for f in folders if not f.startswith(".") and f not in listed) == []
