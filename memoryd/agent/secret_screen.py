"""Secrets in what a background agent writes: warned about, or refused when the user says so.

Extraction and dream write memory files, MagicDocs a Markdown file of the repository, all from
the conversation. `memory.write` scans what it saves (`daemon/memory_secrets.py`); an agent's
Write/Edit went through unscanned, so a key the user pasted into the chat was saved by the
background writer although the same memory through `memory.write` was refused. Each planned
write is scanned here before it is performed (`run_agent(screen_write=...)`), on the text the
write adds (lines the file did not have), so a secret already in a file does not block every
later edit of it. With `memorydRefuseSecrets` on, the write is refused: the agent hears which
rule matched (never the secret) and the refusal is reported like any denial. Otherwise the
write goes through and a `worker/error` warning names the file and the rule. The name of a
file a write creates is scanned too, as `memory.write` scans its `file`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.agent.policy import Denied
from memoryd.fsutil import read_regular_file

if TYPE_CHECKING:  # the tools load with the agent loop, not with the daemon
    from memoryd.agent.tools import WriteOp
    from memoryd.settings import EffectiveSettings

REFUSE_SETTING = "memorydRefuseSecrets"
MEMORY_FILES = "memory files are plain text and are read back into every session"
_MAX_OLD_BYTES = 5_000_000  # what an agent's Edit reads of a file (tools.MAX_FILE_BYTES)
# Called with the file as the agent's caller knows it and the planned write: a warning to
# report once it is written, or None; raises Denied to refuse it.
WriteScreen = Callable[[Path, "WriteOp"], str | None]


@dataclass(frozen=True)
class AddedSecret:
    line: int  # 1-based, in the new text; 0: in the name of the file the write creates
    rule: str
    description: str

    def text(self) -> str:
        where = "the file name" if self.line == 0 else f"line {self.line}"
        return f"{where} matches secret rule {self.rule} ({self.description})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def added_secrets(old: str | None, new: str) -> list[AddedSecret]:
    """The findings in `new` on a line `old` does not have (a finding spanning lines counts
    when any of them is new); `old` None: the file is new, every finding counts."""
    from memoryd.team.secrets import scan  # the scanner loads when an agent first writes

    findings = scan(new)
    if not findings:
        return []
    kept = frozenset(old.split("\n")) if old else frozenset()
    lines = new.split("\n")
    found: list[AddedSecret] = []
    for finding in findings:
        last = finding.line + new.count("\n", finding.start, finding.end)
        if any(lines[n - 1] not in kept for n in range(finding.line, last + 1)):
            found.append(AddedSecret(finding.line, finding.rule_id, finding.description))
    return found


def name_secrets(name: str) -> list[AddedSecret]:
    """The findings in a file's name, scanned as `memory.write` scans its `file` (a memory's
    name goes into MEMORY.md's index line, a document's into the repository)."""
    from memoryd.team.secrets import key_text, scan

    rules = {f.rule_id: f.description for f in scan(key_text(name))}
    return [AddedSecret(0, rule, description) for rule, description in rules.items()]


def _old_text(op: WriteOp) -> str | None:
    if op.created:
        return None
    try:
        return read_regular_file(op.path, _MAX_OLD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None  # gone or unreadable since it was planned: judge the whole text


def refuses_secrets(settings: EffectiveSettings) -> bool:
    """The user's `memorydRefuseSecrets` (a repository's settings cannot set it)."""
    return bool(settings.get(REFUSE_SETTING))


def secret_screen(settings: EffectiveSettings, *, where: str) -> WriteScreen:
    """The `screen_write` of a background agent writing under `settings` (the project's): it
    refuses with `refuses_secrets`, else warns; `where` says in the warning why a secret there
    matters. The one constructor of extraction's, dream's and MagicDocs' screens."""
    refuse = refuses_secrets(settings)

    def screen(path: Path, op: WriteOp) -> str | None:
        # The name only of a file this write creates: a file named so already is the user's.
        named = name_secrets(path.name) if op.created else []
        found = named + added_secrets(_old_text(op), op.text)
        if not found:
            return None
        what = "; ".join(s.text() for s in found)
        if named:  # the messages name the file, never the secret
            path = path.with_name("[redacted]")
        if refuse:
            raise Denied(
                f"not written: the new text of {path} looks like it holds a secret ({what}) and "
                f"{REFUSE_SETTING} is on; write it without the secret"
            )
        return (
            f"{path} written, but its new text looks like it holds a secret ({what}): {where}; "
            f"set {REFUSE_SETTING} to true to refuse such writes"
        )

    return screen
