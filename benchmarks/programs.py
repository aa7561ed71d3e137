"""The benchmark pairs and the seed's reference figures.

Each pair is a cancho program and its C twin producing the same 8 MiB (131,072 lines of one 64-byte
line). The sizes are literals inside the programs (int literals fold at compile time), so there is
no "small" variant: quick mode runs fewer repetitions, not smaller programs.

The reference figures are copied from runtime.md §10.1 (the design document
``docs/bulk-io.md`` §1 and §4). They were measured on another machine with ``--backend cranelift``,
so only the ratios and the shape are comparable, never the absolute milliseconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROGRAMS_DIR = BENCH_DIR / "programs"
C_DIR = BENCH_DIR / "c"

OUTPUT_BYTES = 8 * 1024 * 1024  # 131,072 lines x 64 bytes


@dataclass(frozen=True)
class Reference:
    """The seed's numbers for one row (milliseconds; None where the seed gives none)."""

    cancho_median_ms: float | None
    cancho_min_ms: float | None
    c_median_ms: float | None
    c_min_ms: float | None
    source: str

    @property
    def ratio(self) -> float | None:
        """cancho/C of medians, the way the seed derives 1.25x from 42.3 / 33.7."""
        if self.cancho_median_ms is None or not self.c_median_ms:
            return None
        return self.cancho_median_ms / self.c_median_ms

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = asdict(self)
        d["ratio"] = None if self.ratio is None else round(self.ratio, 3)
        return d


@dataclass(frozen=True)
class Pair:
    """One table row: a cancho program against its C twin."""

    key: str
    title: str
    cancho_label: str
    c_label: str
    cancho_source: Path
    c_source: Path
    reference: Reference


PAIRS: tuple[Pair, ...] = (
    Pair(
        key="putchar",
        title="putchar per byte",
        cancho_label="cancho putchar",
        c_label="C putchar",
        cancho_source=PROGRAMS_DIR / "putchar_8m.cho",
        c_source=C_DIR / "putchar_8m.c",
        # §1: lex-sys io.write_all (one putchar per byte, before PR #54) 40.5 / 42.3 ms;
        # C putchar per byte 32.5 / 33.7 ms.
        reference=Reference(42.3, 40.5, 33.7, 32.5, "runtime.md §10.1, bulk-io.md §1"),
    ),
    Pair(
        key="write_bytes",
        title="write_bytes per 64-byte line",
        cancho_label="cancho write_bytes",
        c_label="C fwrite",
        cancho_source=PROGRAMS_DIR / "write_bytes_8m.cho",
        c_source=C_DIR / "fwrite_8m.c",
        # §4 "after write_bytes": 3.3 ms (median only); C fwrite 2.8 / 3.0 ms (§1).
        reference=Reference(3.3, None, 3.0, 2.8, "runtime.md §10.1, bulk-io.md §1 and §4"),
    ),
    Pair(
        key="fill",
        title="line filled byte by byte, then written",
        cancho_label="cancho fill + write_bytes",
        c_label="C fill + fwrite",
        cancho_source=PROGRAMS_DIR / "fill_8m.cho",
        c_source=C_DIR / "fill_8m.c",
        # §4 "filling the line": lex-sys filled 9.2 ms, C filled 3.0 ms (medians only).
        reference=Reference(9.2, None, 3.0, None, "runtime.md §10.1, bulk-io.md §4"),
    ),
)

# Ratios the seed draws between rows rather than within one (runtime.md §10.1):
# "11x per-call overhead in C (33.7 / 3.0)" and "12.8x on the pure loop" (42.3 / 3.3).
DERIVED: tuple[tuple[str, tuple[str, str], tuple[str, str], float], ...] = (
    ("C putchar / C fwrite (per-call overhead in C)", ("putchar", "c"), ("write_bytes", "c"),
     33.7 / 3.0),
    ("cancho putchar / cancho write_bytes (gain of write_bytes)", ("putchar", "cancho"),
     ("write_bytes", "cancho"), 42.3 / 3.3),
    ("cancho fill / cancho write_bytes (cost of the byte stores)", ("fill", "cancho"),
     ("write_bytes", "cancho"), 9.2 / 3.0),
)

HELLO = BENCH_DIR.parent / "examples" / "hello.cho"
