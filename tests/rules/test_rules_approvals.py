"""The approvals file of external includes (`memoryd/rules/approvals.py`), as read and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.rules import approvals
from tests.conftest import IsolatedEnv


def test_an_approval_of_any_value_is_revoked(isolated_env: IsolatedEnv) -> None:
    # Found by a bug hunt (session 23): an entry of null (a hand edit) approved the project,
    # and `revoke` popped it as absent, said nothing was removed, and left it approving.
    project = Path("/work/proj")
    path = approvals.approvals_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "projects": {str(project): None}}))
    assert approvals.is_approved(project)
    assert approvals.revoke(project) is True
    assert not approvals.is_approved(project)
    assert approvals.revoke(project) is False


def test_an_approvals_file_json_cannot_read_approves_nothing_and_says_so(
    isolated_env: IsolatedEnv,
) -> None:
    # Found by a session 23 review: nesting past json's depth raised RecursionError out of
    # is_approved (on every get_context) instead of failing closed.
    path = approvals.approvals_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ('{"projects": ' + "[" * 5000, '{"projects": {"/p": ' + "9" * 5000 + "}}"):
        path.write_text(text)
        assert approvals.is_approved(Path("/p")) is False
        with pytest.raises(approvals.ApprovalsError, match="fix or delete it"):
            approvals.list_approvals()
