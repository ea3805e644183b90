"""Bad params are -32602 naming the field, never an OS error; -32603 carries no detail
(issue 16). Checked over every registered method that takes a `cwd` or a path."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
from pydantic import TypeAdapter, ValidationError

from memoryd.automem.dirs import resolve_inside
from memoryd.automem.service import AutoMemory
from memoryd.daemon import params as params_mod
from memoryd.daemon.wiring import rpc_methods
from memoryd.errors import InvalidParams
from tests.conftest import DaemonHandle
from tests.daemon.test_protocol import raw_exchange

LONG_CWD = "/" + "a" * 5_000
LONG_PART = "b" * 300 + ".md"  # over NAME_MAX: stat() fails with ENAMETOOLONG


async def _error(daemon: DaemonHandle, method: str, params: dict[str, Any]) -> dict[str, Any]:
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    (reply,) = await raw_exchange(daemon.socket_path, json.dumps(request).encode() + b"\n")
    assert "error" in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


def _methods_with(field: str) -> list[str]:
    return sorted(name for name, spec in rpc_methods().items() if field in spec.params.model_fields)


async def test_a_5000_character_cwd_is_invalid_params_for_every_method(
    daemon: DaemonHandle,
) -> None:
    methods = _methods_with("cwd")
    assert len(methods) > 15
    for method in methods:
        error = await _error(daemon, method, {"cwd": LONG_CWD})
        assert error["code"] == -32602, (method, error)
        assert "cwd" in error["message"], (method, error)
        assert "data" not in error
        assert "Errno" not in error["message"]


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("memory.read", {"path": LONG_PART}, "path"),
        ("memory.delete", {"path": LONG_PART}, "path"),
        ("memory.history", {"path": LONG_PART}, "path"),
        ("memory.read", {"path": "/" + "c/" * 2_100 + "x.md"}, "path"),
        (
            "memory.restore",
            {"path": LONG_PART, "version": "01764691200123456789-overwrite"},
            "path",
        ),
        ("memory.read", {"path": f"sub/{LONG_PART}"}, "path"),
        (
            "memory.write",
            {"type": "user", "name": "n", "description": "d", "body": "b", "file": LONG_PART},
            "file",
        ),
        ("get_context", {"touched_paths": [f"/tmp/{LONG_PART}"]}, "touched_paths"),
        ("after_turn", {"session_id": "s1", "messages": [], "read_paths": [LONG_PART]}, None),
        ("recall", {"query": "q", "already_surfaced": [LONG_PART]}, None),
    ],
)
async def test_an_unusable_path_is_invalid_params_naming_the_field(
    daemon: DaemonHandle, tmp_path: Path, method: str, params: dict[str, Any], field: str | None
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {"cwd": str(tmp_path), **params},
    }
    (reply,) = await raw_exchange(daemon.socket_path, json.dumps(request).encode() + b"\n")
    if field is None:  # a path only compared or recorded, never opened: accepted or refused
        assert "error" not in reply or reply["error"]["code"] == -32602, reply
        return
    error = reply["error"]
    assert error["code"] == -32602, error
    assert field in error["message"]
    assert "data" not in error


WRITE = {"type": "user", "name": "n", "description": "d", "body": "b"}


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        *(("recall", {"query": "q", "explain": v}, "explain") for v in (1, 1.0, "1", "true")),
        *(("recall", {"query": "q", "explain": v}, "explain") for v in ("yes", "on", "off", 0)),
        *(("recall", {"query": "q", "limit": v}, "limit") for v in ("5", 5.0, True)),
        ("memory.write", {**WRITE, "team": "yes"}, "team"),
        ("memory.write", {**WRITE, "team": 1}, "team"),
        ("memory.remember", {"text": "t", "team": "false"}, "team"),
        ("memory.dream", {"cwd": "/", "wait": "yes"}, "wait"),
        ("memory.dream", {"cwd": "/", "wait": 1}, "wait"),
    ],
)
async def test_a_flag_or_number_of_another_json_type_is_invalid_params(
    daemon: DaemonHandle, tmp_path: Path, method: str, params: dict[str, Any], field: str
) -> None:
    # Read laxly, "yes", "on", 1 and "1" were true and "off" false; "5", 5.0 and true a limit.
    error = await _error(daemon, method, {"cwd": str(tmp_path), **params})
    assert error["code"] == -32602, error
    assert field in error["message"]
    got = await daemon.call("recall", cwd=str(tmp_path), query="q", explain=True, limit=5)
    assert got["memories"] == []  # real booleans and integers still do


async def test_an_internal_error_keeps_its_details_in_the_log(
    daemon: DaemonHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EIO, "disk on fire", "/secret/place/on/disk")

    monkeypatch.setattr(AutoMemory, "manifest", broken)
    with structlog.testing.capture_logs() as logged:
        error = await _error(daemon, "memory.list", {"cwd": str(tmp_path)})
    assert error["code"] == -32603
    assert "data" not in error
    assert "disk on fire" not in error["message"]
    assert "/secret/place" not in error["message"]
    assert "memory.list" in error["message"]
    (failure,) = [e for e in logged if e["event"] == "method failed"]
    assert "disk on fire" in str(failure["exc_info"])


@pytest.mark.parametrize(
    ("given", "message"),
    [("notes.txt", "file: memory files end in .md, got 'notes.txt'"), ("", "file: must be")],
)
def test_a_bad_memory_file_name_names_the_field_it_came_from(
    tmp_path: Path, given: str, message: str
) -> None:
    # Found by a bug hunt: `memory.write {file: "x.txt"}` was told `path: …`, a field it
    # never sent. The check names the field its caller passes.
    with pytest.raises(InvalidParams) as err:
        resolve_inside(tmp_path, given, must_exist=False, field="file")
    assert err.value.message.startswith(message)
    with pytest.raises(InvalidParams) as err:
        resolve_inside(tmp_path, given, must_exist=False)
    assert err.value.message.startswith(message.replace("file:", "path:", 1))


@pytest.mark.parametrize(
    "value",
    [
        "a" * params_mod.NAME_MAX,  # the longest name
        "a" * (params_mod.NAME_MAX + 1),
        "/".join(["a" * 200] * 30),  # long, every name short
        "é" * (params_mod.NAME_MAX // 2),  # 2 bytes each: at the bound
        "é" * (params_mod.NAME_MAX // 2 + 1),
        "\U0001f600" * (params_mod.NAME_MAX // 4),  # 4 bytes each
        "\U0001f600" * (params_mod.NAME_MAX // 4 + 1),
        "\ud800" * 86,  # a lone surrogate (from JSON's \ud800): 3 bytes each
        "x\x00",
        "",
    ],
)
def test_a_path_is_judged_as_path_problem_judges_it(value: str) -> None:
    # The short paths' way around `path_problem` must not let through what it refuses.
    problem = params_mod.path_problem(value)
    adapter = TypeAdapter(params_mod.PathText)
    if problem is None:
        assert adapter.validate_python(value) == value
    else:
        with pytest.raises(ValidationError) as refused:
            adapter.validate_python(value)
        assert refused.value.errors()[0]["msg"] == f"Value error, {problem}"


def test_paths_are_checked_without_encoding_the_short_ones_and_not_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by a bug hunt: 50,000 touched paths took ~60 ms to check on the event loop (each
    # encoded and split), and 10^6 ~0.3 s before the bound of 100,000 refused them.
    checked: list[str] = []
    real = params_mod.path_problem

    def counting(value: str) -> str | None:
        checked.append(value)
        return real(value)

    monkeypatch.setattr(params_mod, "path_problem", counting)
    adapter = TypeAdapter(params_mod.PathTexts)
    short = [f"/home/u/project/src/f{i}.py" for i in range(1000)]
    assert adapter.validate_python(short) == short
    assert checked == []
    long = "/".join(["d" * 100] * 3)
    with pytest.raises(ValidationError, match="at most 100000 items after validation, not 100001"):
        adapter.validate_python([long] * (params_mod.MAX_PATHS + 1))
    assert checked == []
    with pytest.raises(ValidationError, match="at most 100000 items after validation, not 100001"):
        TypeAdapter(params_mod.PathList).validate_python([long] * (params_mod.MAX_PATHS + 1))


async def test_a_value_a_field_error_quotes_is_cut_and_the_reply_stays_a_32602(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Found by a bug hunt: an unknown `role` of 20 MB was quoted whole (`unknown role 'xxx…'`),
    # the reply passed the 16 MiB cap and the client got -32004 "ask for less".
    messages = [{"role": "x" * 2_000_000, "content": "hi"}]
    params = {"session_id": "s1", "cwd": str(tmp_path), "messages": messages}
    error = await _error(daemon, "after_turn", params)
    assert error["code"] == -32602
    assert len(error["message"]) < 300
    assert "unknown role 'xxx" in error["message"]
    assert error["message"].endswith("expected 'user' or 'assistant'")


def test_a_field_message_is_cut_whatever_its_validator_quotes() -> None:
    # Any other validator quoting what it was sent cannot make the reply huge either.
    from pydantic import BaseModel, field_validator

    from memoryd.daemon.limits import MAX_FIELD_MESSAGE_CHARS
    from memoryd.daemon.protocol.dispatch import format_validation_error

    class Quoting(BaseModel):
        name: str

        @field_validator("name")
        @classmethod
        def _refuse(cls, value: str) -> str:
            raise ValueError(f"not a name: {value}")

    with pytest.raises(ValidationError) as refused:
        Quoting(name="y" * 100_000)
    message = format_validation_error(refused.value)
    assert len(message) < MAX_FIELD_MESSAGE_CHARS + 100
    assert message.endswith(" characters)")
    assert message.startswith("invalid params: name: Value error, not a name: yyy")
