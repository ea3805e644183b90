"""Where memory lives: override order, validation, safety, the on/off switch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memoryd import settings
from memoryd.automem import location
from memoryd.errors import ForbiddenPath
from tests.conftest import IsolatedEnv

HOME = Path("/home/u")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("relative/dir", "is not an absolute path"),
        ("/a", "is shorter than 3 characters"),
        ("ab", "is shorter than 3 characters"),
        ("/", "is shorter than 3 characters"),
        ("///", "is a UNC path"),
        ("\\\\server\\share", "is a UNC path"),
        ("//server/share", "is a UNC path"),
        ("C:\\", "is a drive root"),
        ("/tmp/x\x00y", "contains a NUL byte"),
        ("/../..", "is a filesystem root"),
    ],
)
def test_rejected_paths(raw: str, problem: str) -> None:
    assert location.validate_configured(raw, HOME) == (None, problem)


def test_tilde_expansion_and_nfc() -> None:
    decomposed = "~/mem/cafe\u0301"
    path, problem = location.validate_configured(decomposed, HOME)
    assert problem is None
    assert str(path) == "/home/u/mem/caf\u00e9"


@pytest.mark.parametrize("raw", ["~", "~/", "~/.", "~/..", "~/x/..", "~//", "~/./x/../.."])
def test_a_tilde_naming_home_or_above_is_rejected(raw: str) -> None:
    # Found by a bug hunt: `~` made all of the home folder the memory dir (writable by the
    # extraction agent: `~/.claude/CLAUDE.md` was a "memory file"); Claude Code refuses it.
    assert location.validate_configured(raw, HOME) == (
        None,
        "names the home folder or a folder above it",
    )
    assert location.validate_configured("~/../shared/mem", HOME) == (Path("/home/shared/mem"), None)


@pytest.mark.parametrize("raw", ["/home/u", "/home/u/", "~/../u", "/home", "~/../../home"])
def test_the_home_folder_or_above_named_otherwise_is_rejected(raw: str) -> None:
    # Only `~` forms were refused: the same folders named another way made all of the home
    # folder the memory dir, writable by the extraction agent.
    assert location.validate_configured(raw, HOME) == (
        None,
        "names the home folder or a folder above it",
    )
    assert location.validate_configured("/home/u2", HOME) == (Path("/home/u2"), None)


def test_accepted_path_is_normalised() -> None:
    assert location.validate_configured("/srv/a/../mem/", HOME) == (Path("/srv/mem"), None)


def _settings(tmp_path: Path, **files: dict[str, object]) -> settings.EffectiveSettings:
    loaded = []
    for name, values in files.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(values))
        loaded.append(settings.read_settings_file(settings.Source(name), path))
    return settings.merge(loaded)


def test_override_order_env_first(tmp_path: Path) -> None:
    eff = _settings(tmp_path, user={"autoMemoryDirectory": "/srv/user"})
    choice = location.choose_memory_dir(
        env={location.ENV_DIR: "/srv/env"}, settings=eff, default=Path("/d"), home=HOME
    )
    assert (choice.path, choice.source, choice.explicit) == (Path("/srv/env"), "env", True)


def test_override_order_policy_over_local_over_user(tmp_path: Path) -> None:
    eff = _settings(
        tmp_path,
        user={"autoMemoryDirectory": "/srv/user"},
        local={"autoMemoryDirectory": "/srv/local"},
        policy={"autoMemoryDirectory": "/srv/policy"},
    )
    choice = location.choose_memory_dir(env={}, settings=eff, default=Path("/d"), home=HOME)
    assert (choice.path, choice.source) == (Path("/srv/policy"), "policy")
    eff = _settings(
        tmp_path,
        user={"autoMemoryDirectory": "/srv/user"},
        local={"autoMemoryDirectory": "/srv/local"},
    )
    choice = location.choose_memory_dir(env={}, settings=eff, default=Path("/d"), home=HOME)
    assert choice.source == "local"


def test_project_settings_never_set_the_dir(tmp_path: Path) -> None:
    eff = _settings(tmp_path, project={"autoMemoryDirectory": str(HOME / ".ssh")})
    choice = location.choose_memory_dir(env={}, settings=eff, default=Path("/d"), home=HOME)
    assert (choice.path, choice.source, choice.explicit) == (Path("/d"), "default", False)


def test_invalid_setting_falls_back_with_warning(tmp_path: Path) -> None:
    eff = _settings(tmp_path, user={"autoMemoryDirectory": "rel"})
    choice = location.choose_memory_dir(
        env={location.ENV_DIR: "/"}, settings=eff, default=Path("/d"), home=HOME
    )
    assert choice.path == Path("/d")
    assert len(choice.warnings) == 2
    assert "from env is shorter than 3 characters" in choice.warnings[0]
    assert "from user is not an absolute path" in choice.warnings[1]


def test_a_rejected_value_that_is_no_path_is_not_quoted(tmp_path: Path) -> None:
    # A key pasted into MEMORYD_AUTO_MEMORY_DIR was quoted whole in the warning, and so in
    # status and the editors; a 100 KB value made every status reply 200 KB.
    key = "sk-ant-api03-" + "x" * 90
    eff = _settings(tmp_path, user={"autoMemoryDirectory": "rel" * 30_000})
    choice = location.choose_memory_dir(
        env={location.ENV_DIR: key}, settings=eff, default=Path("/d"), home=HOME
    )
    assert key not in choice.warnings[0]
    assert "(103 characters, not a path) from env" in choice.warnings[0]
    assert "(90,000 characters, not a path) from user" in choice.warnings[1]


def test_enabled_switches(tmp_path: Path) -> None:
    on = _settings(tmp_path, user={})
    off = _settings(tmp_path, user={"autoMemoryEnabled": False})
    assert location.enabled({}, on)
    assert not location.enabled({}, off)
    assert not location.enabled({location.ENV_DISABLE: "1"}, on)
    assert location.enabled({location.ENV_DISABLE: "0"}, on)


def test_symlink_to_ssh_refused_even_when_explicit(isolated_env: IsolatedEnv) -> None:
    ssh = isolated_env.home / ".ssh"
    ssh.mkdir()
    link = isolated_env.root / "innocent"
    link.symlink_to(ssh)
    choice = location.MemoryDirChoice(link, "env", True)
    with pytest.raises(ForbiddenPath, match=r"\.ssh"):
        location.check_safe(choice, home=isolated_env.home, config_dir=isolated_env.config_dir)


def test_default_dir_symlinked_out_of_config_refused(isolated_env: IsolatedEnv) -> None:
    target = isolated_env.root / "elsewhere"
    target.mkdir()
    default = isolated_env.config_dir / "projects" / "k" / "memory"
    default.parent.mkdir(parents=True)
    default.symlink_to(target)
    choice = location.MemoryDirChoice(default, "default", False)
    with pytest.raises(ForbiddenPath, match="outside"):
        location.check_safe(choice, home=isolated_env.home, config_dir=isolated_env.config_dir)
    explicit = location.MemoryDirChoice(default, "user", True)
    assert (
        location.check_safe(explicit, home=isolated_env.home, config_dir=isolated_env.config_dir)
        == target.resolve()
    )


def test_etc_refused() -> None:
    choice = location.MemoryDirChoice(Path("/etc/memoryd-mem"), "env", True)
    with pytest.raises(ForbiddenPath):
        location.check_safe(
            choice, home=Path(os.environ["HOME"]), config_dir=Path(os.environ["HOME"]) / ".claude"
        )


@pytest.mark.parametrize("target", ["home", "root", "above_home", "config_parent"])
@pytest.mark.parametrize("explicit", [True, False])
def test_a_link_to_home_a_root_or_a_folder_holding_the_config_dir_is_refused(
    isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch, target: str, explicit: bool
) -> None:
    # The path itself passes `validate_configured` (no ~, not the home folder as written);
    # before, resolved to $HOME (or /) it was taken: all of it the extraction agent's to write.
    config_dir = isolated_env.config_dir
    if target == "config_parent":  # a config dir outside HOME, memory linked to its parent
        config_dir = isolated_env.root / "cfg" / "claude"
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config_dir))
    config_dir.mkdir(parents=True)
    places = {
        "home": isolated_env.home,
        "root": Path("/"),
        "above_home": isolated_env.home.parent,
        "config_parent": config_dir.parent,
    }
    link = (config_dir / "projects" / "k" / "memory") if not explicit else isolated_env.root / "m"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(places[target])
    choice = location.MemoryDirChoice(link, "user" if explicit else "default", explicit)
    with pytest.raises(ForbiddenPath, match="refused"):
        location.check_safe(choice, home=isolated_env.home, config_dir=config_dir)


def test_a_link_to_a_folder_in_home_is_taken(isolated_env: IsolatedEnv) -> None:
    notes = isolated_env.home / "notes" / "memory"
    notes.mkdir(parents=True)
    link = isolated_env.root / "m"
    link.symlink_to(notes)
    choice = location.MemoryDirChoice(link, "user", True)
    got = location.check_safe(choice, home=isolated_env.home, config_dir=isolated_env.config_dir)
    assert got == notes.resolve()
