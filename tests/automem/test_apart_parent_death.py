"""The model-conversion child (`embeddings/apart.py`) dies with the daemon: a kill -9'd
daemon's child wrote on under its HOME (bench/fault_kill9_storm.py's cleanup met it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Loaded by the child interpreter at start-up (from PYTHONPATH, which the daemon passes on):
# the export step becomes one that takes ten minutes, makes a temp file as the real one does,
# and says its pid once it runs.
SLOW_EXPORT = """
import os, sys, time, types
from pathlib import Path

def export_encoder(source, out_path):
    tmp = out_path.with_name("." + out_path.name + ".tmp")
    tmp.write_text("half a model")
    try:
        (out_path.parent / "child.pid").write_text(str(os.getpid()))
        for beat in range(6000):
            (out_path.parent / "beats").write_text(str(beat))
            time.sleep(0.1)
    finally:
        tmp.unlink()

module = types.ModuleType("memoryd.automem.embeddings.onnx_export")
module.export_encoder = export_encoder
sys.modules[module.__name__] = module
"""

DAEMON = """
import sys
from pathlib import Path
from memoryd.automem.embeddings import apart
apart.convert(Path(sys.argv[1]), Path(sys.argv[2]))
"""


def _gone(pid: int) -> bool:
    """Ended (a zombie waiting for whoever adopted it counts)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return "\nState:\tZ" in status


def _wait(condition: Callable[[], bool], limit_s: float = 120) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@dataclass
class Conversion:
    daemon: subprocess.Popen[bytes]  # a process converting as the daemon does
    child: int  # its conversion child, running the slow export
    out: Path  # the export's folder

    def beat(self) -> int:
        """How many steps the slow export has taken."""
        try:
            return int((self.out / "beats").read_text() or -1)
        except (FileNotFoundError, ValueError):
            return -1

    def kill_the_daemon(self) -> None:
        """kill -9 the daemon; its child ends, its temp file removed."""
        self.daemon.send_signal(signal.SIGKILL)
        self.daemon.wait(60)
        assert _wait(lambda: _gone(self.child)), "the conversion outlived the daemon"
        assert not (self.out / ".model.onnx.tmp").exists()  # stopped, not cut off


@pytest.fixture
def conversion(tmp_path: Path) -> Iterator[Conversion]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SLOW_EXPORT)
    out = tmp_path / "onnx"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(hook)}
    daemon = subprocess.Popen(
        [sys.executable, "-c", DAEMON, str(tmp_path / "model"), str(out / "model.onnx")],
        env=env,
        cwd=REPO,
    )
    child: int | None = None
    try:
        pid_file = out / "child.pid"
        assert _wait(lambda: pid_file.exists() and pid_file.read_text() != ""), "never ran"
        child = int(pid_file.read_text())
        yield Conversion(daemon, child, out)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(60)
        if child is not None and not _gone(child):
            os.kill(child, signal.SIGKILL)


def test_the_conversion_child_of_a_daemon_killed_with_sigkill_exits(
    conversion: Conversion,
) -> None:
    conversion.kill_the_daemon()


def test_the_conversion_child_survives_sigusr1_and_sigusr2_as_the_daemon_does(
    conversion: Conversion,
) -> None:
    # Found by the session 24 review: the child took any SIGUSR1 for its daemon gone (the
    # signal it stops itself with) and dropped the conversion, and SIGUSR2 ended it; the
    # daemon survives both (a logrotate script's `kill -USR1`, `systemctl kill -s USR1`
    # reaching every process of the service), and so must the conversion it waits for.
    child = conversion.child
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        os.kill(child, sig)
        # Beats two on from the signal's: its handler has run (a sleep it cut is resumed).
        after = conversion.beat() + 2

        def beaten(after: int = after) -> bool:
            return conversion.beat() >= after or _gone(child)

        assert _wait(beaten), "the conversion stalled"
        assert not _gone(child), f"{sig.name} ended the conversion"
    assert conversion.daemon.poll() is None
    conversion.kill_the_daemon()


def test_a_conversion_that_ends_leaves_no_descriptor_open(tmp_path: Path) -> None:
    from memoryd.automem.embeddings import apart

    fds = Path("/proc/self/fd")
    if not fds.exists():
        pytest.skip("no /proc/self/fd")
    before = set(os.listdir(fds))
    with pytest.raises((ImportError, RuntimeError)):  # no such model, or no onnx installed
        apart.convert(tmp_path / "missing", tmp_path / "model.onnx")
    assert set(os.listdir(fds)) <= before  # the pipe's two ends are closed


@pytest.mark.parametrize("failure", [RuntimeError("bad graph"), "parent gone"])
def test_a_quantization_stopped_or_failed_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException | str
) -> None:
    # Found by the session 24 review: the export's temp file went when the daemon died
    # (23271c9), the quantization's stayed beside the int8 graph, tens of MB.
    pytest.importorskip("onnxruntime.quantization")
    import onnxruntime.quantization  # type: ignore[import-untyped]

    from memoryd.automem.embeddings import apart, quantize

    raised = apart._ParentGone() if failure == "parent gone" else failure
    assert isinstance(raised, BaseException)

    def half_written(_source: Path, tmp: Path, **_options: object) -> None:
        tmp.write_bytes(b"half a graph")
        raise raised

    monkeypatch.setattr(quantize, "ffn_output_nodes", lambda _path: {0: "MatMul_0"})
    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", half_written)
    target = tmp_path / "int8" / "model.onnx"
    # A daemon of this HOME whose own conversion child was stopping (the one before it died)
    # may still write beside it: a fixed temp name was both children's one file.
    target.parent.mkdir()
    others = target.with_name(".model.onnx.tmp")
    others.write_bytes(b"another child's graph")
    with pytest.raises(type(raised)):
        quantize.quantize_int8(tmp_path / "model.onnx", target, [0])
    assert list(target.parent.iterdir()) == [others]
    assert others.read_bytes() == b"another child's graph"
