"""Where a model's cosines lie, so that the ranker's relevance floors mean the same with any
model.

The floors (`RankerParams.relevance_floor`, `semantic_only_floor`) were set on
all-MiniLM-L6-v2's cosines, where two unrelated sentences score about 0.04. Models differ: for
bge-small-en-v1.5 (mean-pooled) unrelated sentences score about 0.39, so MiniLM's floors would
let everything through. When a model loads, it embeds `UNRELATED`, sentences that share no
topic, and the cosines of their pairs give its noise level (median) and spread (90th
percentile minus median). A memory's cosine is then moved onto MiniLM's scale — the same
distance above the noise, in units of the spread — before the floors compare it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

UNRELATED = (
    "The recipe needs two eggs and a cup of flour",
    "It rained all afternoon in the valley",
    "The quarterly report is due on Friday",
    "He scored twice in the second half",
    "Install the package with pip",
    "The cat sleeps on the windowsill",
    "Interest rates rose by half a point",
    "The museum opens at nine",
    "She practises the violin every evening",
    "The train to Lyon was delayed",
    "Restart the router if the light blinks",
    "The garden needs watering in July",
    "Our flight lands at noon",
    "The novel is set in Victorian London",
    "Use a torque wrench on the wheel nuts",
    "The bakery sells sourdough on Saturdays",
    "Mount Everest is 8,849 metres high",
    "The invoice was paid by bank transfer",
    "Tomatoes ripen faster in the sun",
    "The meeting moved to Thursday",
    "Whales migrate south in winter",
    "The printer is out of toner",
    "He learned to swim at the age of six",
    "The bridge was built in 1890",
)


@dataclass(frozen=True)
class CosineScale:
    noise: float  # the median cosine of two unrelated sentences
    spread: float  # the 90th percentile of those cosines minus the median

    def to(self, other: CosineScale, cosines: npt.NDArray[np.floating[Any]]) -> npt.NDArray[Any]:
        """`cosines` of this model, moved onto `other`'s scale."""
        return (cosines - self.noise) * (other.spread / self.spread) + other.noise

    def as_dict(self) -> dict[str, float]:
        """For `status` and the log."""
        return {"noise": round(self.noise, 4), "spread": round(self.spread, 4)}


# all-MiniLM-L6-v2's, by `measure` (the floors' scale).
REFERENCE = CosineScale(noise=0.0418, spread=0.1118)


# The least spread a model's cosines may have. Real models spread 0.03–0.11; a damaged one at
# ~1e-5 was accepted, and `CosineScale.to` divides by the spread, so its noise (float rounding,
# one weight's damage) came out ~10,000 times larger on the floors' scale.
MIN_SPREAD = 1e-4


def measure(vectors: npt.NDArray[np.floating[Any]]) -> CosineScale | None:
    """The scale of a model, from its unit vectors of `UNRELATED`; None when its cosines do not
    spread (a broken model: nothing to calibrate on), or when it read (gave a vector that is
    not zero, `SentenceEncoder.encode_tokens`) fewer than half of these plain sentences.

    Only the sentences it read are measured: each zero vector's cosines of 0 pulled the
    median down (MiniLM's 0.042 to 0.010 with three of them), and the floors let more pass."""
    vectors = vectors[np.asarray(vectors).any(axis=1)]
    if 2 * len(vectors) < len(UNRELATED):
        return None
    cosines = (vectors @ vectors.T)[np.triu_indices(len(vectors), 1)]
    noise, high = np.percentile(cosines, [50, 90])
    spread = float(high - noise)
    if not spread > MIN_SPREAD:
        return None
    return CosineScale(float(noise), spread)
