"""Secrets in a memory someone asked to save: warn in the reply, or refuse when the user says so.

A memory file is plain text under `~/.claude/projects/…`, read back into every session's
context and, for team memory, shared. The team secret scanner already keeps secrets off the
team server; this check tells the writer (`memory.write`, `memory.remember`, the MCP
`remember` tool) at write time. With the setting `memorydRefuseSecrets: true` (user, local,
flag or policy settings — never a repository's) the write is refused with -32005 and nothing is
written. Findings name the field (`file` too: its name goes into MEMORY.md), line and rule,
never the secret itself.

It lives in `daemon/` because it joins two layers: auto memory writes and the team scanner.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from memoryd.agent.secret_screen import REFUSE_SETTING, name_secrets
from memoryd.errors import SecretRefused

__all__ = ["REFUSE_SETTING", "SecretInMemory", "check_write", "find_secrets"]


@dataclass(frozen=True)
class SecretInMemory:
    field: str  # "name", "description", "body" or "file"
    line: int
    rule: str
    description: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        where = self.field if self.field == "file" else f"{self.field} line {self.line}"
        return f"{where} matches secret rule {self.rule} ({self.description})"


def find_secrets(
    name: str, description: str, body: str, file: str | None = None
) -> list[SecretInMemory]:
    # Imported here: the scanner builds its keyword automaton on import, and a daemon that
    # never saves a memory should not pay for it at start-up.
    from memoryd.team.secrets import scan

    found = [
        SecretInMemory(field, finding.line, finding.rule_id, finding.description)
        for field, text in (("name", name), ("description", description), ("body", body))
        for finding in scan(text)
    ]
    if file:
        # The file name goes into MEMORY.md's index line, so into every session's context.
        found += [SecretInMemory("file", 1, s.rule, s.description) for s in name_secrets(file)]
    return found


def check_write(
    name: str,
    description: str,
    body: str,
    *,
    team: bool,
    refuse: bool,
    file: str | None = None,
) -> dict[str, Any]:
    """The reply fields `warnings` and `secrets` for a write; SecretRefused when refusing."""
    found = find_secrets(name, description, body, file)
    if not found:
        return {"warnings": [], "secrets": []}
    what = "; ".join(s.text() for s in found)
    secrets = [s.as_dict() for s in found]
    if refuse:
        raise SecretRefused(
            f"not saved: the memory looks like it holds a secret ({what}) and "
            f"{REFUSE_SETTING} is on; keep the secret out of memory and save the rest",
            data={"secrets": secrets},
        )
    where = (
        "team memory is plain text here, and this entry will not be uploaded to the team server"
        if team
        else "memory files are plain text and are read back into every session"
    )
    return {
        "warnings": [
            f"saved, but it looks like it holds a secret ({what}): {where}. Remove it with "
            f"`memctl memory`; set {REFUSE_SETTING} to true to refuse such writes"
        ],
        "secrets": secrets,
    }
