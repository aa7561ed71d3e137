"""Completion and inspection (Shift-Tab) of every name a cell can use: builtins at the cell's
edition, the session's and the cell's own items, std members through their module alias, prelude
types, keywords and directives; the innermost open call's callee; bounded work on huge words; and
the same through a real kernel (complete_request / inspect_request)."""

from __future__ import annotations

from pathlib import Path

import json
import subprocess
import sys
import textwrap

import pytest
from kernel_client import run

from cancho_kernel.compiler.symbols import StdSymbols
from cancho_kernel.kernel import completion as C
from cancho_kernel.kernel.session import Session

SESSION_CELL = """import std.fmt;

// Adds one to `x`.
// Never traps below the largest int.
fn inc(x: int) -> [] int { return x + 1; }

// A point on the grid.
struct Point { x: int, y: int }

enum Shape { Dot, Circle(int) }

static primes: [int] {
    let t = alloc_slice[static](3, 2);
    return t;
}
"""


@pytest.fixture(scope="module")
def std() -> StdSymbols:
    return StdSymbols()


@pytest.fixture()
def session() -> Session:
    s = Session()
    out = s.process(s.new_source(SESSION_CELL), compile=False)
    assert out.ok, out.diagnostics
    s.commit(out)
    return s


def tip(code: str, session: Session, std: StdSymbols, pos: int | None = None) -> str | None:
    """The text/plain Shift-Tab shows with the cursor at `pos` (default: the end), or None."""
    r = C.inspect(code, len(code) if pos is None else pos, session, std)
    assert r["status"] == "ok"
    if not r["found"]:
        return None
    assert set(r["data"]) == {"text/plain", "text/markdown"}
    return r["data"]["text/plain"]


def kinds(reply: dict) -> dict[str, str]:
    """Match -> its JupyterLab kind, checking the typed entries agree with the matches."""
    types = reply["metadata"]["_jupyter_types_experimental"]
    assert [t["text"] for t in types] == reply["matches"]
    assert all((t["start"], t["end"]) == (reply["cursor_start"], reply["cursor_end"]) for t in types)
    return {t["text"]: t["type"] for t in types}


# -- inspection ---------------------------------------------------------------------------------------


def test_split_right_after_its_paren_shows_the_builtin_with_the_cells_split(session, std):
    text = tip("fn main(world: World) -> [] int {\n    let s = split(", session, std)
    assert text is not None and text.startswith("fn split(world: World) -> [] Split")
    assert "{ io: Io, ffi: Ffi, fs: Fs, heap: Heap, args: Args }" in text
    assert text.endswith("builtin, edition 1")
    text7 = tip("edition 7;\nfn main(world: World) -> [] int {\n    let s = split(", session, std)
    assert text7 is not None and "exec: Exec" in text7 and "exec" not in text


IO_CELL = 'import std.io;\nfn f[&i](o: &!i Io) -> [io_write] int {\n    return io.write_all(o, "(hi");\n}\n'


@pytest.mark.parametrize("where", ["middle", "end", "after-paren", "among-args", "in-string-arg"])
def test_std_function_through_an_import_in_the_same_cell(session, std, where):
    at = IO_CELL.index("write_all")
    pos = {"middle": at + 4, "end": at + len("write_all"), "after-paren": at + len("write_all("),
           "among-args": IO_CELL.index(", ") + 2, "in-string-arg": IO_CELL.index("(hi") + 2}[where]
    text = tip(IO_CELL, session, std, pos)
    assert text is not None
    lines = text.split("\n")
    assert lines[0] == "pub fn write_all[&r, &i](io: &!i Io, s: &r [byte]) -> [io_write] int"
    assert "Writes every byte of `s` to stdout in one call" in text  # its doc comment
    assert lines[-1] == "fn `write_all`, defined at std/io.cho:9 (module std.io)"


def test_std_function_through_the_sessions_import_with_markdown(session, std):
    r = C.inspect("x = fmt.put_int(out, 0, ", 20, session, std)
    assert r["found"]
    plain, md = r["data"]["text/plain"], r["data"]["text/markdown"]
    assert plain.startswith("pub fn put_int[&o](out: &!o [byte], at: int, n: int) -> [] int")
    assert "std/fmt.cho:" in plain
    assert md.startswith("```cancho\npub fn put_int[&o]") and "Writes `n` in decimal" in md
    # not imported anywhere: the alias means nothing
    assert tip("vec.Vec", session, std) is None
    assert tip("import std.vec;\nvec.Vec", session, std).startswith("pub res struct Vec[T: val] {")


def test_private_std_items_are_not_reachable(session, std):
    assert tip("import std.io;\nio.put_negative(", session, std) is None


def test_the_module_alias_itself(session, std):
    text = tip("import std.io as out;\nout.write_all", session, std, pos=23)
    assert text is not None and text.startswith("import std.io as out;")
    assert "std.io: console output helpers" in text and text.endswith("module std.io, std/io.cho")
    assert tip("import std.io;\nio.", session, std).startswith("import std.io;")


def test_session_items_with_where_and_doc(session, std):
    text = tip("let y = inc(", session, std)
    assert text == "fn inc(x: int) -> [] int\n\nAdds one to `x`.\nNever traps below the largest int.\n\n" \
                   "fn `inc`, defined at cell[1]:5"
    text = tip("let p = Point { x: 1", session, std, pos=10)
    assert text is not None and text.startswith("struct Point { x: int, y: int }")
    assert "A point on the grid." in text and text.endswith("defined at cell[1]:8")
    assert tip("Shape::Circle(", session, std).startswith("enum Shape { Dot, Circle(int) }")
    assert tip("primes", session, std).startswith("static primes: [int]")


def test_the_cells_own_declarations_parsed_or_not(session, std):
    cell = "// Twice x.\nfn twice(x: int) -> [] int { return 2 * x; }\nfn main(world: World) -> [] int {\n" \
           "    release(world);\n    return twice(1);\n}\n"
    text = tip(cell, session, std, pos=cell.index("twice(1)") + 3)
    assert text == "fn twice(x: int) -> [] int\n\nTwice x.\n\nfn `twice`, defined at this cell:2"
    unfinished = "fn twice(x: int) -> [] int { return 2 * x; }\nfn main(world: World) -> [] int {\n    twice("
    assert tip(unfinished, session, std).startswith("fn twice(x: int) -> [] int")


def test_innermost_open_call(session, std):
    assert tip("inc(putchar(io, ", session, std).startswith("fn putchar[&i]")
    assert tip("inc(putchar(io, 1), ", session, std).startswith("fn inc(")
    assert tip("inc(putchar(io, ')'), ", session, std).startswith("fn inc(")
    assert tip("inc(x) // putchar(", session, std) is None  # in a comment: no call is open
    assert tip("while inc(1) > 0 { ", session, std) is None  # in a block, not in a call
    assert tip("let r = alloc_slice[a](", session, std).startswith("alloc_slice[a](count: int, fill: T)")


def test_builtins_by_edition_prelude_types_and_keywords(session, std):
    assert tip("edition 5;\nflush_out(", session, std).split("\n")[-1] == "builtin, edition 5"
    hidden = tip("flush_out(", session, std)
    assert hidden is not None and "not visible here: needs `edition 5;` (this cell is at edition 1)" in hidden
    assert tip("Io", session, std).startswith("capability Io")
    assert tip("let r: Read", session, std).startswith("enum Read { Got(int), End, Failed(int) }")
    assert tip("Fs", session, std).startswith("capability Fs(prefix)")
    assert tip("while", session, std, pos=2).startswith("while COND { ... }")
    assert tip("edition", session, std, pos=0).startswith("edition N;")
    assert tip("zzz", session, std) is None
    assert tip("", session, std) is None


def test_directive_help(session, std):
    text = tip("%%run --backend exe\nfn main", session, std, pos=3)
    assert text is not None and text.startswith("%%run [--backend jit|exe]")
    assert tip("%%run --backend exe", session, std, pos=10) is None  # an option, not a name


def test_a_session_module_through_its_import(std):
    s = Session()
    for text in ("module geo;\n// Width times height.\npub fn area(w: int, h: int) -> [] int { return w * h; }\n"
                 "fn hidden() -> [] int { return 1; }",
                 "import geo;\nfn f() -> [] int { return geo.area(1, 2); }"):
        out = s.process(s.new_source(text), compile=False)
        assert out.ok, out.diagnostics
        s.commit(out)
    assert C.complete("geo.", 4, s, std)["matches"] == ["area"]  # `hidden` is not pub
    text = tip("geo.area(", s, std)
    assert text == ("pub fn area(w: int, h: int) -> [] int\n\nWidth times height.\n\n"
                    "fn `area`, defined at cell[1]:3 (module geo)")
    assert tip("geo.hidden(", s, std) is None
    assert tip("geo", s, std) == "import geo;\n\nmodule geo, defined in the session's cells"
    assert C.complete("module geo;\nhid", 15, s, std)["matches"] == ["hidden"]  # inside the module


def test_call_site_builtins_have_signatures(session, std):
    text = tip("open_read(", session, std)
    assert text is not None
    assert text.startswith('fn open_read[&f, &a](fs: &f Fs("p"), path: &a [byte]) -> [fs_read("p")] Opened')
    assert tip("release(", session, std).startswith("fn release[C](c: C) -> [] int")
    connect = tip("edition 2;\nconnect(", session, std)
    assert connect is not None and connect.startswith('fn connect[&n, &h](net: &n Net("p")')
    assert "not supported" not in connect


def test_std_modules_are_parsed_once(std):
    first = std.module("std.io")
    assert first is not None and std.module("std.io") is first
    assert std.module("std.nope") is None and std.members("std.nope") == {}
    assert "std.io" in std.module_names() and "std.vec" in std.module_names()


# -- completion ----------------------------------------------------------------------------------------


def test_members_after_a_module_alias(session, std):
    code = "import std.io;\nio."
    r = C.complete(code, len(code), session, std)
    assert {"write_all", "print_int", "newline", "width"} <= set(r["matches"])
    assert "put_negative" not in r["matches"]  # not pub
    assert (r["cursor_start"], r["cursor_end"]) == (len(code), len(code))
    code = "import std.io;\nfn f() -> [] int { return io.pri"
    r = C.complete(code, len(code), session, std)
    assert r["matches"] == ["print_int", "print_nat", "print_pad"]
    assert r["cursor_start"] == len(code) - 3
    assert set(kinds(r).values()) == {"function"}
    sig = r["metadata"]["_jupyter_types_experimental"][0]["signature"]
    assert sig == "pub fn print_int[&i](io: &!i Io, n: int) -> [io_write] int"
    r = C.complete("fmt.put_i", 9, session, std)  # the session's import
    assert r["matches"] == ["put_int"] and r["cursor_start"] == 4
    code = "import std.vec;\nvec.V"
    r = C.complete(code, len(code), session, std)
    assert kinds(r) == {"Vec": "class"}


def test_plain_words_with_kinds(session, std):
    r = C.complete("let y = i", 9, session, std)
    k = kinds(r)
    assert k["inc"] == "function" and k["if"] == "keyword" and k["int"] == "class" and k["import"] == "keyword"
    assert k["int_of"] == "function" and k["is_nan"] == "function"
    assert kinds(C.complete("Po", 2, session, std))["Point"] == "class"
    assert kinds(C.complete("pri", 3, session, std))["primes"] == "instance"
    assert kinds(C.complete("fm", 2, session, std)) == {"fmt": "module"}
    assert kinds(C.complete("import std.io;\nfn f() { i", 25, session, std))["io"] == "module"
    assert kinds(C.complete("Fi", 2, session, std)) == {"File": "class"}
    assert kinds(C.complete("Ne", 2, session, std)) == {}  # Net is edition 2
    assert kinds(C.complete("edition 2;\nNe", 13, session, std)) == {"Net": "class"}
    r = C.complete("fn helper_one() -> [] int { return 1; }\nhelper", 47, session, std)
    assert kinds(r) == {"helper_one": "function"}
    r = C.complete("let total = 1;\nto", 17, session, std)
    assert kinds(r) == {"total": "text"}


def test_edition_gated_builtin(session, std):
    assert "flush_out" not in C.complete("flu", 3, session, std)["matches"]
    r = C.complete("edition 5;\nflu", 14, session, std)
    assert kinds(r) == {"flush_out": "function"}
    assert "leading_zeros" not in C.complete("edition 7;\nlead", 15, session, std)["matches"]
    assert "leading_zeros" in C.complete("edition 8;\nlead", 15, session, std)["matches"]


def test_enum_variants_modules_and_directives(session, std):
    r = C.complete("Shape::", 7, session, std)
    assert r["matches"] == ["Circle", "Dot"] and kinds(r)["Circle"] == "property"
    assert C.complete("Opened::F", 9, session, std)["matches"] == ["Failed"]
    r = C.complete("import std.f", 12, session, std)
    # every std module whose name starts with `f`, from the std directory itself (issue 27 added field25519*)
    from cancho_kernel import testing
    expected = sorted(f"std.{p.stem}" for p in (Path(testing.__file__).parent / "std").glob("f*.cho"))
    assert r["matches"] == expected and {"std.flags", "std.fmt", "std.fmt32"} <= set(expected) and r["cursor_start"] == 7
    r = C.complete("%%ru", 4, session, std)
    assert kinds(r) == {"%%run": "magic"} and r["cursor_start"] == 0


# -- bounded work ---------------------------------------------------------------------------------------


class CountingChars:
    """Stands in for the identifier character set and counts the characters the scans test."""

    def __init__(self, chars) -> None:
        self.chars, self.tested = chars, 0

    def __contains__(self, c: str) -> bool:
        self.tested += 1
        return c in self.chars


def test_a_100000_character_word_is_scanned_at_most_a_window(session, std, monkeypatch):
    counter = CountingChars(C._IDENT_CHARS)
    monkeypatch.setattr(C, "_IDENT_CHARS", counter)
    word = "x" * 100_000
    r = C.complete(word, len(word), session, std)
    assert r["matches"] == [] and r["cursor_start"] == r["cursor_end"] == len(word)
    assert 0 < counter.tested <= 2 * C.WINDOW + 2
    counter.tested = 0
    assert not C.inspect(word, 50_000, session, std)["found"]
    assert counter.tested <= 4 * C.WINDOW + 4
    # a short word after a huge line still completes
    code = "let a = " + "b + " * 50_000 + "putc"
    assert C.complete(code, len(code), session, std)["matches"] == ["putchar"]
    assert tip("x = " + "(" * 50_000 + "putchar(", session, std).startswith("fn putchar")


def test_pathological_cells_finish(tmp_path):
    """A guard, not a timing: shapes that made the old regexes quadratic run in a child with a
    generous timeout, and their answers are checked."""
    script = textwrap.dedent("""
        import json
        from cancho_kernel.kernel import completion as C
        from cancho_kernel.kernel.session import Session
        s = Session()
        cases = {
            "word": "x" * 100000,
            "qualified": "y" * 100000 + "." + "z" * 100000,
            "blank lines": "\\n" * 100000 + "edition 5;\\nflu",
            "import dots": "import " + "a." * 50000,
            "open parens": "(" * 100000,
            "quotes": '"' * 100000,
            "char quotes": "'" * 100000,
            "fn spaces": "fn" + " " * 100000,
            "bench": "%bench " + "a " * 50000 + "b",
        }
        out = {}
        for name, code in cases.items():
            out[name] = [C.complete(code, len(code), s)["matches"],
                         C.inspect(code, len(code), s)["found"], C.is_complete(code)["status"]]
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["word"] == [[], False, "complete"]
    assert out["qualified"][0] == [] and out["blank lines"][0] == ["flush_out"]
    assert out["open parens"] == [[], False, "incomplete"]
    assert out["char quotes"] == [[], False, "complete"]


# -- through a real kernel ------------------------------------------------------------------------------


def request(kernel, method: str, code: str, cursor_pos: int | None = None) -> dict:
    _, kc = kernel
    reply = getattr(kc, method)(code, len(code) if cursor_pos is None else cursor_pos, reply=True, timeout=60)
    assert reply["content"]["status"] == "ok"
    return reply["content"]


@pytest.mark.usefixtures("cancho_kernelspec")
def test_through_the_kernel(kernel):
    cell = run(kernel, "import std.fmt;\n// Doubles `x`.\nfn twice(x: int) -> [] int { return 2 * x; }\n"
                       "struct Pair { a: int, b: int }")
    assert cell.status == "ok", cell.outputs
    got = request(kernel, "inspect", "let s = split(")
    assert got["found"] and got["data"]["text/plain"].startswith("fn split(world: World) -> [] Split")
    got = request(kernel, "inspect", 'import std.io;\nfn f() -> [] int { return io.write_all(o, "x")', 45)
    assert got["found"] and "std/io.cho:9" in got["data"]["text/plain"]
    got = request(kernel, "inspect", "fmt.put_int(")
    assert got["found"] and got["data"]["text/plain"].startswith("pub fn put_int[&o]")
    got = request(kernel, "inspect", "twice(")
    text = got["data"]["text/plain"]
    assert text.startswith("fn twice(x: int) -> [] int\n\nDoubles `x`.") and "defined at cell[" in text
    assert request(kernel, "inspect", "Pair")["data"]["text/plain"].startswith("struct Pair { a: int, b: int }")
    got = request(kernel, "complete", "import std.io;\nio.wr")
    assert got["matches"] == ["write_all"] and got["cursor_start"] == len("import std.io;\nio.")
    assert got["metadata"]["_jupyter_types_experimental"][0]["type"] == "function"
    got = request(kernel, "complete", "tw")
    assert got["matches"] == ["twice"] and kinds(got) == {"twice": "function"}
    assert "flush_out" not in request(kernel, "complete", "flu")["matches"]


def test_every_checked_builtin_has_a_written_signature() -> None:
    """Inspection shows a real signature for every builtin the checker types (a capability-literal
    verb like `exec_spawn` once showed "not supported" although the checker knew it), and says
    "not supported" exactly for the builtins it does not type."""
    from cancho_kernel.compiler.check.builtins import BUILTINS
    from cancho_kernel.compiler.symbols import builtin_symbol

    for name, b in BUILTINS.items():
        sym = builtin_symbol(name, 9)
        assert sym is not None and sym.visible, name
        assert sym.signature.startswith(f"fn {name}"), (name, sym.signature)
        assert ("not supported by this compiler yet" in sym.note) == (not b.checked), (name, sym.note)
    verb = builtin_symbol("exec_spawn", 7)
    assert verb.signature.startswith('fn exec_spawn[&x, &p, &a, &v](exec: &x Exec("p"), path: &p [byte]')
    assert '-> [exec("p")] Spawned' in verb.signature
    assert '-> [net_in("p")] Listening' in builtin_symbol("tcp_listen", 5).signature
