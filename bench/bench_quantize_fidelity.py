"""How close int8 vectors stay to float32 ones, layer by layer: what `KnownModel.float_layers`
is chosen from (memoryd/automem/embeddings/quantize.py).

For the model (default: all-mpnet-base-v2, from the packages that ship it), side by side in one
run on the same sentences: the float32 graph; every matrix product in int8 but all the
feed-forward output projections; then each of those projections quantized too, alone; every
one in int8; and memoryd's choice. Each line: the mean and lowest cosine between a sentence's
int8 and float32 vectors, and the p50 time to embed one sentence, as a ratio to float32.

    .venv/bin/python bench/bench_quantize_fidelity.py [--model NAME]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SENTENCES = [
    "The user rows with the harbour kayak club on Tuesdays",
    "Deploys go out on Fridays after the freeze",
    "She takes her coffee with oat milk and no sugar",
    "The staging database is rebuilt every night at two",
    "He adopted a rescue dog named Max last spring",
    "Prefers tabs over spaces in Go code, spaces in Python",
    "The team agreed to review pull requests within a day",
    "Her sister is getting married in Lisbon in June",
    "Run the integration tests with the real PostgreSQL server",
    "They moved from Berlin to Toronto three years ago",
    "The API keys live in the vault, never in the repository",
    "Bought a second-hand road bike to train for a triathlon",
    "Use the small model for summaries and the large one for code",
    "The quarterly report is due on the first Monday of April",
    "Plays the cello in a community orchestra on weekends",
    "Broke his wrist skiing and took two weeks off work",
    "Where did the user go on holiday last summer?",
    "How many pets does she have?",
    "What was decided about the release schedule?",
    "When did he start learning Japanese?",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="sentence-transformers/all-mpnet-base-v2")
    args = parser.parse_args()
    try:
        import numpy as np

        from memoryd.automem.embeddings.encoder import SentenceEncoder
        from memoryd.automem.embeddings.models import KNOWN, ModelFiles, from_packages
        from memoryd.automem.embeddings.quantize import ffn_output_nodes, quantize_int8
    except ImportError as exc:
        print(f"skipped: needs the embeddings extra ({exc.name})")
        return 0
    model = KNOWN.get(args.model)
    if model is None:
        print(f"skipped: {args.model} is not a model memoryd knows ({', '.join(KNOWN)})")
        return 0
    with tempfile.TemporaryDirectory(prefix="mdb-quant-") as work:
        os.environ["XDG_STATE_HOME"] = str(Path(work) / "state")
        float32 = from_packages(model)
        if float32 is None:
            print(f"skipped: the packages of {model.name} are not installed: {model.packages}")
            return 0
        layers = sorted(ffn_output_nodes(float32.onnx))

        def measure(onnx: Path) -> tuple[np.ndarray, float]:
            encoder = SentenceEncoder(ModelFiles("probe", onnx, float32.tokenizer))
            vectors = encoder.encode(SENTENCES)
            times = []
            for text in SENTENCES * 3:
                started = time.perf_counter()
                encoder.encode([text])
                times.append(time.perf_counter() - started)
            return vectors, sorted(times)[len(times) // 2]

        reference, ref_s = measure(float32.onnx)
        print(f"{model.name}: {len(layers)} layers, {len(SENTENCES)} sentences, one thread")
        print(f"{'variant':<44} {'cos mean':>8} {'cos min':>8} {'time':>6}")
        print(f"{'float32':<44} {1.0:>8.4f} {1.0:>8.4f} {1.0:>6.2f}")
        variants = [("int8, feed-forward outputs in float32", set(layers))]
        variants += [
            (f"  + layer {i}'s feed-forward output in int8", set(layers) - {i}) for i in layers
        ]
        variants.append(("everything int8", set()))
        if model.float_layers is not None:
            variants.append(
                (f"memoryd's: float32 in {sorted(model.float_layers)}", set(model.float_layers))
            )
        for label, kept in variants:
            target = Path(work) / "variant.onnx"
            quantize_int8(float32.onnx, target, kept)
            vectors, took = measure(target)
            cosines = (vectors * reference).sum(axis=1)
            print(f"{label:<44} {cosines.mean():>8.4f} {cosines.min():>8.4f} {took / ref_s:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
