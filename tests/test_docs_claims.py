"""What README.md and docs/*.md state about paths, names and commands is what the code does."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from memoryd_client import default_socket_path

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


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
