"""A model's one-time conversions (to ONNX, to int8) run in a Python process of their own.

They hold the interpreter lock for long stretches (onnx's check of the graph and protobuf's
serialization are C++ calls that never release it: ~0.6 s at once for all-MiniLM-L6-v2), so
though they ran in the embedding thread, the daemon's event loop stood still meanwhile.

The child dies with the daemon: it watches the read end of a pipe whose only write end the
daemon holds, and exits at its end of file, which comes when the daemon is gone however it
went (a kill -9 too). Left running, it wrote on under the daemon's HOME after it (a kill -9'd
daemon's temp HOME could not be removed). A pipe, not Linux's PR_SET_PDEATHSIG: that works on
macOS as well, and PDEATHSIG fires when the *thread* that started the child ends (a worker
thread of the daemon's executor may), not the daemon."""

from __future__ import annotations

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_NO_MODULE = 3  # the child's exit status when a module it needs is not installed
_PARENT_GONE = 4  # the child's exit status when the daemon went first
# How long the conversion has to stop (its temp file removed) once the daemon is gone, before
# the child exits regardless: a C++ call holds the interpreter lock ~0.6 s at a time.
_WIND_DOWN_S = 10.0


def convert(source: Path, out_path: Path) -> None:
    """`onnx_export.export_encoder(source, out_path)`, in a process of its own."""
    _run("export", [str(source), str(out_path)])


def quantize(source: Path, target: Path, float_layers: list[int]) -> None:
    """`quantize.quantize_int8(source, target, float_layers)`, in a process of its own."""
    _run("quantize", [str(source), str(target), float_layers])


def _run(step: str, args: list[object]) -> None:
    """ImportError when the child misses a module (`name` set); RuntimeError with the
    child's last line of error otherwise."""
    env = dict(os.environ)
    # This memoryd, however the daemon found it (an editable install, a checkout on the path).
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    # The write end stays here (not inheritable: no other child gets it) until the child ends.
    watched, held = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, step, json.dumps(args), str(watched)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            pass_fds=(watched,),
        )
    finally:
        os.close(watched)
        os.close(held)
    said = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
    if done.returncode == _NO_MODULE:
        raise ImportError(said[0], name=said[0])
    if done.returncode != 0:
        raise RuntimeError(said[0])


class _ParentGone(BaseException):
    """Raised in the conversion (as a signal's handler would) once the daemon is gone: not an
    Exception, so nothing on the way takes it for the conversion failing."""


_parent_gone = threading.Event()


def _on_user_signal(_signum: int, _frame: object) -> None:
    # A real SIGUSR1 or SIGUSR2 (a logrotate script's `kill -USR1`, `systemctl kill`, which
    # reaches every process of the service) is survived, as the daemon survives it: ended,
    # the conversion the daemon waits for failed with it.
    if _parent_gone.is_set():
        raise _ParentGone


def _exit_with_parent(fd: int) -> None:
    """Exit once nothing can write to `fd` any more: the daemon that holds its write end is
    gone. In a thread of its own: the conversion holds the main thread. Called in the main
    thread (it sets a signal handler)."""
    # `interrupt_main(SIGUSR1)` runs SIGUSR1's handler in the main thread without sending
    # it. Not SIGINT's: a daemon started in the background by a shell ignores SIGINT, and so
    # would its child, whose `interrupt_main` then did nothing.
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, _on_user_signal)

    def watch() -> None:
        while True:
            try:
                if not os.read(fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        # Stopped where it is, its `finally` removes its temp file; exit regardless if
        # it does not stop within the grace.
        _parent_gone.set()
        _thread.interrupt_main(signal.SIGUSR1)
        time.sleep(_WIND_DOWN_S)
        os._exit(_PARENT_GONE)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _main(step: str, raw: str, parent_fd: str | None = None) -> int:
    if parent_fd is not None:
        _exit_with_parent(int(parent_fd))
    args = json.loads(raw)
    try:
        if step == "export":
            from memoryd.automem.embeddings.onnx_export import export_encoder

            export_encoder(Path(args[0]), Path(args[1]))
        elif step == "quantize":
            from memoryd.automem.embeddings.quantize import quantize_int8

            quantize_int8(Path(args[0]), Path(args[1]), [int(n) for n in args[2]])
        else:
            print(f"no such step: {step}", file=sys.stderr)
            return 2
    except ImportError as exc:
        print(exc.name or exc, file=sys.stderr)
        return _NO_MODULE
    except _ParentGone:
        return _PARENT_GONE
    except Exception as exc:  # said on the last line, for the daemon's EncoderUnavailable
        print(f"{type(exc).__name__}: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(*sys.argv[1:4]))
