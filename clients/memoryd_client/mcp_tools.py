"""The tools of `memoryd-mcp` (see `mcp_server`) on the official `mcp` SDK's server.

Tools: `recall` (memories relevant to a query), `remember` (save a memory), `list` (the
project's memories and instruction files) and `read` (one memory file). Each tool is one call
to the daemon over its socket; the project is the tool's `cwd` argument, else the server's
default project. Daemon errors come back as tool errors (`is_error`) with the daemon's message,
never as a crash of the server.

Only this module imports `mcp` (the `[mcp]` extra); memctl and the rest of the client library
never do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import JSONRPCNotification, jsonrpc_message_adapter
from pydantic import Field

from memoryd_client.aio import AsyncClient
from memoryd_client.client import DaemonUnavailable, ProtocolError, RpcError, UntrustedSocket
from memoryd_client.paths import not_utf8_folder, utf8_argument
from memoryd_client.text_budget import cut, shares, utf8_size
from memoryd_client.version import installed_version
from memoryd_client.work_tree import nearest_in_work_tree

INSTRUCTIONS = (
    "memoryd keeps long-lived memory for this user and project. Call `recall` with the task at "
    "hand before relying on your own assumptions; call `remember` when the user states a "
    "preference, corrects you, or confirms a non-obvious approach (type feedback), tells you "
    "about ongoing work, decisions or deadlines (project), about themselves (user), or points "
    "to an external system (reference). Do not save code patterns, architecture, file layout, "
    "git history or transient task state. A recalled memory may be stale: verify any file, "
    "function or flag it names before recommending it."
)

MemoryType = Literal["user", "feedback", "project", "reference"]
# recall's `limit`: the daemon returns at most this many; a model asking for more (or fewer than
# one) gets the nearest allowed value rather than an error it would have to recover from.
RECALL_LIMIT_MIN, RECALL_LIMIT_MAX = 1, 5
# Hosts cap what one tool result may put in the model's context (Claude Code: 25,000 tokens by
# default) and refuse or cut a bigger one, while a memory may hold 200,000 bytes and recall
# returns five: recall shares this many bytes of content (UTF-8) among its memories, and read
# returns at most this many per call (`offset`, in characters, pages on). About 10,000 tokens
# of English; counted in characters, 40,000 of Japanese or Chinese (about a token each) were
# over the cap, and the host refused the result.
RESULT_BYTES = 40_000
# A name or description is shown at most as long as `remember` takes one: read from a file
# (written by hand, by a teammate), one of 100,000 characters was shown whole, and a recall of
# five came to 400 KB whatever its content's share.
NAME_CHARS, DESCRIPTION_CHARS = 200, 500
# Module level, not inside build_server: the SDK resolves the tools' string annotations
# (`from __future__ import annotations`) in this module's globals.
CwdArg = Annotated[
    str | None, Field(description="project directory (absolute); default: the server's project")
]


class Tools:
    """The four tools over one daemon socket and a default project directory."""

    def __init__(
        self, socket_path: str | None, default_cwd: str | None, timeout: float = 60.0
    ) -> None:
        self.socket_path = socket_path
        self.default_cwd = default_cwd  # None: the server started in a folder since deleted
        self.timeout = timeout

    def _cwd(self, cwd: str | None) -> str:
        project = self._project(cwd)
        # Only the default can be other than UTF-8 text (a model's `cwd` arrives as JSON):
        # under an ASCII locale a UTF-8 folder ("café") is lone surrogates, sent as its text.
        sendable = utf8_argument(project)
        if sendable is None:
            # Sent as it was, it reached the daemon as U+FFFD, which answered "no such
            # directory: …caf�" of a folder that is there.
            raise ToolError(not_utf8_folder(project, "the project folder", "cwd"))
        return sendable

    def _project(self, cwd: str | None) -> str:
        chosen = cwd or self.default_cwd
        if chosen is None:
            raise ToolError(
                "no default project: the directory memoryd-mcp started in no longer exists; "
                "pass cwd (the project's absolute directory)"
            )
        path = Path(chosen).expanduser()
        if cwd is None and path.is_absolute() and not path.is_dir():
            # The server's folder deleted since (`git worktree remove`, `rm -rf build`): every
            # call without a cwd failed. Its nearest folder in the same work tree stands in.
            stand_in = nearest_in_work_tree(str(path))
            if stand_in is not None:
                return stand_in
        if not path.is_absolute() or not path.is_dir():
            raise ToolError(f"cwd must be an existing absolute directory, got {chosen!r}")
        return str(path)

    def _note(self, cwd: str | None, project: str) -> dict[str, str]:
        """A `note` for a result made for a stand-in of the deleted default project."""
        default = utf8_argument(self.default_cwd or "") or self.default_cwd  # as sent (_cwd)
        if cwd is not None or project == default:
            return {}
        return {
            "note": f"the default project {default} no longer exists; this is for "
            f"{project}, its nearest existing folder in the same work tree"
        }

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            async with AsyncClient(self.socket_path, timeout=self.timeout) as conn:
                result = await conn.call(method, params)
        except (ProtocolError, UntrustedSocket, DaemonUnavailable) as exc:
            # Each says what it is: "memoryd is not running on …", "memoryd closed the
            # connection" (a restart mid-call), what else answers there. A prefix of "memoryd
            # is not running: " said it twice, and said it of a daemon that was answering.
            raise ToolError(str(exc)) from exc
        except RpcError as exc:
            raise ToolError(exc.message) from exc
        except TimeoutError as exc:
            raise ToolError(f"memoryd did not answer {method} within {self.timeout:.0f}s") from exc
        if not isinstance(result, dict):
            # Every method answers an object: anything else (what answers is not this memoryd,
            # or another version) was an AttributeError the host showed as a bare "Error
            # executing tool", with no reason.
            shown = json.dumps(result, ensure_ascii=False, default=str)
            raise ToolError(
                f"memoryd's reply to {method} is not an object: {shown[:200]}; is the daemon "
                "the same version as memoryd-mcp? (`memctl status`)"
            )
        return result

    async def recall(self, query: str, cwd: str | None = None, limit: int = 5) -> dict[str, Any]:
        if not query.strip():
            raise ToolError("query must not be empty")
        limit = max(RECALL_LIMIT_MIN, min(limit, RECALL_LIMIT_MAX))
        project = self._cwd(cwd)
        params = {"cwd": project, "query": query, "limit": limit}
        result = await self._call("recall", params)
        memories = [
            _shortened({k: m.get(k) for k in ("path", "name", "type", "description", "note")})
            | {"content": m.get("content")}
            for m in _objects(result.get("memories"))
        ]
        contents = [str(m["content"] or "") for m in memories]
        sizes = [utf8_size(content) for content in contents]
        given = shares(sizes, RESULT_BYTES)
        for memory, content, size, share in zip(memories, contents, sizes, given, strict=True):
            if size > share:
                shown = cut(content, share)
                memory["content"] = shown
                memory["truncated"] = (
                    f"showing {len(shown):,} of {len(content):,} characters: `read` this path "
                    f"with offset={len(shown)} for the rest"
                )
        return {
            "selector": result.get("selector"),
            "memories": memories,
            **self._note(cwd, project),
        }

    async def remember(
        self,
        type: MemoryType,
        name: str,
        description: str,
        body: str,
        cwd: str | None = None,
        team: bool = False,
    ) -> dict[str, Any]:
        project = self._cwd(cwd)
        params: dict[str, Any] = {
            "cwd": project,
            "type": type,
            "name": name,
            "description": description,
            "body": body,
        }
        if team:
            params["team"] = True
        result = await self._call("memory.write", params)
        reply = {"path": result.get("path"), "created": result.get("created")}
        reply.update(self._note(cwd, project))
        if result.get("warnings"):
            # E.g. the body holds a secret: the model should tell the user and fix the memory.
            reply["warnings"] = result["warnings"]
        return reply

    async def list(self, cwd: str | None = None, offset: int = 0) -> dict[str, Any]:
        project = self._cwd(cwd)
        result = await self._call("memory.list", {"cwd": project})
        memories = [
            _shortened({k: m.get(k) for k in ("path", "name", "type", "description", "team")})
            for m in _objects(result.get("memories"))
        ]
        if offset and offset >= len(memories):
            raise ToolError(f"offset {offset} is past the last memory ({len(memories):,} in all)")
        files = [
            {"path": f.get("path"), "type": f.get("type")}
            for f in _objects(result.get("instruction_files"))
        ]
        # A project of thousands of memories listed them all (1.4 MB for 3,000), far over
        # what a host takes from one call: the list pages through them as `read` does. The
        # instruction files (2,000 rules files made 270 KB) keep a quarter of it at most: the
        # host loads them itself, and the memories are what this lists.
        rules = _fitting(files, RESULT_BYTES // 4)
        shown = _fitting(memories[offset:], RESULT_BYTES - _json_size(rules))
        end = offset + len(shown)
        reply = {
            **self._note(cwd, project),
            "memory_dir": result.get("memory_dir"),
            "memories": shown,
            "instruction_files": rules,
        }
        if len(rules) < len(files):
            reply["instruction_files_truncated"] = (
                f"showing {len(rules):,} of {len(files):,} instruction files"
            )
        if offset or end < len(memories):
            more = f": call list with offset={end} for the rest" if end < len(memories) else ""
            reply["truncated"] = (
                f"showing memories {offset + 1:,}–{end:,} of {len(memories):,}{more}"
            )
        return reply

    async def read(self, path: str, cwd: str | None = None, offset: int = 0) -> str:
        project = self._cwd(cwd)
        if not path.startswith("/"):
            # A bare name as shown by `list`: relative to the project's memory directory.
            listing = await self._call("memory.list", {"cwd": project})
            path = str(Path(str(listing.get("memory_dir") or "")) / path)
        result = await self._call("memory.read", {"cwd": project, "path": path})
        content = str(result.get("content", ""))
        if offset == 0 and utf8_size(content) <= RESULT_BYTES:
            return content
        if not 0 <= offset < max(len(content), 1):
            raise ToolError(f"offset {offset} is outside the file ({len(content):,} characters)")
        part = cut(content[offset:], RESULT_BYTES)
        end = offset + len(part)
        if end < len(content):
            part += (
                f"\n\n[memoryd-mcp: characters {offset:,}–{end:,} of {len(content):,}; "
                f"call read with offset={end} for the rest]"
            )
        return part


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a reply's list (a list of anything else, or no list, holds none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _shortened(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with a name and description over their length cut, ending in `…`."""
    for key, limit in (("name", NAME_CHARS), ("description", DESCRIPTION_CHARS)):
        value = fields.get(key)
        if isinstance(value, str) and len(value) > limit:
            fields[key] = value[: limit - 1] + "…"
    return fields


def _json_size(value: Any) -> int:
    return utf8_size(json.dumps(value, ensure_ascii=False))


def _fitting(entries: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The first of `entries` whose JSON fits in `budget` bytes; the first one always, so
    that paging goes on."""
    used = 0
    for count, entry in enumerate(entries):
        used += _json_size(entry)
        if count and used > budget:
            return entries[:count]
    return entries


def is_jsonrpc_message(line: bytes) -> bool:
    """Whether the SDK's stdio transport takes `line` (decoded as it decodes it) for what it
    is, for `mcp_stdin`, which answers the others."""
    text = line.decode("utf-8", errors="replace")
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:  # pydantic's ValidationError
        return False
    if not isinstance(message, JSONRPCNotification):
        return True
    # A request whose `id` MCP does not allow (null, 1.5, true: only a string or an integer)
    # is read by the SDK as a notification, its `id` ignored, and never answered: the client
    # waited on it for ever. A notification has no `id` at all.
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):  # the SDK's parser took it: leave it the verdict
        return True
    return not (isinstance(raw, dict) and "id" in raw)


def build_server(tools: Tools) -> MCPServer[Any]:
    """The MCP server with the four tools registered (separate from `main` for tests)."""
    server: MCPServer[Any] = MCPServer(
        "memoryd", version=installed_version(), instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool(name="recall", description="Find up to 5 saved memories relevant to a query.")
    async def recall(
        query: Annotated[str, Field(description="what you are working on or looking for")],
        cwd: CwdArg = None,
        limit: Annotated[
            int,
            Field(
                description=f"at most this many, {RECALL_LIMIT_MIN}–{RECALL_LIMIT_MAX} "
                f"(a value outside is clamped to the range)"
            ),
        ] = RECALL_LIMIT_MAX,
    ) -> dict[str, Any]:
        return await tools.recall(query, cwd, limit)

    @server.tool(
        name="remember",
        description="Save a memory (a preference, correction, project fact or pointer) for later sessions.",
    )
    async def remember(
        type: Annotated[MemoryType, Field(description="user | feedback | project | reference")],
        name: Annotated[str, Field(min_length=1, max_length=200, description="a short title")],
        description: Annotated[
            str, Field(min_length=1, max_length=500, description="one line: when is this useful")
        ],
        body: Annotated[
            str,
            Field(
                min_length=1,
                description="the memory; for feedback and project add 'Why:' and 'How to apply:' lines",
            ),
        ],
        cwd: CwdArg = None,
        team: Annotated[bool, Field(description="share with the team (team memory)")] = False,
    ) -> dict[str, Any]:
        return await tools.remember(type, name, description, body, cwd, team)

    @server.tool(
        name="list", description="List the project's saved memories and instruction files."
    )
    async def list_memories(
        cwd: CwdArg = None,
        offset: Annotated[
            int,
            Field(
                ge=0,
                description="start at this memory; a long list comes in parts, each saying "
                "the offset of the next",
            ),
        ] = 0,
    ) -> dict[str, Any]:
        return await tools.list(cwd, offset)

    @server.tool(name="read", description="Read one memory file (a path from `list` or `recall`).")
    async def read(
        path: Annotated[str, Field(min_length=1, description="absolute path or file name")],
        cwd: CwdArg = None,
        offset: Annotated[
            int,
            Field(
                ge=0,
                description=f"start at this character; a file over {RESULT_BYTES:,} bytes "
                "comes in parts, each ending with the offset of the next",
            ),
        ] = 0,
    ) -> str:
        return await tools.read(path, cwd, offset)

    return server
