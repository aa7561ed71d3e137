"""The seed's program rows (runtime.md §10.1, §10.3): real tools against their GNU originals.

* base64 encode of 4 MiB of random bytes (quick: 512 KiB) — ``examples/base64/base64.cho``
  against coreutils ``base64``; both read the file as standard input;
* base64 decode of that encoding (5.4 MB; quick: 0.7 MB) — ``base64 -d`` on both sides;
* sort of about 9 MB, 300,000 lines (quick: 30,000 lines) — ``examples/sort/sort.cho FILE``
  against ``LC_ALL=C sort FILE``.

Inputs are generated from a fixed seed, so every run of the harness sorts and encodes the same
bytes. Each row is verified (same sha256 as the GNU tool) before it is timed, like the bulk rows,
and shares their JSON shape (the GNU tool stands on the ``c`` side). A program that does not exist
yet makes its row ``unavailable`` with the reason, and the GNU side is still timed.
"""

from __future__ import annotations

import base64
import dataclasses
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import harness
from .harness import Built, BuildError
from .programs import Pair, Reference

EXAMPLES = harness.REPO_ROOT / "examples"
BASE64 = EXAMPLES / "base64" / "base64.cho"
SORT = EXAMPLES / "sort" / "sort.cho"


@dataclass(frozen=True)
class ToolRow:
    pair: Pair
    tool: str                     # the GNU command
    args: tuple[str, ...]         # options given to both sides
    input: str                    # key of make_inputs()
    stdin: bool                   # input as standard input (else as a file operand)
    env: tuple[tuple[str, str], ...] = ()


def _pair(key: str, title: str, source: Path, tool: str, gnu_label: str, ref: Reference) -> Pair:
    return Pair(key=key, title=title, cancho_label=f"cancho {source.stem}", c_label=gnu_label,
                cancho_source=source, c_source=Path(shutil.which(tool) or tool), reference=ref)


def tool_rows() -> tuple[ToolRow, ...]:
    return (
        ToolRow(_pair("base64_encode", "base64 encode", BASE64, "base64", "GNU base64",
                      # §4 after write_bytes: 34.7 ms (median); coreutils 5.8 / 5.9 ms (§1).
                      Reference(34.7, None, 5.9, 5.8, "runtime.md §10.1 §4 (encode 4 MB)")),
                "base64", (), "random", True),
        ToolRow(_pair("base64_decode", "base64 decode", BASE64, "base64", "GNU base64 -d",
                      # §10.3: static table 48 ms vs GNU 14 ms, best of five, 5.4 MB.
                      Reference(48.0, None, 14.0, None, "runtime.md §10.3 (decode 5.4 MB, best of 5)")),
                "base64", ("-d",), "encoded", True),
        ToolRow(_pair("sort", "sort ~9 MB, 300,000 lines", SORT, "sort", "LC_ALL=C sort",
                      # §4.1: bulk write_all 360.1 ms; GNU sort 62.6 ms (medians of nine).
                      Reference(360.1, None, 62.6, None, "runtime.md §10.1 §4.1 (medians of 9)")),
                "sort", (), "lines", False, (("LC_ALL", "C"),)),
    )


def make_inputs(workdir: Path, quick: bool) -> dict[str, Path]:
    """Deterministic inputs: random bytes, their base64 (76 columns, as GNU writes it), and lines
    of 5-55 random letters and digits."""
    rng = random.Random(20240607)
    size = (512 if quick else 4096) * 1024
    raw = rng.randbytes(size)
    nlines = 30_000 if quick else 300_000
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    lines = "".join("".join(rng.choices(alphabet, k=rng.randint(5, 55))) + "\n" for _ in range(nlines))
    paths = {"random": workdir / "random.bin", "encoded": workdir / "random.b64",
             "lines": workdir / "lines.txt"}
    paths["random"].write_bytes(raw)
    paths["encoded"].write_bytes(base64.encodebytes(raw))
    paths["lines"].write_text(lines, encoding="ascii")
    return paths


def _variant(name: str, argv: tuple[str, ...], row: ToolRow, inputs: dict[str, Path],
             build_ms: float | None = None, cwd: str | None = None, note: str | None = None,
             env: tuple[tuple[str, str], ...] = ()) -> Built:
    path = str(inputs[row.input])
    full = argv + row.args + (() if row.stdin else (path,))
    return Built(name, full, build_ms, cwd, note, stdin_path=path if row.stdin else None, env=env)


def run_tool_rows(cfg, workdir: Path, runner: harness.Runner) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Build, verify and time the tool rows; returns (rows, builds)."""
    from .suite import _rel, _verify, run_row  # the bulk rows' machinery, shared

    inputs = make_inputs(workdir, cfg.quick)
    sizes = {k: p.stat().st_size for k, p in inputs.items()}
    built: dict[Path, Built | str] = {}
    builds: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    plain_cfg = dataclasses.replace(cfg, expected_bytes=None)
    for row in tool_rows():
        pair = row.pair
        missing = not pair.cancho_source.exists()
        if missing:
            problem = f"unavailable: {_rel(pair.cancho_source)} missing"
        elif "exe" in cfg.backends and pair.cancho_source not in built:
            cfg.log(f"building {_rel(pair.cancho_source)}")
            try:
                built[pair.cancho_source] = cfg.build_cancho(pair.cancho_source,
                                                             workdir / f"cancho_{pair.cancho_source.stem}")
                builds.append({"program": _rel(pair.cancho_source), "builder": "cancho build",
                               "status": "ok", "ms": built[pair.cancho_source].build_ms})  # type: ignore[union-attr]
            except BuildError as exc:
                built[pair.cancho_source] = str(exc)
                builds.append({"program": _rel(pair.cancho_source), "builder": "cancho build",
                               "status": "failed", "reason": str(exc)})
        gnu: Built | None = None
        gnu_out = None
        if shutil.which(row.tool):
            gnu = _variant("C", (str(pair.c_source),), row, inputs, env=row.env)
            probe: dict[str, Any] = {"problems": []}
            gnu_out = _verify(probe, gnu, None)
        for backend in cfg.backends:
            variant: Built | None = None
            problem = None
            if missing:
                problem = f"unavailable: {_rel(pair.cancho_source)} missing"
            elif backend == "exe":
                entry = built.get(pair.cancho_source)
                if isinstance(entry, Built):
                    variant = _variant("cancho", entry.argv, row, inputs, entry.build_ms)
                else:
                    problem = str(entry)
            else:
                jit = harness.cancho_jit(pair.cancho_source)
                variant = _variant("cancho", jit.argv, row, inputs, None, jit.cwd, jit.note)
            result = run_row(pair, backend, gnu, gnu_out, variant, problem, plain_cfg, runner)
            n = sizes[row.input]
            if row.input == "lines":
                count = inputs[row.input].read_bytes().count(b"\n")
                result["title"] = f"sort {n / 1e6:.1f} MB, {count:,} lines"
            else:
                result["title"] = f"{pair.title} {n / 1e6:.1f} MB"
            result["input"] = {"file": inputs[row.input].name, "bytes": sizes[row.input],
                               "as": "stdin" if row.stdin else "operand"}
            result["command"] = " ".join([*(f"{k}={v}" for k, v in row.env), row.tool, *row.args])
            if missing:
                result["status"] = "unavailable"
                result["reason"] = problem
            rows.append(result)
    return rows, builds
