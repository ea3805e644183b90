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
import sys

from memoryd_client.version import installed_version

EXIT_MISSING_EXTRA = 2
MISSING_EXTRA = (
    "memoryd-mcp: this needs the MCP SDK ({name} is missing): install memoryd[mcp]: from the "
    "memoryd checkout, `pipx install --force '.[mcp]'`, or `pip install '.[mcp]'` into "
    "memoryd's environment"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memoryd-mcp", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="daemon socket (default: $MEMORYD_SOCKET, …)")
    parser.add_argument("--cwd", help="default project directory for the tools")
    parser.add_argument("--version", action="version", version=f"memoryd-mcp {installed_version()}")
    args = parser.parse_args(argv)
    try:
        from memoryd_client.mcp_tools import Tools, build_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        print(MISSING_EXTRA.format(name=exc.name), file=sys.stderr)
        sys.exit(EXIT_MISSING_EXTRA)
    default_cwd = args.cwd or os.environ.get("MEMORYD_MCP_CWD") or os.getcwd()
    # A relative one (`"args": ["--cwd", "."]` in a host's config) is the start directory's:
    # left relative, every tool call failed as if the model had passed a bad `cwd`.
    default_cwd = os.path.abspath(os.path.expanduser(default_cwd))
    build_server(Tools(args.socket, default_cwd)).run("stdio")


if __name__ == "__main__":
    main()
