"""clients/nvim/doc/memoryd.txt's example of a setup() error is what setup() raises."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.editors.headless_nvim import NVIM, PLUGIN, headless

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed")


def test_the_setup_error_example_is_what_setup_raises(tmp_path: Path) -> None:
    # The example showed "…over 0, got 5" without saying 5 was the string '5': as written it
    # read as 5 ms refused.
    help_text = (PLUGIN / "doc" / "memoryd.txt").read_text()
    example = re.search(r"e\.g\. for `(\w+) = ([^`]+)` \(a string\) >\n    (.*)\n<", help_text)
    assert example, "the help shows a setup() error and the option value that raises it"
    option, value, message = example.groups()
    out = tmp_path / "out.txt"
    lua = (
        f"lua local ok, err = pcall(require('memoryd').setup, {{{option} = {value}}}) "
        f"vim.fn.writefile({{tostring(err)}}, '{out}')"
    )
    subprocess.run(
        headless(f"set runtimepath^={PLUGIN}", lua, "qa!"),
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert out.read_text().strip() == message
