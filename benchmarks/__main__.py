"""``python -m benchmarks [--quick] [--runs N] [--json PATH] [--backend exe|jit|both]``

Re-creates runtime.md §10.1's rows side by side on this machine: 8 MiB written per byte (putchar),
per 64-byte line (write_bytes / fwrite), and per line filled byte by byte, cancho against C, to
/dev/null; base64 encode/decode of 4 MiB and sort of ~9 MB against GNU coreutils; plus our own
costs (check/compile time of each example program, the kernel's hello-cell round trip per
backend). Prints a plain table and writes a JSON document (default
``benchmarks/results/latest.json``).

Exit status: 0 when every row was built, verified (same sha256 as its C twin) and timed; 1 when some
row failed (the table says why; C rows are still measured); 2 for a bad command line. No time is
ever compared with a threshold: the machine may be shared and noisy.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .programs import BENCH_DIR
from .report import format_table, write_json
from .suite import Config, run_suite

DEFAULT_JSON = BENCH_DIR / "results" / "latest.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1])
    p.add_argument("--quick", action="store_true",
                   help="5 runs instead of 15; the base64 and sort inputs are cut to 512 KiB and "
                        "30,000 lines (the bulk-output programs' sizes are compile-time literals, "
                        "so those repeat less rather than write less); no thresholds either way")
    p.add_argument("--runs", type=int, default=None, help="timed runs per variant (default 15)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up rounds (default 1)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"default {DEFAULT_JSON}")
    p.add_argument("--backend", choices=("exe", "jit", "both"), default="exe",
                   help="exe: built executable; jit: `cancho run --backend jit` (includes "
                        "process start-up and compilation in every run)")
    p.add_argument("--cc", default="cc", help="C compiler for the twins (default cc)")
    p.add_argument("--no-compile", action="store_true",
                   help="skip the compile-latency measurement")
    p.add_argument("--no-tools", action="store_true",
                   help="skip the base64 and sort rows (examples/ against GNU coreutils)")
    p.add_argument("--no-costs", action="store_true",
                   help="skip our own costs (example compile times, kernel round trip)")
    args = p.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        p.error("--runs must be at least 1")
    if args.warmup < 0:
        p.error("--warmup must not be negative")
    if shutil.which(args.cc) is None:
        p.error(f"C compiler {args.cc!r} not found")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs = args.runs if args.runs is not None else (5 if args.quick else 15)
    backends = ("exe", "jit") if args.backend == "both" else (args.backend,)
    cfg = Config(runs=runs, warmup=args.warmup, backends=backends, quick=args.quick, cc=args.cc,
                 compile_runs=5 if args.quick else 10, measure_compile=not args.no_compile,
                 tools=not args.no_tools, example_costs=not args.no_costs,
                 kernel_roundtrip=not args.no_costs, costs_runs=2 if args.quick else 10)
    doc = run_suite(cfg)
    print(format_table(doc))
    write_json(doc, args.json)
    print(f"\nJSON written to {args.json}")
    # An unavailable row (a program not written yet) is reported, not a failure of the run.
    return 0 if all(row["status"] in ("ok", "unavailable") for row in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
