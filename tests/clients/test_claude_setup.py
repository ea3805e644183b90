"""`memctl claude-code install | uninstall`: merged into real settings files in a temp HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memctl.claude_code import PATH_TOOL_MATCHER
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon
from tests.fakes.full_disk import SmallDisks

BIN = Path(sys.executable).parent
EVENTS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt-submit",
    "PreCompact": "pre-compact",
    "Stop": "stop",
    "PostToolUse": "post-tool-use",
}
FOREIGN_HOOK = {"type": "command", "command": "notify-send done"}
FOREIGN_GROUP = {"matcher": "resume", "hooks": [{"type": "command", "command": "echo hi"}]}


@pytest.fixture
def home() -> Path:
    return Path(os.environ["HOME"])


def claude(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_memctl("claude-code", *args, env=memctl_env(HOME=str(home)))


def seed(home: Path) -> tuple[Path, Path]:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps(
            {
                "model": "opus",
                "permissions": {"allow": ["Bash(ls:*)"]},
                "hooks": {
                    "Stop": [
                        {"hooks": [FOREIGN_HOOK]},
                        # An older hand-made setup from examples/: replaced, not doubled.
                        {"hooks": [{"type": "command", "command": "memctl hook stop"}]},
                    ]
                },
            }
        )
    )
    mcp = home / ".claude.json"
    mcp.write_text(json.dumps({"numStartups": 7, "mcpServers": {"other": {"command": "x"}}}))
    mcp.chmod(0o600)
    return settings, mcp


def ours(settings: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for hook in group["hooks"]:
                if "memctl" in hook["command"]:
                    found.setdefault(event, []).append(hook["command"])
    return found


def test_install_merges_hooks_and_server_keeping_everything_else(home: Path) -> None:
    settings_path, mcp_path = seed(home)
    done = claude(home, "install")
    assert done.returncode == 0, done.stderr
    settings = json.loads(settings_path.read_text())
    assert settings["model"] == "opus"
    assert settings["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert ours(settings) == {
        event: [f"{BIN / 'memctl'} hook {name}"] for event, name in EVENTS.items()
    }
    assert settings["hooks"]["Stop"][0] == {"hooks": [FOREIGN_HOOK]}
    (post,) = settings["hooks"]["PostToolUse"]
    assert post["matcher"] == PATH_TOOL_MATCHER
    config = json.loads(mcp_path.read_text())
    assert config["numStartups"] == 7
    assert config["mcpServers"]["other"] == {"command": "x"}
    assert config["mcpServers"]["memoryd"] == {
        "type": "stdio",
        "command": str(BIN / "memoryd-mcp"),
        "args": [],
    }
    assert mcp_path.stat().st_mode & 0o777 == 0o600  # the file's mode is kept
    backups = sorted(str(p) for p in home.rglob("*.memctl-backup-*"))
    assert [Path(b).name.split(".memctl-backup-")[0] for b in backups] == [
        ".claude.json",
        "settings.json",
    ]
    (old_settings,) = (home / ".claude").glob("settings.json.memctl-backup-*")
    assert "memctl hook stop" in old_settings.read_text()

    # Twice: nothing changes, not even a backup more.
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (settings_path, mcp_path)}
    again = claude(home, "install")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("unchanged: ") == 2
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    assert len(list(home.rglob("*.memctl-backup-*"))) == 2


def test_the_installed_hook_command_runs(home: Path, fake_daemon: FakeDaemon) -> None:
    assert claude(home, "install").returncode == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    fake_daemon.on("get_context", {"claude_md": "", "files": [], "memory_instructions": "Use it."})
    env = {**memctl_env(HOME=str(home)), "MEMORYD_SOCKET": str(fake_daemon.socket_path)}
    env["PATH"] = "/usr/bin:/bin"  # the absolute path must work without memctl on PATH
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps({"session_id": "s1", "cwd": str(home), "source": "startup"}),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Use it." in done.stdout
    assert fake_daemon.calls("get_context")


def test_uninstall_takes_out_only_ours(home: Path) -> None:
    settings_path, mcp_path = seed(home)
    assert claude(home, "install").returncode == 0
    done = claude(home, "uninstall")
    assert done.returncode == 0, done.stderr
    settings = json.loads(settings_path.read_text())
    assert ours(settings) == {}
    assert settings["hooks"] == {"Stop": [{"hooks": [FOREIGN_HOOK]}]}
    assert settings["model"] == "opus"
    assert json.loads(mcp_path.read_text()) == {
        "numStartups": 7,
        "mcpServers": {"other": {"command": "x"}},
    }
    assert claude(home, "uninstall").stdout.count("unchanged: ") == 2


def test_project_scope(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text('{"env": {"A": "1"}}')
    done = claude(home, "install", "--project", str(project))
    assert done.returncode == 0, done.stderr
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert local["env"] == {"A": "1"}
    assert set(ours(local)) == set(EVENTS)
    assert local["enabledMcpjsonServers"] == ["memoryd"]
    mcp = json.loads((project / ".mcp.json").read_text())
    # .mcp.json is checked in and shared: the command by name, not this user's path.
    assert mcp["mcpServers"]["memoryd"] == {"type": "stdio", "command": "memoryd-mcp", "args": []}
    assert not (home / ".claude" / "settings.json").exists()
    assert not (home / ".claude.json").exists()
    assert claude(home, "uninstall", "--project", str(project)).returncode == 0
    assert json.loads((project / ".claude" / "settings.local.json").read_text()) == {
        "env": {"A": "1"}
    }
    assert not (project / ".mcp.json").exists()  # install created it: nothing else was in it


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", '{"hooks": '])
def test_a_settings_file_that_is_not_a_json_object_is_refused(home: Path, bad: str) -> None:
    settings_path, mcp_path = seed(home)
    settings_path.write_text(bad)
    config_before = mcp_path.read_bytes()
    done = claude(home, "install")
    assert done.returncode == 2
    assert f"nothing changed: {settings_path}" in done.stderr
    assert "fix it, then run this again" in done.stderr
    assert settings_path.read_text() == bad
    assert mcp_path.read_bytes() == config_before  # the other file is not written either
    assert not list(home.rglob("*.memctl-backup-*"))


def test_a_symlinked_settings_file_is_refused(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}')
    (home / ".claude").mkdir()
    link = home / ".claude" / "settings.json"
    link.symlink_to(real)
    done = claude(home, "install")
    assert done.returncode == 2
    assert "is a symlink" in done.stderr
    assert "to merge by hand" in done.stderr
    assert f"{BIN / 'memctl'} hook stop" in done.stderr
    assert link.is_symlink()
    assert real.read_text() == '{"model": "opus"}'
    assert not (home / ".claude.json").exists()
    # --json carries the entries too (before: only the error, pointing to entries not there).
    refused = claude(home, "--json", "install")
    assert refused.returncode == 2
    answer = json.loads(refused.stdout)
    assert "is a symlink" in answer["error"]
    hooks = answer["by_hand"]["settings"]["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["command"] == f"{BIN / 'memctl'} hook stop"


def test_claude_config_dir_moves_both_files(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "cc"
    env = memctl_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(config))
    done = run_memctl("claude-code", "install", env=env)
    assert done.returncode == 0, done.stderr
    assert set(ours(json.loads((config / "settings.json").read_text()))) == set(EVENTS)
    assert "memoryd" in json.loads((config / ".claude.json").read_text())["mcpServers"]
    assert not (home / ".claude").exists()


def test_project_install_names_the_command_and_keeps_backups_out_of_the_work_tree(
    home: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: the team's checked-in .mcp.json got this user's absolute
    # memoryd-mcp path (broken for everyone else), and .mcp.json.memctl-backup-* was left
    # untracked in the work tree for `git add .` to commit.
    project = tmp_path / "proj"
    project.mkdir()
    shared = {"mcpServers": {"docs": {"command": "npx", "args": ["docs-mcp"]}}}
    (project / ".mcp.json").write_text(json.dumps(shared))
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text("{}")
    done = claude(home, "install", "--project", str(project))
    assert done.returncode == 0, done.stderr
    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["docs"] == shared["mcpServers"]["docs"]
    assert mcp["mcpServers"]["memoryd"]["command"] == "memoryd-mcp"
    assert not [p for p in project.rglob("*") if ".memctl-backup-" in p.name]
    state = Path(os.environ["XDG_STATE_HOME"]) if os.environ.get("XDG_STATE_HOME") else None
    backups = sorted(
        p.name.split(".memctl-backup-")[0]
        for p in (state or home / ".local" / "state").rglob("*.memctl-backup-*")
    )
    assert backups == [".mcp.json", "settings.local.json"]
    # The hooks in the personal settings.local.json still name this installation.
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert ours(local)["Stop"] == [f"{BIN / 'memctl'} hook stop"]


def test_a_lone_surrogate_is_kept_as_its_escape_and_nothing_is_half_written(home: Path) -> None:
    # Found by a bug hunt: "\\ud83d" (half an emoji, as JavaScript writes it) in ~/.claude.json
    # was a UnicodeEncodeError after settings.json had been rewritten: hooks in, server not.
    mcp = home / ".claude.json"
    mcp.write_text('{"projects": {"/src": {"history": [{"display": "fix \\ud83d"}]}}}\n')
    done = claude(home, "install")
    assert done.returncode == 0, done.stderr
    text = mcp.read_text()
    assert "fix \\ud83d" in text
    assert json.loads(text)["projects"]["/src"]["history"][0]["display"] == "fix \ud83d"
    assert "memoryd" in json.loads(text)["mcpServers"]
    assert set(ours(json.loads((home / ".claude" / "settings.json").read_text()))) == set(EVENTS)


def test_numbers_are_written_as_they_were_read(home: Path) -> None:
    # Found by a bug hunt: 1e400 was read as a float (inf) and written as `Infinity`, which
    # is not JSON: Claude Code could no longer read its settings.
    (home / ".claude").mkdir()
    settings = home / ".claude" / "settings.json"
    settings.write_text(
        '{"rate": 1e400, "ratio": 1.50, "tiny": -2.5E-400, "n": 12345678901234567890}'
    )
    done = claude(home, "install")
    assert done.returncode == 0, done.stderr
    text = settings.read_text()
    assert '"rate": 1e400,' in text
    assert '"ratio": 1.50,' in text
    assert '"tiny": -2.5E-400,' in text
    assert '"n": 12345678901234567890,' in text
    json.loads(text, parse_constant=lambda token: pytest.fail(f"not JSON: {token}"))


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_and_are_refused(home: Path, token: str) -> None:
    (home / ".claude").mkdir()
    settings = home / ".claude" / "settings.json"
    settings.write_text(f'{{"rate": {token}}}')
    done = claude(home, "install")
    assert done.returncode == 2
    assert f"{token} is not JSON" in done.stderr
    assert settings.read_text() == f'{{"rate": {token}}}'


def test_a_settings_file_memctl_cannot_read_is_refused_not_a_traceback(home: Path) -> None:
    # Found by a bug hunt: a Latin-1 file was a UnicodeDecodeError traceback, a directory an
    # IsADirectoryError, both exit 1 without the entries to merge by hand.
    (home / ".claude").mkdir()
    settings = home / ".claude" / "settings.json"
    settings.write_bytes(b'{"statusLine": {"command": "echo caf\xe9"}}')
    done = claude(home, "install")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{settings} is not UTF-8" in done.stderr
    assert "to merge by hand" in done.stderr
    settings.unlink()
    settings.mkdir()
    done = claude(home, "install", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert f"cannot read {settings}" in done.stderr
    assert not (home / ".claude.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "large"])
def test_a_settings_file_that_is_a_fifo_or_huge_is_refused_unread(home: Path, kind: str) -> None:
    # Found by the session 24 hunt: a FIFO as settings.json blocked install for good (read
    # whole, as a file of any size was).
    (home / ".claude").mkdir()
    settings = home / ".claude" / "settings.json"
    if kind == "fifo":
        os.mkfifo(settings)
    else:
        with settings.open("wb") as handle:  # sparse: 64 MiB and one byte, none written
            handle.truncate(64 * 1024 * 1024 + 1)
    done = claude(home, "install")
    assert done.returncode == 2, done.stderr
    why = "not a regular file (a FIFO" if kind == "fifo" else "larger than 64 MiB, not read"
    assert f"nothing changed: cannot read {settings}: {why}" in done.stderr
    assert "to merge by hand" in done.stderr
    assert not (home / ".claude.json").exists()


def test_reinstall_keeps_the_users_hook_and_server_tuning(home: Path) -> None:
    # Found by a bug hunt: the docs say to give recall more time with --timeout-ms and the
    # hook's timeout; installing again (after an upgrade) reset both, and replaced the env of
    # the memoryd server entry.
    settings_path = home / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    settings_path.write_text(
        json.dumps(
            {
                "hooks": {
                    "UserPromptSubmit": [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": "MEMORYD_X=1 /old/venv/bin/memctl hook "
                                    "user-prompt-submit --timeout-ms 3000",
                                    "timeout": 10,
                                }
                            ]
                        }
                    ],
                    "Stop": [
                        {"hooks": [{"type": "command", "command": "memctl hook stop 2>/dev/null"}]}
                    ],
                }
            }
        )
    )
    mcp_path = home / ".claude.json"
    mcp_path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memoryd": {
                        "type": "stdio",
                        "command": "/old/venv/bin/python",
                        "args": ["-m", "memoryd_client.mcp_server", "--cwd", "/src"],
                        "env": {"MEMORYD_SOCKET": "/run/m.sock"},
                    }
                }
            }
        )
    )
    done = claude(home, "install")
    assert done.returncode == 0, done.stderr
    hooks = json.loads(settings_path.read_text())["hooks"]
    assert hooks["UserPromptSubmit"] == [
        {
            "hooks": [
                {
                    "type": "command",
                    "command": f"MEMORYD_X=1 {BIN / 'memctl'} hook user-prompt-submit "
                    "--timeout-ms 3000",
                    "timeout": 10,
                }
            ]
        }
    ]
    (stop,) = hooks["Stop"][0]["hooks"]
    assert stop["command"] == f"{BIN / 'memctl'} hook stop 2>/dev/null"
    server = json.loads(mcp_path.read_text())["mcpServers"]["memoryd"]
    assert server == {
        "type": "stdio",
        "command": str(BIN / "memoryd-mcp"),
        "args": ["--cwd", "/src"],
        "env": {"MEMORYD_SOCKET": "/run/m.sock"},
    }
    again = claude(home, "install")
    assert again.stdout.count("unchanged: ") == 2


def test_the_backup_is_never_readable_by_others(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: shutil.copy2 created the backup of ~/.claude.json (OAuth account,
    # API key approvals) with the umask's 0644 and fixed the mode only once it was written.
    from memctl import files

    secret = home / ".claude.json"
    secret.write_text('{"primaryApiKey": "sk-ant-x"}')
    secret.chmod(0o600)
    created: list[int] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, mode, *args, **kwargs)
        if ".memctl-backup-" in str(path):
            assert flags & os.O_EXCL
            created.append(os.fstat(fd).st_mode & 0o777)
        return fd

    monkeypatch.setattr(os, "open", spy)
    old = os.umask(0o022)
    try:
        copy = files.backup(secret)
    finally:
        os.umask(old)
    assert created == [0o600]  # private from the moment it exists
    assert copy.stat().st_mode & 0o777 == 0o600
    assert copy.read_text() == secret.read_text()


def test_a_write_to_claude_json_during_install_is_kept(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Found by a bug hunt: ~/.claude.json was read, then replaced with a merge of what was
    # read: a project Claude Code trusted meanwhile was lost.
    from memctl import files
    from memctl.__main__ import main

    config = home / ".claude.json"
    config.write_text(json.dumps({"projects": {}}))
    real_backup = files.backup
    raced: list[Path] = []

    def racing_backup(path: Path) -> Path:
        if path == config and not raced:  # Claude Code saves, once, in the worst moment
            raced.append(path)
            data = json.loads(config.read_text())
            data["projects"]["/src/new"] = {"hasTrustDialogAccepted": True}
            config.write_text(json.dumps(data))
        return real_backup(path)

    monkeypatch.setattr(files, "backup", racing_backup)
    assert main(["claude-code", "install"]) == 0
    assert raced
    final = json.loads(config.read_text())
    assert final["projects"] == {"/src/new": {"hasTrustDialogAccepted": True}}
    assert "memoryd" in final["mcpServers"]
    out = capsys.readouterr().out
    assert f"created: {home / '.claude' / 'settings.json'} (hooks)" in out
    assert f"updated: {config} (MCP server)" in out
    assert len(list(home.glob(".claude.json.memctl-backup-*"))) == 1


def test_a_hook_with_memctls_global_flags_before_hook_is_ours(home: Path) -> None:
    # Found by a bug hunt: `memctl --socket S hook stop` (global flags before the command, as
    # docs/clients.md allows) was not taken for memoryd's hook: install added a second one
    # (every turn sent twice) and uninstall left it.
    settings_path = home / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    written = {
        "Stop": "memctl --socket /run/m.sock hook stop",
        "UserPromptSubmit": "memctl --json hook user-prompt-submit --timeout-ms 3000",
        "PreCompact": "/old/bin/memctl --socket=/run/m.sock hook pre-compact",
        "SessionStart": "/old/bin/python -m memctl --sock /run/m.sock hook --json session-start",
    }
    settings_path.write_text(
        json.dumps(
            {
                "hooks": {
                    event: [{"hooks": [{"type": "command", "command": command, "timeout": 5}]}]
                    for event, command in written.items()
                }
            }
        )
    )
    done = claude(home, "install")
    assert done.returncode == 0, done.stderr
    memctl = BIN / "memctl"
    assert ours(json.loads(settings_path.read_text())) == {
        "Stop": [f"{memctl} --socket /run/m.sock hook stop"],
        "UserPromptSubmit": [f"{memctl} --json hook user-prompt-submit --timeout-ms 3000"],
        "PreCompact": [f"{memctl} --socket=/run/m.sock hook pre-compact"],
        "SessionStart": [f"{memctl} --sock /run/m.sock hook --json session-start"],
        "PostToolUse": [f"{memctl} hook post-tool-use"],
    }
    assert claude(home, "install").stdout.count("unchanged: ") == 2
    assert claude(home, "uninstall").returncode == 0
    assert ours(json.loads(settings_path.read_text())) == {}


def test_reinstall_keeps_the_matcher_of_memoryds_group(home: Path) -> None:
    # Found by a bug hunt: installing again moved memoryd's hook to a new group without the
    # user's matcher: SessionStart "startup|compact" ran on every source again, a narrowed
    # PostToolUse was widened back.
    assert claude(home, "install").returncode == 0
    settings_path = home / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text())
    hooks = settings["hooks"]
    hooks["SessionStart"] = [FOREIGN_GROUP, {**hooks["SessionStart"][0], "matcher": "startup"}]
    hooks["PostToolUse"][0]["matcher"] = "Edit|Write"
    hooks["PostToolUse"][0]["hooks"].append(FOREIGN_HOOK)
    # A doubled Stop hook (pasted by hand as well): the first stays where it is, the other goes.
    stop = hooks["Stop"][0]["hooks"][0]
    hooks["Stop"] = [
        {"matcher": "", "hooks": [FOREIGN_HOOK, {**stop, "command": "memctl hook stop"}, stop]},
        {"hooks": [stop]},
    ]
    settings_path.write_text(json.dumps(settings))
    done = claude(home, "install")
    assert done.returncode == 0, done.stderr
    hooks = json.loads(settings_path.read_text())["hooks"]
    command = f"{BIN / 'memctl'} hook"
    assert hooks["SessionStart"] == [
        FOREIGN_GROUP,
        {
            "hooks": [{"type": "command", "command": f"{command} session-start", "timeout": 5}],
            "matcher": "startup",
        },
    ]
    assert hooks["PostToolUse"] == [
        {
            "matcher": "Edit|Write",
            "hooks": [
                {"type": "command", "command": f"{command} post-tool-use", "timeout": 5},
                FOREIGN_HOOK,
            ],
        }
    ]
    assert hooks["Stop"] == [{"matcher": "", "hooks": [FOREIGN_HOOK, stop]}]
    assert claude(home, "install").stdout.count("unchanged: ") == 2


def test_uninstall_removes_the_files_install_created_and_only_those(
    home: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: install --project then uninstall --project left an untracked
    # .mcp.json and .claude/settings.local.json holding `{}` in the work tree (for
    # `git add -A` to commit), and ~/.claude/settings.json, ~/.claude.json as `{}`.
    project = tmp_path / "proj"
    project.mkdir()
    assert claude(home, "install", "--project", str(project)).returncode == 0
    assert (project / ".mcp.json").exists()
    dry = claude(home, "uninstall", "--project", str(project), "--dry-run")
    assert f"would remove: {project / '.mcp.json'} (MCP server removed)" in dry.stdout
    assert (project / ".mcp.json").exists()
    done = claude(home, "uninstall", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert f"removed: {project / '.mcp.json'} (MCP server removed)" in done.stdout
    assert list(project.iterdir()) == []  # .claude/ too: install made it, nothing else is in it

    # The user's own files stay, even one that held `{}`, and so does a created file that
    # has more in it by now (Claude Code wrote a key of its own).
    (project / ".mcp.json").write_text("{}")
    assert claude(home, "install", "--project", str(project)).returncode == 0
    local = project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({**json.loads(local.read_text()), "outputStyle": "terse"}))
    assert claude(home, "uninstall", "--project", str(project)).returncode == 0
    assert json.loads((project / ".mcp.json").read_text()) == {}
    assert json.loads(local.read_text()) == {"outputStyle": "terse"}

    # User scope: both files were created by install, and go; ~/.claude keeps the backup.
    assert claude(home, "install").returncode == 0
    done = claude(home, "uninstall")
    assert done.returncode == 0, done.stderr
    assert not (home / ".claude.json").exists()
    assert not (home / ".claude" / "settings.json").exists()
    assert [p.name.split(".memctl-backup-")[0] for p in (home / ".claude").iterdir()] == [
        "settings.json"
    ]
    assert claude(home, "uninstall").stdout.count("unchanged: ") == 2


def test_a_created_file_written_again_before_removal_is_kept(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The removal compares what it takes away with what was read: a write that lands meanwhile
    # (Claude Code saving ~/.claude.json) is merged again, as for any change, never removed.
    from memctl import files
    from memctl.__main__ import main

    assert main(["claude-code", "install"]) == 0
    config = home / ".claude.json"
    real_remove = files.remove_if_unchanged
    raced: list[Path] = []

    def racing_remove(path: Path, expected: bytes) -> bool:
        if path == config and not raced:
            raced.append(path)
            config.write_text(json.dumps({**json.loads(config.read_text()), "numStartups": 1}))
        return real_remove(path, expected)

    monkeypatch.setattr(files, "remove_if_unchanged", racing_remove)
    assert main(["claude-code", "uninstall"]) == 0
    assert raced
    assert json.loads(config.read_text()) == {"numStartups": 1}
    assert not [p for p in home.iterdir() if ".memctl-removing-" in p.name]


def test_install_says_created_for_a_file_it_creates(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "updated:" ("would update" on a dry run) for files that did not exist.
    from memctl.__main__ import main
    from memctl.commands.claude_setup import has_mcp_sdk

    settings = home / ".claude" / "settings.json"
    assert main(["claude-code", "install", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would create: {settings} (hooks)" in out
    assert f"would create: {home / '.claude.json'} (MCP server)" in out or not has_mcp_sdk()
    assert main(["--json", "claude-code", "install"]) == 0
    files = {f["path"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert files[str(settings)]["created"] is True
    settings.write_text(json.dumps({"hooks": {}, "theme": "dark"}))
    assert main(["claude-code", "install"]) == 0
    assert f"updated: {settings} (hooks)" in capsys.readouterr().out


def test_a_file_that_cannot_be_written_is_said_with_what_was(
    small_disks: SmallDisks, tmp_path: Path
) -> None:
    # ~/.claude.json's folder (HOME) is full; the settings folder has room.
    home = small_disks.mount(tmp_path / "full-home", kib=64)
    config = small_disks.mount(home / ".claude", kib=256)
    settings = config / "settings.json"
    settings.write_text('{"model": "opus"}')
    free = small_disks.fill(home)
    done = claude(home, "install")
    # Before: a traceback (OSError: No space left on device), nothing said of settings.json.
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr == (
        f"memctl: cannot write {home}/.claude.json: No space left on device; {settings} was "
        "written; make room or fix the folder, then run this again\n"
    )
    assert json.loads(settings.read_text())["hooks"]
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith(".fill")) == [".claude"]
    free()
    again = claude(home, "install")
    assert again.returncode == 0, again.stderr
    assert f"unchanged: {settings}" in again.stdout
    assert "memoryd" in json.loads((home / ".claude.json").read_text())["mcpServers"]


def test_a_full_disk_before_any_write_changes_nothing(small_disks: SmallDisks, home: Path) -> None:
    config = small_disks.mount(home / ".claude", kib=64)
    settings = config / "settings.json"
    settings.write_text('{"model": "opus"}')
    small_disks.fill(config)
    done = claude(home, "--json", "install")
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error.startswith(f"nothing changed: cannot write {settings}: No space left on device")
    assert settings.read_text() == '{"model": "opus"}'
    # Neither a backup nor a temporary file is left beside it.
    assert sorted(p.name for p in config.iterdir() if not p.name.startswith(".fill")) == [
        "settings.json"
    ]
    assert not (home / ".claude.json").exists()


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # A launcher before memoryd-mcp, and memoryd-mcp's own arguments, stay.
        (
            ["uvx", "--from", "memoryd[mcp]", "memoryd-mcp", "--cwd", "."],
            ["uvx", "--from", "memoryd[mcp]", "{mcp}", "--cwd", "."],
        ),
        (
            ["env", "MEMORYD_SOCKET=/run/m.sock", "/old/bin/memoryd-mcp"],
            ["env", "MEMORYD_SOCKET=/run/m.sock", "{mcp}"],
        ),
        (
            ["/old/bin/python", "-m", "memoryd_client.mcp_server", "--cwd", "/s"],
            ["{mcp}", "--cwd", "/s"],
        ),
        # An entry that runs something else is replaced: its arguments were not memoryd-mcp's.
        (["node", "memory-server.js", "--port", "3"], ["{mcp}"]),
    ],
)
def test_the_server_entry_keeps_a_launcher_and_its_arguments(
    home: Path, before: list[str], after: list[str]
) -> None:
    mcp_path = home / ".claude.json"
    entry = {"command": before[0], "args": before[1:], "env": {"A": "1"}}
    mcp_path.write_text(json.dumps({"mcpServers": {"memoryd": entry}}))
    assert claude(home, "install").returncode == 0
    server = json.loads(mcp_path.read_text())["mcpServers"]["memoryd"]
    # Before: the whole old args list followed memctl's command (`memoryd-mcp --from
    # memoryd[mcp] memoryd-mcp --cwd .`, `memoryd-mcp memory-server.js --port 3`): no server.
    words = [w.replace("{mcp}", str(BIN / "memoryd-mcp")) for w in after]
    assert [server["command"], *server["args"]] == words
    assert server["env"] == {"A": "1"}
