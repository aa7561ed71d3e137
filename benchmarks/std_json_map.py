"""std.json and std.map against Python's json and dict, on the same data.

Rows (each a median over interleaved runs, with min–max, and the ratio cancho / Python of the
medians plus the spread of the run-by-run ratios):

* ``json parse+serialise``: a generated document (records with escaped and non-ASCII strings,
  integers, three-decimal floats, booleans, nulls, nested arrays and objects; ~2 MB, ~200 KB with
  ``--quick``) parsed and written back compact. Cancho: ``json.parse`` onto a tape, then a walk of
  the tape through ``json.Writer`` (strings decoded when they hold an escape, numbers through
  ``to_int``/``to_float``). Python: ``json.loads`` then ``json.dumps(separators=(",", ":"),
  ensure_ascii=False).encode()``.
* ``map inserts`` / ``map lookups``: N keys ``key-<i>`` (100,000; 20,000 with ``--quick``) put
  into a fresh map, then every key looked up; the key text is built inside both loops. Cancho:
  ``std.map``; Python: a ``dict`` of ``str``.

Each side times only its loop, in-process: the cancho program reads the document first and
reports the elapsed ``clock_ms`` of REPS rounds (the builtin's resolution is a millisecond, so
REPS is chosen to make a run last well above that); Python uses ``time.perf_counter``. Before
timing, the cancho program's compact output is compared byte for byte with Python's, and a
mismatch fails the run (exit status 1). No time is compared with a threshold.

    python -m benchmarks.std_json_map [--quick] [--runs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .harness import BuildError, build_cancho
from .stats import RatioSummary, Summary, ratio_summary, summarize

# The cancho side: one program with three modes (written out and built for each run of this
# module, so it always uses this checkout's compiler and std).
PROGRAM = r"""edition 5;
// The cancho side of benchmarks/std_json_map.py.
//   std_bench json REPS   reads a JSON document on stdin; REPS times parses it and writes it
//                         back compact with the writer; prints "<ms> <bytes>" (the loop's
//                         elapsed milliseconds and the serialised length)
//   std_bench emit        the same once, printing the serialised document itself
//   std_bench map N REPS  REPS times: N puts of "key-<i>" -> i into a fresh map, then N gets;
//                         prints "<insert ms> <lookup ms> <checksum>"
import std.json;
import std.map;
import std.buffer;
import std.fmt;

fn read_stdin[&h, &i](heap: &!h Heap, io: &!i Io, text: buffer.Buffer) -> [heap, io_read] buffer.Buffer {
    var t = text;
    var going = true;
    while going {
        t = buffer.reserve(heap, t, 65536);
        borrow mut t as &!b in {
            let room = buffer.room(b);
            var k = 0;
            while going && k < len(room) {
                let c = getchar(io);
                if c < 0 {
                    going = false;
                } else {
                    room[k] = byte_of(c);
                    k = k + 1;
                }
            }
            buffer.filled(b, k);
        }
    }
    return t;
}

// The string at node i as a key or a value: its source bytes when it has no escape, else
// decoded into a heap scratch.
fn put_text[&h, &s, &t](heap: &!h Heap, w: json.Writer, src: &s [byte], tape: &t [int], i: int, key: bool) -> [heap] json.Writer {
    if json.string_plain(tape, i) {
        if key {
            return json.put_key(heap, w, json.string_view(src, tape, i));
        }
        return json.put_string(heap, w, json.string_view(src, tape, i));
    }
    let scratch = box_slice(heap, json.string_length(src, tape, i), byte_of(0));
    borrow mut scratch as &!sw in {
        json.string_into(src, tape, i, contents(sw));
    }
    var out = w;
    borrow scratch as &sr in {
        if key {
            out = json.put_key(heap, out, contents(sr));
        } else {
            out = json.put_string(heap, out, contents(sr));
        }
    }
    unbox_slice(heap, scratch);
    return out;
}

// Node i and everything inside it, through the writer.
fn emit[&h, &s, &t](heap: &!h Heap, w: json.Writer, src: &s [byte], tape: &t [int], i: int) -> [heap] json.Writer {
    let k = json.kind(tape, i);
    if k == 6 || k == 7 {
        var out = w;
        if k == 6 {
            out = json.begin_array(heap, out);
        } else {
            out = json.begin_object(heap, out);
        }
        var j = i + 1;
        var left = json.count(tape, i);
        while left > 0 {
            if k == 7 {
                out = put_text(heap, out, src, tape, j, true);
                j = j + 1;
            }
            out = emit(heap, out, src, tape, j);
            j = json.skip(tape, j);
            left = left - 1;
        }
        if k == 6 {
            return json.end_array(heap, out);
        }
        return json.end_object(heap, out);
    }
    if k == 5 {
        return put_text(heap, w, src, tape, i, false);
    }
    if k == 3 {
        return json.put_int(heap, w, json.to_int(src, tape, i));
    }
    if k == 4 {
        return json.put_float(heap, w, json.to_float(src, tape, i));
    }
    if k == 2 || k == 1 {
        return json.put_bool(heap, w, k == 2);
    }
    return json.put_null(heap, w);
}

// Parses `src` and writes it back compact: the document, or an empty buffer when it does not
// parse (the caller then reports the failure).
fn round_trip[&h, &s](heap: &!h Heap, src: &s [byte]) -> [heap] buffer.Buffer {
    let tape = box_slice(heap, json.tape_len(src), 0);
    var nodes = 0;
    borrow mut tape as &!tw in {
        nodes = json.parse(src, contents(tw));
    }
    var w = json.writer(heap, len(src));
    if nodes > 0 {
        borrow tape as &tr in {
            w = emit(heap, w, src, contents(tr), 0);
        }
    }
    unbox_slice(heap, tape);
    return json.finish(w);
}

fn print_ints[&i](io: &!i Io, a: int, b: int, c: int, three: bool) -> [io_write] int {
    region r {
        let out = alloc_slice[r](80, byte_of(' '));
        var at = fmt.put_int(out, 0, a);
        at = fmt.put_int(out, at + 1, b);
        if three {
            at = fmt.put_int(out, at + 1, c);
        }
        out[at] = byte_of(10);
        write_bytes(io, out[0..at + 1]);
    }
    return 0;
}

fn number_arg[&a](args: &a Args, n: int) -> [args] int {
    let text = arg(args, n);
    var v = 0;
    var k = 0;
    while k < len(text) {
        v = 10 * v + (int_of(text[k]) - '0');
        k = k + 1;
    }
    return v;
}

fn run_json[&h, &i, &c](heap: &!h Heap, io: &!i Io, clock: &c Clock, reps: int, emit_doc: bool) -> [heap, io_read, io_write, clock] int {
    let text = read_stdin(heap, io, buffer.empty(heap, 0));
    var status = 0;
    borrow text as &tb in {
        let src = buffer.bytes(tb);
        if emit_doc {
            let doc = round_trip(heap, src);
            borrow doc as &d in {
                write_bytes(io, buffer.bytes(d));
                if buffer.size(d) == 0 {
                    status = 1;
                }
            }
            buffer.drop(heap, doc);
        } else {
            let start = clock_ms(clock);
            var size = 0;
            var n = 0;
            while n < reps {
                let doc = round_trip(heap, src);
                size = buffer.drop(heap, doc);
                n = n + 1;
            }
            print_ints(io, clock_ms(clock) - start, size, 0, false);
        }
    }
    buffer.drop(heap, text);
    return status;
}

// "key-<i>" into key; answers its length.
fn key_of[&o](key: &!o [byte], i: int) -> [] int {
    let at = fmt.put(key, 0, "key-");
    return fmt.put_int(key, at, i);
}

fn run_map[&h, &i, &c](heap: &!h Heap, io: &!i Io, clock: &c Clock, n: int, reps: int) -> [heap, io_write, clock] int {
    var insert_ms = 0;
    var lookup_ms = 0;
    var sum = 0;
    region r {
        let key = alloc_slice[r](32, byte_of(0));
        var round = 0;
        while round < reps {
            let t0 = clock_ms(clock);
            var m = map.empty(heap, 0, 0, 0);
            var i = 0;
            while i < n {
                let w = key_of(key, i);
                m = map.put(heap, m, key[0..w], i);
                i = i + 1;
            }
            let t1 = clock_ms(clock);
            borrow m as &mr in {
                i = 0;
                while i < n {
                    let w = key_of(key, i);
                    sum = sum + map.get(mr, key[0..w], 0 - 1);
                    i = i + 1;
                }
            }
            let t2 = clock_ms(clock);
            insert_ms = insert_ms + t1 - t0;
            lookup_ms = lookup_ms + t2 - t1;
            map.drop(heap, m);
            round = round + 1;
        }
    }
    return print_ints(io, insert_ms, lookup_ms, sum, true);
}

fn run[&h, &a, &i, &c](heap: &!h Heap, args: &a Args, io: &!i Io, clock: &c Clock) -> [heap, args, io_read, io_write, clock] int {
    let mode = arg(args, 1);
    if len(mode) == 4 && int_of(mode[0]) == 'j' {
        return run_json(heap, io, clock, number_arg(args, 2), false);
    }
    if len(mode) == 4 && int_of(mode[0]) == 'e' {
        return run_json(heap, io, clock, 1, true);
    }
    return run_map(heap, io, clock, number_arg(args, 2), number_arg(args, 3));
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock } = split(world);
    release(ffi);
    release(fs);
    release(net);
    var status = 0;
    borrow mut heap as &!h in {
        borrow args as &a in {
            borrow mut io as &!i in {
                borrow clock as &c in {
                    status = run(h, a, i, c);
                }
            }
        }
    }
    release(heap);
    release(args);
    release(io);
    release(clock);
    return status;
}
"""


@dataclass(frozen=True)
class Sizes:
    """How much work one run does."""

    json_records: int
    json_reps: int
    map_keys: int
    map_reps: int


FULL = Sizes(json_records=6000, json_reps=3, map_keys=100_000, map_reps=5)
QUICK = Sizes(json_records=600, json_reps=3, map_keys=20_000, map_reps=5)

WORDS = ("alpha", "beta", "gamma", "delta", "caf\u00e9", "na\u00efve", "\u65e5\u672c",
         "\U0001f600 smile", "tab\there", "quote\"d", "back\\slash", "line\nbreak",
         "ctl\x01x", "slash/ok", "")


def make_document(records: int, seed: int = 20261201) -> bytes:
    """A deterministic JSON document of ``records`` records, indented, non-ASCII escaped.

    Floats have at most three decimals and magnitudes in [0.001, 1e6), where Python's repr and
    the cancho writer lay numbers out alike, so the two compact outputs can be compared byte
    for byte.
    """
    rnd = random.Random(seed)

    def text() -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))

    def number() -> float:
        return round(rnd.uniform(0.001, 999_999.0), rnd.randint(1, 3)) * rnd.choice((1, -1))

    rows = []
    for i in range(records):
        rows.append({
            "id": i,
            "name": text(),
            "score": number(),
            "big": rnd.randint(-2**53, 2**53),
            "active": rnd.random() < 0.5,
            "parent": None if rnd.random() < 0.3 else rnd.randint(0, records),
            "tags": [text() for _ in range(rnd.randint(0, 5))],
            "geo": {"lat": number(), "lon": number(), "path": [rnd.randint(0, 999) for _ in range(8)]},
            text() + "_k": {"nested": [[], {}, [number(), None, True]]},
        })
    return json.dumps({"version": 1, "rows": rows}, indent=1, ensure_ascii=True).encode()


def python_round_trip(doc: bytes) -> bytes:
    return json.dumps(json.loads(doc), separators=(",", ":"), ensure_ascii=False).encode()


def python_json_ms(doc: bytes, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        python_round_trip(doc)
    return (time.perf_counter() - t0) * 1e3


def python_map_ms(n: int, reps: int) -> tuple[float, float, int]:
    """Insert and lookup milliseconds over ``reps`` rounds, and the lookups' checksum."""
    insert = lookup = 0.0
    total = 0
    for _ in range(reps):
        t0 = time.perf_counter()
        d: dict[str, int] = {}
        for i in range(n):
            d[f"key-{i}"] = i
        t1 = time.perf_counter()
        for i in range(n):
            total += d.get(f"key-{i}", -1)
        t2 = time.perf_counter()
        insert += t1 - t0
        lookup += t2 - t1
    return insert * 1e3, lookup * 1e3, total


def run_program(exe: Path, args: list[str], stdin: bytes = b"") -> bytes:
    proc = subprocess.run([str(exe), *args], input=stdin, capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{exe.name} {' '.join(args)} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[:500]}")
    return proc.stdout


@dataclass(frozen=True)
class Row:
    """One measured row: per-round milliseconds for each side."""

    name: str
    cancho_ms: Summary
    python_ms: Summary
    ratio: RatioSummary

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "cancho_ms": self.cancho_ms.to_json(),
                "python_ms": self.python_ms.to_json(), "ratio_cancho_over_python": self.ratio.to_json()}


def _row(name: str, cancho: list[float], python: list[float]) -> Row:
    return Row(name, summarize(cancho), summarize(python), ratio_summary(cancho, python))


def measure(exe: Path, sizes: Sizes, runs: int) -> tuple[list[Row], dict[str, Any]]:
    """Verify, then time both sides interleaved (one warm-up round each, not recorded)."""
    doc = make_document(sizes.json_records)
    want = python_round_trip(doc)
    got = run_program(exe, ["emit"], doc)
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise RuntimeError(f"cancho's document differs from Python's at byte {at}: "
                           f"{got[max(0, at - 40):at + 40]!r} vs {want[max(0, at - 40):at + 40]!r}")
    n, reps = sizes.map_keys, sizes.map_reps
    c_ins, c_look, c_sum = (int(x) for x in run_program(exe, ["map", str(n), "1"]).split())
    p_ins, p_look, p_sum = python_map_ms(n, 1)
    if c_sum != p_sum:
        raise RuntimeError(f"map checksums differ: cancho {c_sum}, python {p_sum}")
    samples: dict[str, list[float]] = {k: [] for k in ("cj", "pj", "ci", "pi", "cl", "pl")}
    for _ in range(runs):
        ms, size = (int(x) for x in run_program(exe, ["json", str(sizes.json_reps)], doc).split())
        if size != len(want):
            raise RuntimeError(f"cancho wrote {size} bytes, Python {len(want)}")
        samples["cj"].append(ms / sizes.json_reps)
        samples["pj"].append(python_json_ms(doc, sizes.json_reps) / sizes.json_reps)
        c_ins, c_look, _ = (int(x) for x in run_program(exe, ["map", str(n), str(reps)]).split())
        samples["ci"].append(c_ins / reps)
        samples["cl"].append(c_look / reps)
        p_ins, p_look, _ = python_map_ms(n, reps)
        samples["pi"].append(p_ins / reps)
        samples["pl"].append(p_look / reps)
    # The cancho clock counts whole milliseconds over all rounds of a run: a reading of 0 means
    # under one, so it is floored at that resolution (and a ratio stays defined).
    for key, rounds in (("cj", sizes.json_reps), ("ci", reps), ("cl", reps)):
        samples[key] = [max(x, 1.0 / rounds) for x in samples[key]]
    rows = [
        _row(f"json parse+serialise ({len(doc) / 1e6:.2f} MB)", samples["cj"], samples["pj"]),
        _row(f"map inserts ({n:,} keys)", samples["ci"], samples["pi"]),
        _row(f"map lookups ({n:,} keys)", samples["cl"], samples["pl"]),
    ]
    facts = {"document_bytes": len(doc), "compact_bytes": len(want), "map_keys": n,
             "json_reps": sizes.json_reps, "map_reps": reps, "runs": runs}
    return rows, facts


def render(rows: list[Row], facts: dict[str, Any]) -> str:
    def span(s: Summary) -> str:
        return f"{s.median:9.2f} [{s.min:.2f}–{s.max:.2f}]"

    lines = [f"std.json / std.map against Python {sys.version.split()[0]} json / dict "
             f"({facts['runs']} runs, ms per round, median [min–max])",
             f"{'row':<36} {'cancho':>24} {'python':>24}  ratio (paired min–max)"]
    for r in rows:
        lines.append(f"{r.name:<36} {span(r.cancho_ms):>24} {span(r.python_ms):>24}  "
                     f"{r.ratio.of_medians:.2f}x ({r.ratio.paired_min:.2f}–{r.ratio.paired_max:.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.std_json_map", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs (a smoke run)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per side (default 7, quick 3)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    opts = parser.parse_args(argv)
    sizes = QUICK if opts.quick else FULL
    runs = opts.runs if opts.runs is not None else (3 if opts.quick else 7)
    if runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="cancho-std-bench-") as tmp:
        source = Path(tmp) / "std_bench.cho"
        source.write_text(PROGRAM)
        try:
            built = build_cancho(source, Path(tmp) / "std_bench")
        except BuildError as exc:
            out(f"build failed: {exc}")
            return 1
        try:
            rows, facts = measure(Path(built.argv[0]), sizes, runs)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            out(f"failed: {exc}")
            return 1
    out(render(rows, facts))
    if opts.json is not None:
        opts.json.write_text(json.dumps({"schema": "cancho-std-json-map/1", "facts": facts,
                                         "rows": [r.to_json() for r in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
