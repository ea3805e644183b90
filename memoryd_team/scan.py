"""The server-side secret scan: the last line of defence behind the client's own scan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretHit:
    """Where a secret is and which rule matched; never the secret itself."""

    key: str
    rule: str
    description: str
    line: int  # 0 when the secret is in the key itself
    in_key: bool = False


def find_secret(entries: Mapping[str, str]) -> SecretHit | None:
    """The first finding in key order, None when every entry is clean. A key is scanned like
    content (before it): a token used as a file name would otherwise reach every teammate."""
    # Imported on first use: compiling the rule set is not needed by the admin commands.
    from memoryd.team.secrets import first_finding, key_text

    for key in sorted(entries):
        finding = first_finding(key_text(key))
        if finding is not None:
            return SecretHit(key, finding.rule_id, finding.description, 0, in_key=True)
        finding = first_finding(entries[key])
        if finding is not None:
            return SecretHit(key, finding.rule_id, finding.description, finding.line)
    return None
