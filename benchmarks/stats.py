"""Small, exact statistics for benchmark samples.

Medians (not means) are what runtime.md §10.1 reports, and medians with a min–max spread are robust on
a shared, noisy machine where one run in fifteen can be delayed by another process. Everything here is
pure so the unit tests can check it without running any program.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Sequence


@dataclass(frozen=True)
class Summary:
    """Median and range of one sample list (all values in the unit they were given in)."""

    n: int
    median: float
    min: float
    max: float

    def scaled(self, factor: float) -> "Summary":
        """The same summary in another unit (e.g. ns -> ms), so conversion happens once."""
        return Summary(self.n, self.median * factor, self.min * factor, self.max * factor)

    def to_json(self) -> dict[str, float | int]:
        return asdict(self)


def summarize(samples: Sequence[float]) -> Summary:
    """Summarise samples; refuses an empty list because a row with no runs has no median."""
    if not samples:
        raise ValueError("cannot summarise an empty sample list")
    return Summary(len(samples), float(statistics.median(samples)), float(min(samples)),
                   float(max(samples)))


@dataclass(frozen=True)
class RatioSummary:
    """How much slower (ratio > 1) the first variant is than the second.

    ``of_medians`` is the headline figure (runtime.md quotes 42.3 / 33.7 = 1.25). The paired ratios
    divide run i of A by run i of B; since the runs were interleaved, each pair saw nearly the same
    machine state, so their spread shows how stable the headline ratio is under noise.
    """

    of_medians: float
    paired_median: float
    paired_min: float
    paired_max: float

    def to_json(self) -> dict[str, float]:
        return asdict(self)


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Run-by-run ratios a[i] / b[i]; the two lists must come from the same interleaved schedule."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    if any(x <= 0 for x in b):
        raise ValueError("a denominator sample is not positive")
    return [x / y for x, y in zip(a, b)]


def ratio_summary(a: Sequence[float], b: Sequence[float]) -> RatioSummary:
    """Ratio of medians plus the distribution of paired ratios (see RatioSummary)."""
    pairs = paired_ratios(a, b)
    if not pairs:
        raise ValueError("cannot compute a ratio from empty samples")
    med_b = statistics.median(b)
    return RatioSummary(float(statistics.median(a) / med_b), float(statistics.median(pairs)),
                        float(min(pairs)), float(max(pairs)))
