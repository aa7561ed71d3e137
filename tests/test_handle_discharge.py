"""Owning a handle outright discharges the labels of the verbs on it (check/effects.py
`HANDLE_LABELS`): the authority was spent where the handle was made, so a function that owns
it may use it with the row `[]`; one that only borrows it must declare the label."""

from __future__ import annotations

import pytest

from cancho_kernel.compiler import api
from cancho_kernel.compiler.diagnostics import Rule
from cancho_kernel.compiler.source import SourceFile

# (handle, label, a body that uses `&!u` / `&u` bound to the handle, then ends it)
CASES = [
    ("File", "file_write", "borrow mut h as &!u in { file_write(u, \"x\"); }", "file_close(h);"),
    ("File", "file_read", "borrow mut h as &!u in { file_size(u); }", "file_close(h);"),
    ("Dir", "dir_read", "borrow h as &u in { dir_own_mode(u); }", "dir_close(h);"),
    ("Dir", "dir_write", "borrow h as &u in { dir_sync(u); }", "dir_close(h);"),
    ("DirList", "dir_read", "region r { let n = alloc_slice[r](255, byte_of(0)); "
                            "borrow mut h as &!u in { dir_next(u, n); } }", "dir_list_close(h);"),
    ("Pipe", "pipe_write", "borrow mut h as &!u in { pipe_write(u, \"x\"); }", "pipe_close(h);"),
    ("Pipe", "pipe_read", "region r { let n = alloc_slice[r](8, byte_of(0)); "
                          "borrow mut h as &!u in { pipe_read(u, n); } }", "pipe_close(h);"),
    ("Child", "child_signal", "borrow h as &u in { child_kill(u, 8); }", "child_wait(h);"),
]


def owner(handle: str, use: str, end: str) -> str:
    return (f"edition 7;\n\nfn owner(given: {handle}) -> [] int {{\n    var h = given;\n    {use}\n    {end}\n"
            f"    return 0;\n}}\n\nfn main(world: World) -> [] int {{\n    release(world);\n    return 0;\n}}\n")


def borrower(handle: str, use: str) -> str:
    mutable = "&!" if "borrow mut" in use else "&"
    inner = use.split(" in { ", 1)[1].rsplit(" }", 1)[0] if use.startswith("borrow") else use
    if use.startswith("region"):
        inner = use.replace(f"borrow mut h as &!u in {{ ", "").replace("); } }", "); }")
    return (f"edition 7;\n\nfn user[&b](u: {mutable}b {handle}) -> [] int {{\n    {inner}\n    return 0;\n}}\n\n"
            f"fn main(world: World) -> [] int {{\n    release(world);\n    return 0;\n}}\n")


@pytest.mark.parametrize("handle, label, use, end", CASES)
def test_owning_the_handle_discharges_its_label(handle, label, use, end):
    result = api.check_sources([SourceFile("own.cho", owner(handle, use, end))])
    assert result.ok, "\n".join(d.render() for d in result.diagnostics)


@pytest.mark.parametrize("handle, label, use, end", CASES)
def test_borrowing_it_does_not(handle, label, use, end):
    result = api.check_sources([SourceFile("borrow.cho", borrower(handle, use))])
    assert not result.ok
    first = result.diagnostics[0]
    assert first.rule == Rule.EFFECT_NOT_DECLARED and f"`{label}`" in first.message, first.render()
