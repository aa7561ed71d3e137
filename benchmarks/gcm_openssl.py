"""AES-128-GCM sealing: std.gcm's hardware path, its software path, and OpenSSL (through
Python's `cryptography`), in the same run.

Rows: records of 64 B, 1 KiB and 16 KiB (13 bytes of associated data, a TLS record header's
length) under one prepared key, MiB/s for each side, each a median over interleaved runs with
min–max, and the ratio cancho / OpenSSL of the times (median of the run-by-run ratios, with
their range). The software path is measured at 16 KiB only (it is about a hundred times
slower). Each side times only its loop: the cancho program reports the elapsed `clock_ms` of
its loop (REPS chosen so a loop lasts well above the clock's millisecond), Python uses
`time.perf_counter` around `AESGCM.encrypt`. Before timing, the cancho program's sealed record
is compared byte for byte with OpenSSL's, on both paths, and a mismatch fails the run. No time
is compared with a threshold. Where the CPU has no AES-NI, `hw_aes_gcm()` is false and the
"hardware" row runs the software path (the report says which).

    python -m benchmarks.gcm_openssl [--quick] [--runs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .harness import BuildError, build_cancho
from .stats import RatioSummary, Summary, ratio_summary, summarize

PROGRAM = r"""edition 7;
// The cancho side of benchmarks/gcm_openssl.py.
//   gcm_bench PATH SIZE REPS   seals REPS records of SIZE bytes (byte i = i % 251, the key
//                              0..15, the nonce 100..111, 13 bytes of associated data 0..12)
//                              on PATH (hw: `seal_with`, sw: `seal_software`); prints
//                              "<ms> <hw>" (the loop's elapsed milliseconds, and 1 when
//                              `hw_aes_gcm()` is true)
//   gcm_bench PATH SIZE 0      prints the sealed record itself
import std.gcm;

fn number(text: &static [byte]) -> [] int {
    var n = 0;
    var k = 0;
    while k < len(text) {
        n = n * 10 + int_of(text[k]) - '0';
        k = k + 1;
    }
    return n;
}

fn print_nat[&i](io: &!i Io, n: int) -> [io_write] int {
    if n >= 10 {
        print_nat(io, n / 10);
    }
    return putchar(io, '0' + n % 10);
}

fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args, net, clock, signals, exec } = split(world);
    release(ffi); release(fs); release(net); release(signals); release(exec);
    var out = io;
    var h = heap;
    var hw_path = false;
    var size = 0;
    var reps = 0;
    borrow args as &a in {
        hw_path = int_of(arg(a, 1)[0]) == 'h';
        size = number(arg(a, 2));
        reps = number(arg(a, 3));
    }
    release(args);
    var bad = 0;
    var elapsed = 0;
    region r {
        let key = alloc_slice[r](16, byte_of(0));
        let nonce = alloc_slice[r](12, byte_of(0));
        let aad = alloc_slice[r](13, byte_of(0));
        var i = 0;
        while i < 16 { key[i] = byte_of(i); i = i + 1; }
        i = 0;
        while i < 12 { nonce[i] = byte_of(100 + i); i = i + 1; }
        i = 0;
        while i < 13 { aad[i] = byte_of(i); i = i + 1; }
        let ctx = alloc_slice[r](gcm.context_len(), 0);
        let hw = alloc_slice[r](gcm.hw_len(), byte_of(0));
        gcm.prepare(key, ctx, hw);
        borrow mut h as &!hh in {
            let text = box_slice(hh, size, byte_of(0));
            let sealed = box_slice(hh, size + 16, byte_of(0));
            borrow mut text as &!tw in {
                let t = contents(tw);
                i = 0;
                while i < size { t[i] = byte_of(i % 251); i = i + 1; }
            }
            borrow text as &p in {
                borrow mut sealed as &!o in {
                    var count = reps;
                    if count == 0 { count = 1; }
                    var t0 = 0;
                    borrow clock as &c0 in { t0 = clock_ms(c0); }
                    var k = 0;
                    while k < count {
                        if hw_path {
                            bad = bad + gcm.seal_with(ctx, hw, nonce, aad, contents(p), contents(o));
                        } else {
                            bad = bad + gcm.seal_software(ctx, nonce, aad, contents(p), contents(o));
                        }
                        k = k + 1;
                    }
                    borrow clock as &c1 in { elapsed = clock_ms(c1) - t0; }
                    borrow mut out as &!w in {
                        if reps == 0 {
                            write_bytes(w, contents(o));
                        } else {
                            print_nat(w, elapsed);
                            putchar(w, ' ');
                            if hw_aes_gcm() { putchar(w, '1'); } else { putchar(w, '0'); }
                            putchar(w, 10);
                        }
                    }
                }
            }
            unbox_slice(hh, text);
            unbox_slice(hh, sealed);
        }
    }
    release(h);
    release(clock);
    release(out);
    return bad;
}
"""

KEY, NONCE, AAD = bytes(range(16)), bytes(range(100, 112)), bytes(range(13))


@dataclass(frozen=True)
class Sizes:
    """Record sizes and how many megabytes each timed loop seals."""

    records: tuple[int, ...]
    mib_hw: float
    mib_sw: float


FULL = Sizes((64, 1024, 16384), 64.0, 2.0)
QUICK = Sizes((64, 16384), 4.0, 0.25)


@dataclass(frozen=True)
class Row:
    """One row: a record size and path, both sides' MiB/s, and cancho's time over OpenSSL's."""

    name: str
    cancho_mibs: Summary
    openssl_mibs: Summary
    ratio: RatioSummary

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "cancho_mib_s": self.cancho_mibs.to_json(),
                "openssl_mib_s": self.openssl_mibs.to_json(), "ratio": self.ratio.to_json()}


def plaintext(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


def _cancho(exe: Path, path: str, size: int, reps: int) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(exe), path, str(size), str(reps)], capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"gcm_bench {path} {size} {reps} exited {proc.returncode}: {proc.stderr[-300:]!r}")
    return proc


def check_bytes(exe: Path, sizes: Sizes) -> None:
    """Both paths seal each record size as OpenSSL does, before anything is timed."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    for size in sizes.records:
        want = AESGCM(KEY).encrypt(NONCE, plaintext(size), AAD)
        for path in ("hw", "sw"):
            if _cancho(exe, path, size, 0).stdout != want:
                raise RuntimeError(f"the {path} path sealed {size} bytes unlike OpenSSL")


def _openssl_ms(size: int, reps: int) -> float:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead, text = AESGCM(KEY), plaintext(size)
    t0 = time.perf_counter()
    for _ in range(reps):
        aead.encrypt(NONCE, text, AAD)
    return (time.perf_counter() - t0) * 1e3


def measure(exe: Path, sizes: Sizes, runs: int) -> tuple[list[Row], dict[str, Any]]:
    """Interleaved runs per row; each sample is one loop's milliseconds."""
    rows, hw_seen = [], set()
    plan = [(size, "hw", sizes.mib_hw) for size in sizes.records] + [(sizes.records[-1], "sw", sizes.mib_sw)]
    for size, path, mib in plan:
        reps = max(1, int(mib * 2**20 / size))
        ours, theirs = [], []
        for _ in range(runs):
            ms, hw = _cancho(exe, path, size, reps).stdout.split()
            hw_seen.add(hw == b"1")
            ours.append(max(float(ms), 1.0))
            theirs.append(max(_openssl_ms(size, reps), 1e-3))
        mibs = lambda samples: summarize([reps * size / 2**20 / (ms / 1e3) for ms in samples])  # noqa: E731
        rows.append(Row(f"{path} {size} B", mibs(ours), mibs(theirs), ratio_summary(ours, theirs)))
    return rows, {"hw_aes_gcm": sorted(hw_seen), "runs": runs}


def render(rows: list[Row], facts: dict[str, Any]) -> str:
    head = (f"AES-128-GCM seal, MiB/s (median [min–max] of {facts['runs']} runs); hw_aes_gcm() "
            f"{'true' if facts['hw_aes_gcm'] == [True] else 'false'} on this CPU")
    lines = [head, f"{'row':<14}{'cancho':>28}{'OpenSSL':>30}{'cancho / OpenSSL (time)':>34}"]
    for r in rows:
        c, o, q = r.cancho_mibs, r.openssl_mibs, r.ratio
        lines.append(f"{r.name:<14}{c.median:>10.1f} [{c.min:.1f}–{c.max:.1f}]{o.median:>14.1f} "
                     f"[{o.min:.1f}–{o.max:.1f}]{q.paired_median:>14.2f}x [{q.paired_min:.2f}–{q.paired_max:.2f}]")
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gcm_openssl", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, less data (a smoke run)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per row (default 5, quick 2)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    opts = parser.parse_args(argv)
    sizes = QUICK if opts.quick else FULL
    runs = opts.runs if opts.runs is not None else (2 if opts.quick else 5)
    if runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="cancho-gcm-bench-") as tmp:
        source = Path(tmp) / "gcm_bench.cho"
        source.write_text(PROGRAM)
        try:
            built = build_cancho(source, Path(tmp) / "gcm_bench")
            exe = Path(built.argv[0])
            check_bytes(exe, sizes)
            rows, facts = measure(exe, sizes, runs)
        except (BuildError, RuntimeError, subprocess.TimeoutExpired) as exc:
            out(f"failed: {exc}")
            return 1
    out(render(rows, facts))
    if opts.json is not None:
        opts.json.write_text(json.dumps({"schema": "cancho-gcm-openssl/1", "facts": facts,
                                         "rows": [r.to_json() for r in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
