"""`memoryd-mcp`: memoryd as a stdio MCP server (official `mcp` SDK), for any MCP-capable client.

Tools: `recall`, `remember`, `list` and `read` (`mcp_tools`). The project is the tool's `cwd`
argument, else `--cwd`, else `$MEMORYD_MCP_CWD` (either relative to the directory the server
starts in), else that directory.

The SDK (with the web stack it brings) is the `[mcp]` extra, not the base install: this module
parses the command line without it and says how to install it when it is missing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from memoryd_client import paths
from memoryd_client.mcp_stdin import StdioWire
from memoryd_client.version import installed_version

EXIT_MISSING_EXTRA = 2
EXIT_USAGE = 2
_STREAMS = (("stdin", "input"), ("stdout", "output"))
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
MISSING_EXTRA = (
    "memoryd-mcp: this needs the MCP SDK ({name} is missing): install memoryd[mcp]: from the "
    "memoryd checkout, `pipx install --force '.[mcp]'`, or `pip install '.[mcp]'` into "
    "memoryd's environment"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memoryd-mcp", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--socket", type=_socket_path, help="daemon socket (default: $MEMORYD_SOCKET, …)"
    )
    parser.add_argument("--cwd", type=_cwd_path, help="default project directory for the tools")
    parser.add_argument("--version", action="version", version=f"memoryd-mcp {installed_version()}")
    args = parser.parse_args(argv)
    closed = [word for name, word in _STREAMS if getattr(sys, name) is None]
    if closed:
        # Started with `<&-` or `>&-` (Python makes such a stream None): the server reads
        # requests on one and answers on the other, so nothing can be served; it was an
        # AttributeError or EBADF traceback.
        if sys.stderr is not None:
            print(
                f"memoryd-mcp: standard {' and '.join(closed)} is closed: "
                "an MCP client talks to it over standard input and output",
                file=sys.stderr,
            )
        sys.exit(EXIT_USAGE)
    try:
        from memoryd_client.mcp_tools import Tools, build_server, is_jsonrpc_message
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        print(MISSING_EXTRA.format(name=exc.name), file=sys.stderr)
        sys.exit(EXIT_MISSING_EXTRA)
    chosen: str = args.cwd or os.environ.get("MEMORYD_MCP_CWD") or "."
    default_cwd: str | None
    try:
        # A relative one (`"args": ["--cwd", "."]` in a host's config) is the start directory's:
        # left relative, every tool call failed as if the model had passed a bad `cwd`.
        default_cwd = os.path.abspath(os.path.expanduser(chosen))
    except FileNotFoundError:
        # Started in a folder since deleted: it was a traceback, and the host had no server.
        # A tool given its `cwd` still works; one without says why there is no project.
        default_cwd = None
    server = build_server(Tools(args.socket, default_cwd))
    # Ctrl-C in a host's terminal reaches its MCP servers too. asyncio's own handling cancels
    # the server, which then waits for the SDK's stdin reader, a thread blocked in read(): the
    # process stopped answering yet lived on until the host closed stdin, then printed a
    # KeyboardInterrupt traceback. Exit at once and quietly instead, as on SIGTERM.
    signal.signal(signal.SIGINT, _exit_on_interrupt)
    # A line the SDK would leave unanswered (not JSON, a batch, half a surrogate pair) is
    # answered, not waited on for ever by the client.
    wire = StdioWire(is_jsonrpc_message)
    try:
        server.run("stdio")
    finally:
        wire.finish()


def _socket_path(text: str) -> str:
    """`--socket`'s value. An empty one is refused, as memctl refuses it: taken as no value,
    the server quietly talked to the default socket, not the one its host's config meant. A
    leading `~` is the home folder, as in memctl and $MEMORYD_SOCKET (a host's config is
    read by no shell: it was a folder named ~)."""
    return paths.expand_home(_not_empty(text, "the daemon's socket", "--socket"))


def _cwd_path(text: str) -> str:
    """`--cwd`'s value. An empty one is refused: taken as no value, the tools quietly used
    $MEMORYD_MCP_CWD or the start directory, not the project the host's config meant."""
    return _not_empty(text, "the project directory", "--cwd")


def _not_empty(text: str, give: str, flag: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError(f"an empty path: give {give}, or leave {flag} out")
    return text


def _exit_on_interrupt(_signum: int, _frame: object) -> None:
    os._exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
