"""The authority report (runtime.md §7): exact text and JSON, reachability, foreign reach."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.authority import authority_report
from cancho_kernel.compiler.source import SourceFile

EXTERN_WRITE = """\
extern fn write[&f, &b](ffi: &f Ffi("libc"), fd: int, buf: &b [byte]) -> [ffi("libc")] int;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(io); release(fs); release(heap); release(args);
    let libc = narrow(ffi, "libc");
    borrow libc as &f in { write(f, 1, "hello\\n"); }
    release(libc);
    return 0;
}
"""

EXTERN_WRITE_TEXT = """\
UNBOUNDED: this program calls foreign code. The labels below bound it
everywhere except through the symbols under "unbounded by", and what
a symbol does is the linked library's, not the language's.
See docs/foreign-authority.md.
performs
    ffi("libc")    <- unbounded
never touches
    the console
    the filesystem
    the network
    the heap
    the command line
    signals
    other programs
unbounded by
    libc:write
"""

WRITE_ALL = """\
fn write_all[&r, &i](io: &!i Io, s: &r [byte]) -> [io_write] int {
    BODY
}
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!i in { write_all(i, "hello\\n"); }
    release(io);
    return 0;
}
"""
PER_BYTE = """var n = 0;
    while n < len(s) { putchar(io, int_of(s[n])); n = n + 1; }
    return n;"""
BULK = "return write_bytes(io, s);"

BULK_TEXT = """\
performs
    io_write
never touches
    the filesystem
    the network
    the heap
    the command line
    signals
    other programs
    foreign code
"""


def report(text: str):
    result = api.compile_sources([SourceFile("t.cho", text)])
    assert result.ok, result.diagnostics
    return authority_report(result.program)


def test_extern_write_text_is_exact():
    assert report(EXTERN_WRITE).text() == EXTERN_WRITE_TEXT


def test_extern_write_json_is_exact_and_valid():
    out = report(EXTERN_WRITE).to_json()
    data = json.loads(out)
    assert data == {"bounded": False, "unbounded_by": ["libc:write"], "effects": ["ffi"],
                    "labels": [{"name": "ffi", "argument": "libc", "bounded": False}],
                    "foreign_symbols": ["write"], "pure": [], "folded_operators": 0,
                    "folded_calls": 0, "functions": 1}
    assert list(data) == ["bounded", "unbounded_by", "effects", "labels", "foreign_symbols", "pure",
                          "folded_operators", "folded_calls", "functions"]
    assert '  "unbounded_by": [\n    "libc:write"\n  ],\n' in out
    assert '    { "name": "ffi", "argument": "libc", "bounded": false }\n' in out


def test_bulk_output_reports_io_write_only():
    rep = report(WRITE_ALL.replace("BODY", BULK))
    assert rep.text() == BULK_TEXT
    assert rep.to_dict()["functions"] == 2
    assert rep.to_dict()["foreign_symbols"] == []  # fwrite behind write_bytes is not foreign reach


def test_switching_putchar_to_write_bytes_changes_the_report_by_zero_bytes():
    before = report(WRITE_ALL.replace("BODY", PER_BYTE))
    after = report(WRITE_ALL.replace("BODY", BULK))
    assert before.text() == after.text()
    assert before.to_json() == after.to_json()


def test_only_reachable_functions_and_call_sites_count():
    text = EXTERN_WRITE.replace("fn main", """fn unused[&f](libc: &f Ffi("libc")) -> [ffi("libc")] int {
    return write(libc, 2, "never");
}
fn helper(n: int) -> [] int { return n + 1; }
fn main""").replace("return 0;", "return helper(0) - 1;")
    rep = report(text)
    assert rep.to_dict()["functions"] == 2  # main and helper; `unused` is unreachable
    assert rep.pure == ["helper"]
    assert "provably pure (1 of 2)\n    helper\n" in rep.text()


def test_nothing_performed_and_folding_counts():
    rep = report("""fn main(world: World) -> [] int {
    release(world);
    let k = 2 + 3;
    return k - 5 + byte_of_sum() - 7;
}
fn byte_of_sum() -> [] int { return int_of(byte_of(7)); }
""")
    text = rep.text()
    assert text.startswith("performs nothing\nnever touches\n    the console\n")
    # `byte_of(7)` and `int_of` of it fold; `byte_of_sum()`, a pure call on no arguments, is evaluated.
    assert "evaluated at compile time\n    1 operators\n    3 calls\n" in text


def test_cli_authority_and_refusal(tmp_path):
    good = tmp_path / "w.cho"
    good.write_text(EXTERN_WRITE)
    r = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "authority", str(good)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == EXTERN_WRITE_TEXT
    r = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "authority", "--output", "json", str(good)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["foreign_symbols"] == ["write"]
    bad = tmp_path / "bad.cho"
    bad.write_text("fn main(world: World) -> [] int { return 0; }\n")
    r = subprocess.run([sys.executable, "-m", "cancho_kernel.cli", "authority", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "linear-value-unconsumed" not in r.stdout and "error" in r.stderr


WORKED_A = """\
import std.io;
fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    borrow mut io as &!i in { io.write_all(i, "hello\\n"); }
    release(io);
    return 0;
}
"""


def test_worked_example_a_with_std_io():
    rep = report(WORKED_A)
    assert rep.text() == BULK_TEXT
    assert rep.to_dict() == {"bounded": True, "unbounded_by": [], "effects": ["io_write"],
                             "labels": [{"name": "io_write", "argument": None, "bounded": True}],
                             "foreign_symbols": [], "pure": [], "folded_operators": 0,
                             "folded_calls": 0, "functions": 2}


def example_report(*paths: str):
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    result = api.compile_sources(api.load_sources([root / p for p in paths]))
    assert result.ok, result.diagnostics
    return authority_report(result.program)


def test_serve_is_args_and_libc_unbounded_by_its_eight_symbols():
    rep = example_report("examples/serve/serve.cho", "examples/serve/sockets.cho")
    assert [str(l) for l in rep.labels] == ["args", 'ffi("libc")']
    assert rep.unbounded_by == [f"libc:{s}" for s in
                                ("accept", "bind", "close", "listen", "read", "setsockopt", "socket", "write")]
    assert not rep.bounded
    assert "never touches\n    the console\n    the filesystem\n    the network\n    the heap\n" in rep.text()


def test_sort_and_base64_reports():
    sort = example_report("examples/sort/sort.cho")
    assert [str(l) for l in sort.labels] == ["args", "err_write", "file_read", 'fs_read("")', "heap",
                                             "io_read", "io_write"]
    assert sort.untouched() == ["the network", "signals", "other programs", "foreign code"]
    b64 = example_report("examples/base64/base64.cho")
    assert b64.effects == ["args", "err_write", "io_read", "io_write"] and b64.bounded


# The dimensions editions 5 to 7 add, read off our own conformance programs: other programs
# (`exec` with its prefix, pipes, `child_signal`), signals (`signals` with the claimed set,
# `signals_read`), the network with its bound (`net_out("host:port")`), directories through
# the `Fs` prefix the `Dir` was opened under.
CONFORMANCE = __import__("pathlib").Path(__file__).resolve().parent / "conformance" / "accept"


def report_of(name: str):
    source = SourceFile.from_path(CONFORMANCE / name)
    result = api.check_sources([source])
    assert result.ok, result.diagnostics
    return authority_report(result.program)


def test_processes_and_directories_are_other_programs_and_a_prefix():
    rep = report_of("exec_echo_pipe.cho")
    assert rep.text().startswith('performs\n    child_signal\n    exec("/bin")\n    fs_read("/tmp")\n'
                                 "    io_write\n    pipe_read\n    pipe_write\nnever touches\n    the network\n"
                                 "    the heap\n    the command line\n    signals\n    foreign code\n")
    assert "other programs" not in rep.untouched() and "the filesystem" not in rep.untouched()


def test_a_signal_claim_names_its_set_and_touches_signals():
    rep = report_of("ed6_signals_claim_twice.cho")
    assert [str(l) for l in rep.labels] == ["io_write", 'signals("USR1")', "signals_read"]
    assert "signals" not in rep.untouched() and "other programs" in rep.untouched()


def test_the_network_is_reported_with_its_bound_in_text_and_json():
    rep = report_of("ed5_trap_net_host_outside_bound.cho")
    assert rep.text().startswith('performs\n    net_out("127.0.0.1:1")\nnever touches\n    the console\n')
    data = json.loads(rep.to_json())
    assert data["effects"] == ["net_out"] and data["bounded"] is True
    assert data["labels"] == [{"name": "net_out", "argument": "127.0.0.1:1", "bounded": True}]
    served = report_of("ed5_tcp_loopback.cho")
    assert {l.name for l in served.labels} >= {"net_in", "net_out", "conn_accept", "conn_read", "conn_write"}
    assert "the network" not in served.untouched()
