"""The typed seam between the checker and the code generator (issue 13, item 1).

* Checking, the static evaluator and lowering never write the syntax tree: a deep dump of every
  parsed node (its class, identity and every attribute, not only its dataclass fields) is the
  same before and after `check` + `lower` on a corpus of programs (conformance, examples, the
  test programs, the std drivers and every std module they import).
* What the checker learned is frozen: resolution records, bindings and the side table refuse
  writes, and the kinds are enums.
* The kernel shares a session's parsed items between cells: the declaration a later cell's
  program checks is the very object an earlier cell parsed, and the results are unchanged.
* Lowering cannot fail on checked input; when it does (here: a lowering made to raise), the
  failure is an `internal` diagnostic at the construct being lowered, not at `main`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cancho_kernel.compiler import api, ast
from cancho_kernel.compiler.check.program import check_parsed, parse_all
from cancho_kernel.compiler.check.typed import (CallKind, CallTarget, Local, LocalKind, Member, MemberMode,
                                                NodeMap, StaticRef)
from cancho_kernel.compiler.codegen import lower as lower_mod
from cancho_kernel.compiler.codegen.lower import lower_program
from cancho_kernel.compiler.diagnostics import Rule
from cancho_kernel.compiler.source import SourceFile, Span
from cancho_kernel.kernel.session import Session

REPO = Path(__file__).resolve().parent.parent
CORPUS = sorted((REPO / "tests" / "conformance" / "accept").glob("*.cho")) + [
    [REPO / "examples" / "hello.cho"], [REPO / "examples" / "base64" / "base64.cho"],
    [REPO / "examples" / "sort" / "sort.cho"], [REPO / "examples" / "cut" / "cut.cho"],
    [REPO / "examples" / "serve" / "serve.cho", REPO / "examples" / "serve" / "sockets.cho"],
] + sorted((REPO / "tests" / "programs").glob("*.cho")) + sorted((REPO / "tests" / "std").glob("*_driver.cho"))


def program_id(paths) -> str:
    paths = paths if isinstance(paths, list) else [paths]
    return "+".join(str(p.relative_to(REPO)) for p in paths)


def dump(x: object) -> object:
    """Every node's class, identity and attributes (all of `vars`, so an attribute added after
    parsing shows as well as one changed), recursively; spans by their offsets and file."""
    if isinstance(x, ast.Node):
        return (type(x).__name__, id(x), tuple((k, dump(v)) for k, v in sorted(vars(x).items())))
    if isinstance(x, list):
        return [dump(v) for v in x]
    if isinstance(x, Span):
        return ("span", id(x.source), x.start, x.end)
    if isinstance(x, SourceFile):
        return ("source", id(x), x.path)
    assert x is None or isinstance(x, (str, int, bytes, bool)), type(x)
    return x


@pytest.mark.parametrize("paths", CORPUS, ids=program_id)
def test_check_and_lower_never_write_the_tree(paths):
    paths = paths if isinstance(paths, list) else [paths]
    diags: list = []
    files = parse_all([SourceFile.from_path(p) for p in paths], diags)
    assert not diags
    before = dump(files)
    assert any(isinstance(i, ast.FnDecl) for f in files for i in f.items)

    def run():
        ds, prog = check_parsed(files, [], str(paths[0]))
        assert not ds, ds
        ir, ds = lower_program(prog)
        assert ir is not None and not ds, ds
        return prog

    prog = api.run_deep(run)
    assert dump(files) == before
    # The program's checked functions carry the typed form of exactly these declarations.
    decls = {id(i) for f in files for i in f.items}
    assert all(id(fn.item.decl) in decls for fn in prog.fns.values())


def checked(text: str):
    res = api.check_sources([SourceFile("typed.cho", text)])
    assert res.ok, res.diagnostics
    return res.program


PROGRAM = """
static table: [int] {
    let t = alloc_slice[static](3, 7);
    return t;
}
struct P { x: int, y: int }
fn get[&r](p: &r P) -> [] int { return p.y; }
fn main(world: World) -> [] int {
    let p = P { x: 1, y: 2 };
    var n = p.x;
    borrow p as &q in { n = n + get(q); }
    release(world);
    return n + table[0];
}
"""


def test_records_are_frozen_and_kinds_are_enums():
    prog = checked(PROGRAM)
    main, get = prog.fns["::main"], prog.fns["::get"]
    resolutions = [r for _, r in main.typed.resolved.items()]
    calls = [r for r in resolutions if isinstance(r, CallTarget)]
    assert {c.kind for c in calls} == {CallKind.FN, CallKind.BUILTIN}
    assert any(isinstance(r, StaticRef) and r.item.name == "table" for r in resolutions)
    assert any(isinstance(r, Member) and r.mode is MemberMode.OWNED for r in resolutions)
    assert any(isinstance(r, Member) and r.mode is MemberMode.REF_VAL for _, r in get.typed.resolved.items())
    locals_ = [r for r in resolutions if isinstance(r, Local)]
    assert {loc.kind for loc in locals_} >= {LocalKind.PARAM, LocalKind.LET, LocalKind.VAR, LocalKind.BORROW}
    # The side table names the settled locals, the same objects as the checked parameters.
    assert [loc for loc in locals_ if loc.kind is LocalKind.PARAM] == [main.params[0]]
    with pytest.raises(dataclasses.FrozenInstanceError):
        locals_[0].ty = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        calls[0].name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        main.performed = frozenset()  # type: ignore[misc]
    any_expr = next(e for e, _ in main.typed.types.items())
    with pytest.raises(TypeError):
        main.typed.types[any_expr] = None
    with pytest.raises(TypeError):
        calls[0].subst[("T", "x")] = None  # type: ignore[index]


def test_a_generic_call_records_its_type_arguments():
    prog = checked("""
fn id[T](x: T) -> [] T { return x; }
fn main(world: World) -> [] int { release(world); return id(4); }
""")
    main = prog.fns["::main"]
    (call,) = main.generic_calls
    target = main.typed.res(call)
    assert target.kind is CallKind.FN and target.name == "id"
    assert str(target.subst[("T", "T")]) == "int"


def test_node_map_is_by_identity_and_keeps_its_keys():
    a, b = ast.IntLit(1, span=None), ast.IntLit(1, span=None)
    assert a == b  # equal by value ...
    m: NodeMap = NodeMap()
    m[a] = "a"
    m[b] = "b"
    assert (m[a], m[b], len(m)) == ("a", "b", 2)  # ... distinct by identity
    assert [n for n, _ in m.items()] == [a, b]
    assert m.get(ast.IntLit(1, span=None)) is None
    m.freeze()
    with pytest.raises(TypeError):
        m[a] = "again"


CELL_ITEMS = """
struct Pair { a: int, b: int }
fn total(p: Pair) -> [] int { let Pair { a, b } = p; return a + b; }
"""


def test_a_session_shares_its_parsed_items_between_cells():
    session = Session()
    first = session.process(session.new_source(CELL_ITEMS), compile=False)
    assert first.ok, first.diagnostics
    session.commit(first)
    decl = session.items[("", "total")].decl
    snapshot = dump(decl)
    outcomes = []
    for value in (3, 30):
        text = f"fn main(world: World) -> [] int {{ release(world); return total(Pair {{ a: {value}, b: 1 }}); }}\n"
        out = session.process(session.new_source(text), compile=True)
        assert out.ok, out.diagnostics
        outcomes.append(out)
        assert out.program.fns["::total"].item.decl is decl  # the very object, not a copy
    assert dump(decl) == snapshot
    # Both checks typed the same nodes; each has its own side table.
    t0, t1 = (o.program.fns["::total"].typed for o in outcomes)
    assert t0 is not t1
    assert [id(n) for n, _ in t0.types.items()] == [id(n) for n, _ in t1.types.items()]


def test_a_lowering_that_fails_is_internal_at_the_construct(monkeypatch):
    source = SourceFile("fails.cho", "fn main(world: World) -> [] int {\n    release(world);\n"
                                     "    let x = 6;\n    return x * 7;\n}\n")

    def broken(self, e):
        raise RuntimeError("simulated bug")

    monkeypatch.setitem(lower_mod.EXPR_LOWERINGS, ast.Binary, broken)
    res = api.compile_sources([source])
    assert not res.ok
    (d,) = res.diagnostics
    assert d.rule is Rule.INTERNAL
    assert "RuntimeError: simulated bug" in d.message and "bug in cancho-kernel" in d.message
    assert d.span is not None and d.span.source is source
    assert (d.span.line, d.span.column) == (4, 12)  # `x * 7`, not `main`
    assert source.text[d.span.start:d.span.end] == "x * 7"


def test_a_failure_in_a_statement_is_at_the_statement(monkeypatch):
    source = SourceFile("fails.cho", "fn main(world: World) -> [] int {\n    release(world);\n"
                                     "    var i = 0;\n    while i < 3 { i = i + 1; }\n    return i;\n}\n")

    def broken(self, s):
        raise KeyError("simulated")

    monkeypatch.setattr(lower_mod.FnLowering, "while_stmt", broken)
    res = api.compile_sources([source])
    (d,) = res.diagnostics
    assert d.rule is Rule.INTERNAL and d.span is not None
    assert source.text[d.span.start:d.span.end].startswith("while i < 3")
