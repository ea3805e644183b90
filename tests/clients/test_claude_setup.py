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

BIN = Path(sys.executable).parent
EVENTS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt-submit",
    "PreCompact": "pre-compact",
    "Stop": "stop",
    "PostToolUse": "post-tool-use",
}
FOREIGN_HOOK = {"type": "command", "command": "notify-send done"}


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
    assert mcp["mcpServers"]["memoryd"]["command"] == str(BIN / "memoryd-mcp")
    assert not (home / ".claude" / "settings.json").exists()
    assert not (home / ".claude.json").exists()
    assert claude(home, "uninstall", "--project", str(project)).returncode == 0
    assert json.loads((project / ".claude" / "settings.local.json").read_text()) == {
        "env": {"A": "1"}
    }
    assert json.loads((project / ".mcp.json").read_text()) == {}


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


def test_claude_config_dir_moves_both_files(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "cc"
    env = memctl_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(config))
    done = run_memctl("claude-code", "install", env=env)
    assert done.returncode == 0, done.stderr
    assert set(ours(json.loads((config / "settings.json").read_text()))) == set(EVENTS)
    assert "memoryd" in json.loads((config / ".claude.json").read_text())["mcpServers"]
    assert not (home / ".claude").exists()
