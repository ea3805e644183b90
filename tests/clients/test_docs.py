"""docs/protocol.md documents every method the daemon serves, with an example."""

from __future__ import annotations

import re

from tests.clients.conftest import REPO


def test_every_method_has_an_example_and_a_row() -> None:
    from memoryd.daemon.wiring import rpc_methods

    text = (REPO / "docs" / "protocol.md").read_text()
    examples = set(re.findall(r"^### `([^`]+)`", text, re.MULTILINE))
    rows = set(re.findall(r"^\| `([^`]+)`", text, re.MULTILINE))
    rows |= set(re.findall(r"^\| `[^`]+` / `([^`]+)`", text, re.MULTILINE))
    rows |= set(re.findall(r"^\| `[^`]+` / `[^`]+` / `([^`]+)`", text, re.MULTILINE))
    # Only the daemon's own methods: other tests may register test-only ones.
    served = {
        n for n, spec in rpc_methods().items() if spec.handler.__module__.startswith("memoryd.")
    }
    assert sorted(served - examples) == []
    assert sorted(served - rows) == []
