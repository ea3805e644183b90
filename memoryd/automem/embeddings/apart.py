"""A model's one-time conversions (to ONNX, to int8) run in a Python process of their own.

They hold the interpreter lock for long stretches (onnx's check of the graph and protobuf's
serialization are C++ calls that never release it: ~0.6 s at once for all-MiniLM-L6-v2), so
though they ran in the embedding thread, the daemon's event loop stood still meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_NO_MODULE = 3  # the child's exit status when a module it needs is not installed


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
    done = subprocess.run(
        [sys.executable, "-m", __name__, step, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    said = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
    if done.returncode == _NO_MODULE:
        raise ImportError(said[0], name=said[0])
    if done.returncode != 0:
        raise RuntimeError(said[0])


def _main(step: str, raw: str) -> int:
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
    except Exception as exc:  # said on the last line, for the daemon's EncoderUnavailable
        print(f"{type(exc).__name__}: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1], sys.argv[2]))
