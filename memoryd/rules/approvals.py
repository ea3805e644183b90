"""The user's approvals of external includes, per project.

Kept in memoryd's own per-user state (`<state_dir>/include-approvals.json`), never in a
file the repository controls: a repository must not be able to approve itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd import jsonread, paths
from memoryd.errors import InvalidParams
from memoryd.fsutil import atomic_write_text, ensure_private_dir

FILE_NAME = "include-approvals.json"
_VERSION = 1


def approvals_path() -> Path:
    return paths.state_dir() / FILE_NAME


@dataclass(frozen=True)
class Approval:
    project_root: str
    approved_at: str


class ApprovalsError(InvalidParams):
    pass


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ApprovalsError(f"cannot read {path}: {exc}") from None
    try:
        # A number of 5,000 digits refused: approve() writes the file back.
        data = jsonread.loads(raw, long_ints="refuse") if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ApprovalsError(f"{path} is not valid JSON ({exc}); fix or delete it") from None
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        raise ApprovalsError(f"{path} has no 'projects' object; fix or delete it")
    return projects


def list_approvals() -> list[Approval]:
    projects = _read(approvals_path())
    return [
        Approval(root, str(entry.get("approved_at", "")) if isinstance(entry, dict) else "")
        for root, entry in sorted(projects.items())
    ]


def is_approved(project_root: Path) -> bool:
    """Fails closed: an unreadable approvals file approves nothing."""
    try:
        return str(project_root) in _read(approvals_path())
    except ApprovalsError:
        return False


def approve(project_root: Path, now: datetime | None = None) -> Approval:
    path = approvals_path()
    projects = _read(path)
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    projects[str(project_root)] = {"approved_at": stamp}
    _write(path, projects)
    return Approval(str(project_root), stamp)


def revoke(project_root: Path) -> bool:
    """True when an approval was removed."""
    path = approvals_path()
    projects = _read(path)
    # By key: an entry of null (edited by hand) approves (`is_approved` asks for the key), and
    # popped as "absent" it was never removed.
    if str(project_root) not in projects:
        return False
    del projects[str(project_root)]
    _write(path, projects)
    return True


def _write(path: Path, projects: dict[str, Any]) -> None:
    ensure_private_dir(path.parent)
    body = json.dumps({"version": _VERSION, "projects": projects}, indent=2, sort_keys=True)
    atomic_write_text(path, body + "\n")
