"""Timings in the kernel, driven through jupyter_client like a notebook: ``%%c`` baselines, named
programs, ``%bench`` / ``%%bench`` (plot, table, raw JSON, no timing in ``text/plain``), an
interrupted bench, the widget explorer (a frontend-style ``comm_msg`` state update re-publishes
the plot), and ``%authority``.

Run counts are tiny (``--runs 2``); no test compares a time with a threshold.
"""

from __future__ import annotations

import base64
import re
import time

import pytest
from kernel_client import HELLO, Cell as BaseCell, assert_alive, run as run_cell  # noqa: F401

pytestmark = pytest.mark.usefixtures("cancho_kernelspec")

# {N} is the explorer's placeholder: the slider's value replaces it before the cell is compiled.
LINES = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi);
    release(fs);
    release(heap);
    release(args);
    var n = 0;
    borrow mut io as &!i in {
        while n < {N} {
            write_bytes(i, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\\n");
            n = n + 1;
        }
    }
    release(io);
    return 0;
}
"""

C_HELLO = '#include <stdio.h>\nint main(void) {\n    fputs("hello, world\\n", stdout);\n    return 0;\n}\n'
C_SLEEPY = "#include <unistd.h>\nint main(void) { usleep(200000); return 0; }\n"

TIMING = re.compile(r"\d+\.\d+|\d\s*ms\b|\d\s*s\b|×|\dx\b")


class Cell(BaseCell):
    @property
    def result(self) -> dict | None:
        res = self.of("execute_result")
        return res[0] if res else None


def run(kernel, code: str, timeout: float = 60) -> Cell:
    return run_cell(kernel, code, timeout, cell=Cell)


def assert_bench_output(cell: Cell, labels: list[str], runs: int) -> dict:
    assert cell.status == "ok", cell.outputs
    res = cell.result
    assert res is not None, cell.outputs
    data = res["data"]
    # one format per output: the table is the result, the plot its own display before it
    assert set(data) == {"text/plain", "text/html"}
    pictures = [d for d in cell.of("display_data") if "image/png" in d["data"]]
    assert len(pictures) == 1, cell.outputs
    assert set(pictures[0]["data"]) == {"image/png", "text/plain"}
    assert base64.b64decode(pictures[0]["data"]["image/png"]).startswith(b"\x89PNG")
    assert pictures[0]["data"]["text/plain"] == f"<bench plot: {' vs '.join(labels)}>"
    assert data["text/plain"] == f"bench: {' vs '.join(labels)}, {runs} run{'s' if runs != 1 else ''} each"
    for text in cell.plains():  # the progress display too: nothing nbval could not compare
        assert not TIMING.search(text), text
    assert "<table" in data["text/html"] and "wall ms" in data["text/html"]
    doc = res["metadata"]["cancho"]["bench"]
    assert doc["runs"] == runs and [it["label"] for it in doc["items"]] == labels
    for it in doc["items"]:
        assert len(it["samples"]["wall_ms"]) == runs
        w = it["wall_ms"]
        assert w["min"] <= w["median"] <= w["max"] and w["min"] > 0
        assert it["user_ms"]["n"] == runs and it["peak_rss_kib"]["median"] > 0
        assert it["ratio"]["min"] <= it["ratio"]["median"] <= it["ratio"]["max"]
    assert doc["items"][0]["ratio"]["median"] == pytest.approx(1.0)
    return doc


# -- %%c -----------------------------------------------------------------------------------------------


def test_c_baseline_compiles_runs_and_is_listed(kernel):
    cell = run(kernel, "%%c hello\n" + C_HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.plains() == ["kept C baseline `C:hello` (cc -O2)"]
    again = run(kernel, "%%c hello --run\n" + C_HELLO)
    assert again.status == "ok", again.outputs
    assert again.stream("stdout") == "hello, world\n"
    assert again.result["data"]["text/plain"] == "replaced C baseline `C:hello` (cc -O2)\nreturned 0"
    meta = again.result["metadata"]["cancho"]
    assert meta["compile_seconds"] > 0 and meta["link_seconds"] > 0
    listed = run(kernel, "%programs")
    assert "C:hello: C baseline, cc -O2" in listed.plains()[0]


def test_c_compile_error_is_shown_like_a_refusal(kernel):
    cell = run(kernel, "%%c broken\n#include <stdio.h>\nint main(void) {\n    return nope;\n}\n")
    assert cell.status == "error"
    err = cell.error
    assert err["ename"] == "c-compile-error"
    assert "nope" in err["evalue"]
    tb = "\n".join(err["traceback"])
    assert "Traceback" not in tb and "cancho-programs" not in tb
    assert re.search(r"cell\[\d+\]:4:\d+", tb), tb  # the cell's own line 4 (the %%c line is 1)
    assert len(cell.of("error")) == 1
    assert run(kernel, "%bench C:broken").error["ename"] == "directive-error"


def test_c_link_error(kernel):
    cell = run(kernel, "%%c unlinked\nint missing(void);\nint main(void) { return missing(); }\n")
    assert cell.status == "error" and cell.error["ename"] == "c-link-error"
    assert "missing" in "\n".join(cell.error["traceback"])


# -- named programs and %bench -------------------------------------------------------------------------


def test_run_name_keeps_the_program_and_bench_compares(kernel):
    assert run(kernel, "%%c hello\n" + C_HELLO).status == "ok"
    cell = run(kernel, "%%run --name hello_k\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    assert cell.stream("stdout") == "hello, world\n"
    assert cell.result["data"]["text/plain"] == "returned 0\nkept as `hello_k` (jit) for %bench"
    exe = run(kernel, "%%run --backend exe --name hello_x\n" + HELLO)
    assert exe.status == "ok", exe.outputs
    bench = run(kernel, "%bench hello_k hello_x C:hello --runs 2")
    doc = assert_bench_output(bench, ["hello_k", "hello_x", "C hello"], 2)
    assert [it["backend"] for it in doc["items"]] == ["jit", "exe", "cc"]
    build = {it["label"]: it["build"] for it in doc["items"]}
    assert build["hello_x"]["compile_ms"] > 0 and build["hello_x"]["link_ms"] > 0
    assert build["C hello"]["compile_ms"] > 0 and build["C hello"]["link_ms"] > 0
    assert build["hello_k"]["mcjit_ms"] is not None and build["hello_k"]["link_ms"] is None
    assert doc["stdout"] == "/dev/null"


def test_bench_of_an_unknown_name_and_bad_options(kernel):
    unknown = run(kernel, "%bench nobody")
    assert unknown.status == "error" and unknown.error["ename"] == "directive-error"
    assert "nobody" in unknown.error["evalue"]
    assert run(kernel, "%bench").error["ename"] == "directive-error"
    assert run(kernel, "%bench C:hello --stdout somewhere").error["ename"] == "directive-error"


def test_cell_bench_on_both_backends_against_a_baseline(kernel):
    assert run(kernel, "%%c hello\n" + C_HELLO).status == "ok"
    cell = run(kernel, "%%bench C:hello --backend both --runs 2 --warmup 0\n" + HELLO)
    doc = assert_bench_output(cell, ["cell [jit]", "cell [exe]", "C hello"], 2)
    assert doc["warmup"] == 0
    # The cell's main became the session's last main: %%run with an empty body runs it again.
    assert run(kernel, "%%run\n").stream("stdout") == "hello, world\n"


def test_progress_is_an_updated_display_that_ends_as_one_line(kernel):
    """No widget: a saved or exported notebook keeps the last state of an updated display, and a
    widget would leave an empty placeholder there (and need scripts from a CDN)."""
    cell = run(kernel, "%%bench --runs 3 --warmup 1\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    first = [c for c in cell.of("display_data") if "cancho-progress" in c["data"].get("text/html", "")]
    assert len(first) == 1, cell.outputs
    progress_id = first[0]["transient"]["display_id"]
    assert "<progress" in first[0]["data"]["text/html"]
    # text/plain never changes, so a frontend that ignores updates (nbval) stores the final line
    assert first[0]["data"]["text/plain"] == "bench: 4 runs (cell)"
    assert not any("widget" in k for c in cell.of("display_data") for k in c["data"])
    updates = [c for c in cell.of("update_display_data") if c["transient"]["display_id"] == progress_id]
    assert updates, cell.outputs
    last = updates[-1]["data"]
    assert last["text/plain"] == "bench: 4 runs (cell)"
    assert "<progress" not in last["text/html"] and "bench: 4 runs (cell)" in last["text/html"]


def test_a_failing_run_stops_the_bench(kernel):
    code = HELLO.replace("return 0;", "return 3;")
    cell = run(kernel, "%%bench --runs 2\n" + code)
    assert cell.status == "error" and cell.error["ename"] == "bench-run-failed"
    assert "returned 3" in cell.error["evalue"]
    ok = run(kernel, "%%bench --runs 1 --expect-status 3\n" + code)
    assert ok.status == "ok", ok.outputs


def test_interrupting_a_long_bench(kernel):
    km, kc = kernel
    assert run(kernel, "%%c sleepy\n" + C_SLEEPY).status == "ok"
    msg_id = kc.execute("%bench C:sleepy --runs 200")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_input":
            break
    time.sleep(1.0)
    km.interrupt_kernel()
    reply = kc.get_shell_msg(timeout=20)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    errors, results = [], []
    while True:
        msg = kc.get_iopub_msg(timeout=10)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            errors.append(msg["content"])
        if msg["msg_type"] == "execute_result":
            results.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert [e["ename"] for e in errors] == ["KeyboardInterrupt"]
    assert "interrupted after" in errors[0]["evalue"] and not results
    assert_alive(kernel)


# -- the widget explorer --------------------------------------------------------------------------------


def _collect_until_idle(kc, msg_id: str, timeout: float = 60) -> list[dict]:
    msgs = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        msgs.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return msgs
    pytest.fail("the kernel did not become idle")


def test_explorer_slider_update_republishes_the_plot(kernel):
    """A raw client plays the frontend: it finds the slider's comm among the comm_open messages and
    sends the state update a frontend sends when the slider moves (kernel.md §3.8–3.9)."""
    _, kc = kernel
    assert run(kernel, "%%c hello\n" + C_HELLO).status == "ok"
    msg_id = kc.execute("%%bench --interactive --arg N=10:1000:10 --runs 1 --warmup 0 C:hello\n" + LINES)
    msgs = _collect_until_idle(kc, msg_id)
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert not errors, errors
    opens = [m["content"] for m in msgs if m["msg_type"] == "comm_open"]
    sliders = [c for c in opens if c["data"]["state"].get("_model_name") == "IntSliderModel"]
    assert len(sliders) == 1 and sliders[0]["data"]["state"]["value"] == 10
    dropdowns = [c["data"]["state"]["description"] for c in opens
                 if c["data"]["state"].get("_model_name") == "DropdownModel"]
    assert sorted(dropdowns) == ["backend", "stdout"]
    shown = [m["content"] for m in msgs if m["msg_type"] == "display_data"
             and m["content"].get("transient", {}).get("display_id")]
    plots = [c for c in shown if "image/png" in c["data"]]
    tables = [c for c in shown if "text/html" in c["data"] and "cancho-bench" in c["data"]["text/html"]]
    assert len(plots) == 1 and len(tables) == 1, shown
    display_id = plots[0]["transient"]["display_id"]
    table_id = tables[0]["transient"]["display_id"]
    assert display_id != table_id
    assert plots[0]["data"]["text/plain"] == "<bench plot: cell vs C hello>"
    assert tables[0]["data"]["text/plain"] == "bench: cell vs C hello, 1 run each, N=10"
    assert tables[0]["metadata"]["cancho"]["bench"]["values"] == {"N": 10}

    slider = sliders[0]["comm_id"]
    update = kc.session.msg("comm_msg", {"comm_id": slider,
                                         "data": {"method": "update", "state": {"value": 500},
                                                  "buffer_paths": []}})
    kc.shell_channel.send(update)
    deadline = time.monotonic() + 60
    updated: dict[str, dict] = {}
    while time.monotonic() < deadline and len(updated) < 2:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["msg_type"] == "update_display_data" and \
                msg["content"]["transient"].get("display_id") in (display_id, table_id):
            updated[msg["content"]["transient"]["display_id"]] = msg["content"]
    if len(updated) < 2:
        pytest.fail(f"the plot and the table were not both re-published: {list(updated)}")
    content = updated[display_id]
    assert "image/png" in content["data"], content["data"].get("text/plain")
    assert content["data"]["text/plain"] == "<bench plot: cell vs C hello>"
    table = updated[table_id]
    assert table["data"]["text/plain"] == "bench: cell vs C hello, 1 run each, N=500"
    doc = table["metadata"]["cancho"]["bench"]
    assert doc["values"] == {"N": 500} and doc["explorer"]["reruns"] == 1
    assert_alive(kernel)


def test_explorer_needs_an_arg(kernel):
    cell = run(kernel, "%%bench --interactive\n" + HELLO)
    assert cell.status == "error" and cell.error["ename"] == "directive-error"


# -- %authority ------------------------------------------------------------------------------------------


def test_authority_of_a_cell_and_of_the_last_main(kernel):
    cell = run(kernel, "%%authority\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    (shown,) = cell.of("display_data")
    text = shown["data"]["text/plain"]
    assert text.startswith("performs\n    io_write\nnever touches\n    the filesystem")
    assert "<table" in shown["data"]["text/html"] and "never touches" in shown["data"]["text/html"]
    # no JSON bundle: JupyterLab would show it as a collapsed tree instead of the table
    assert set(shown["data"]) == {"text/plain", "text/html"}
    assert shown["metadata"]["cancho"]["authority"]["effects"] == ["io_write"]
    assert shown["metadata"]["cancho"]["authority"]["bounded"] is True
    assert cell.stream("stdout") == ""  # reported, not run
    js = run(kernel, "%authority --json")
    assert js.status == "ok", js.outputs
    assert js.plains()[0].startswith('{\n  "bounded": true,\n  "unbounded_by": [],')
    (js_shown,) = js.of("display_data")
    assert set(js_shown["data"]) == {"text/plain"}
    assert run(kernel, "%authority --bogus").error["ename"] == "directive-error"


# -- units (no kernel) -------------------------------------------------------------------------------------


def test_program_names_complete_after_bench_and_resolve_by_namespace():
    from cancho_kernel.kernel.completion import complete
    from cancho_kernel.kernel.named import Program
    from cancho_kernel.kernel.session import Session

    s = Session()
    s.programs.put(Program("putchar", "cancho", "jit", ir="x"))
    s.programs.put(Program("putchar", "c", "cc"))
    s.programs.put(Program("only_c", "c", "cc"))
    assert complete("%bench pu", 9, s)["matches"] == ["putchar"]
    assert complete("%bench putchar C:", 17, s)["matches"] == ["C:only_c", "C:putchar"]
    assert s.programs.resolve("putchar").kind == "cancho"
    assert s.programs.resolve("c:putchar").kind == "c"
    assert s.programs.resolve("only_c").label == "C only_c"
    s.reset()  # %reset forgets items, not build products
    assert s.programs.resolve("putchar") is not None


def test_range_and_substitution():
    from cancho_kernel.kernel.bench import parse_range, substitute
    from cancho_kernel.kernel.directives import DirectiveError

    assert parse_range("SIZE=64:4096:64") == ("SIZE", 64, 4096, 64)
    assert parse_range("N=1:10")[3] == 1
    for bad in ("SIZE", "SIZE=9:1", "1X=1:2", "N=a:b", "N=1:2:0"):
        with pytest.raises(DirectiveError):
            parse_range(bad)
    assert substitute("while n < {N} { f({N}); } {M}", {"N": 5}) == "while n < 5 { f(5); } {M}"


def test_stdin_file_feeds_a_run_and_a_bench(kernel, tmp_path):
    """`--stdin-file PATH` gives a kept program, a run and a bench a file as standard input."""
    data = tmp_path / "in.txt"
    data.write_bytes(b"abc\n" * 1000)
    echo = """fn main(world: World) -> [] int {
    let Split { io, ffi, fs, heap, args } = split(world);
    release(ffi); release(fs); release(heap); release(args);
    var n = 0;
    borrow mut io as &!i in { var c = getchar(i); while c >= 0 { n = n + 1; c = getchar(i); } }
    release(io);
    return n % 256;
}
"""
    cell = run(kernel, f"%%run --name counter --stdin-file {data} --expect-status {4000 % 256}\n" + echo)
    assert cell.status == "ok", cell.outputs
    cell = run(kernel, f"%bench counter --runs 1 --warmup 0 --stdin-file {data} --expect-status {4000 % 256}")
    assert cell.status == "ok", cell.outputs
    bad = run(kernel, "%%run --stdin-file /nonexistent/file\n" + echo)
    assert bad.status == "error" and "--stdin-file" in bad.error["evalue"]


def test_stdout_file_target_keeps_all_output(kernel, tmp_path):
    target = tmp_path / "out.txt"
    cell = run(kernel, f"%%run --stdout file:{target}\n" + HELLO)
    assert cell.status == "ok", cell.outputs
    assert target.read_bytes() == b"hello, world\n"
    assert f"stdout went to the file {target}: 13 bytes" in "\n".join(cell.plains())


def test_full_mode_runs_every_bench_the_same_number_of_times(monkeypatch):
    """CANCHO_BENCH_RUNS is the notebooks' full mode: it overrides a cell's quick --runs."""
    from types import SimpleNamespace

    from cancho_kernel.kernel.bench import parse_bench_options
    from cancho_kernel.kernel.directives import Settings

    monkeypatch.setenv("CANCHO_BENCH_RUNS", "15")
    ctx = SimpleNamespace(settings=Settings())
    assert parse_bench_options("a b --runs 3", ctx, cell=False).runs == 15
    for bad in ("0", "many", "100000"):
        monkeypatch.setenv("CANCHO_BENCH_RUNS", bad)
        assert parse_bench_options("a --runs 3", SimpleNamespace(settings=Settings()), cell=False).runs == 3
    monkeypatch.delenv("CANCHO_BENCH_RUNS")
    assert parse_bench_options("a --runs 4", SimpleNamespace(settings=Settings()), cell=False).runs == 4


C_BUSY = ("#include <stdint.h>\nint main(void) { volatile uint64_t s = 0; "
          "for (uint64_t i = 0; i < 60000000; i++) s += i; return (int)(s & 0); }\n")


def test_a_claim_is_checked_and_printed_without_a_figure(kernel):
    """Claims compare CPU time (a busy loop against a hello that does almost nothing)."""
    assert run(kernel, "%%c hello\n" + C_HELLO).status == "ok"
    assert run(kernel, "%%c busy\n" + C_BUSY).status == "ok"
    ok = run(kernel, '%bench C:busy C:hello --runs 2 --warmup 0 --claim "C:hello / C:busy < 0.9" '
                     '--claim "C busy / C hello >= 1"')
    assert ok.status == "ok", ok.outputs
    assert ok.result["data"]["text/plain"].split("\n")[1:] == [
        "claim C:hello / C:busy < 0.9: holds", "claim C busy / C hello >= 1: holds"]
    assert [c["verdict"] for c in ok.result["metadata"]["cancho"]["statements"]] == ["held", "held"]
    bad = run(kernel, '%bench C:busy C:hello --runs 2 --warmup 0 --claim "C:busy / C:hello < 0.5"')
    assert bad.status == "error" and bad.error["ename"] == "claim-failed", bad.outputs
    assert "C:busy / C:hello < 0.5 does not hold" in bad.error["evalue"]
    assert any("image/png" in d["data"] for d in bad.of("display_data"))  # the evidence is shown
    assert bad.result["data"]["text/plain"].endswith("claim C:busy / C:hello < 0.5: DOES NOT HOLD")
    for claim in ("C:hello < 2", "C:hello / C:nobody < 2", "C:hello / C:busy < 0"):
        refused = run(kernel, f'%bench C:busy C:hello --runs 1 --claim "{claim}"')
        assert refused.status == "error" and refused.error["ename"] == "directive-error", claim


def test_a_figure_never_fails_and_keeps_its_numbers_out_of_text_plain(kernel):
    """A figure far from the measured ratio differs (by a factor the metadata and the table carry)
    and the cell still succeeds; its text/plain line is the same whatever was measured."""
    assert run(kernel, "%%c hello\n" + C_HELLO).status == "ok"
    assert run(kernel, "%%c busy\n" + C_BUSY).status == "ok"
    cell = run(kernel, '%bench C:busy C:hello --runs 2 --warmup 0 --figure "C:hello / C:busy ~ 50" '
                       '--claim "C:hello / C:busy < 0.9"')
    assert cell.status == "ok", cell.outputs
    plain = cell.result["data"]["text/plain"].split("\n")[1:]
    assert plain == ["figure C:hello / C:busy (document 50): shown in the table",
                     "claim C:hello / C:busy < 0.9: holds"]
    fig, claim = cell.result["metadata"]["cancho"]["statements"]
    assert f"{fig['value']:.2f}" not in "\n".join(plain)  # the measured ratio is in the table only
    assert (fig["kind"], fig["verdict"], fig["document"]) == ("figure", "differs", 50.0)
    assert fig["factor"] == pytest.approx(fig["value"] / 50) and fig["factor"] < 1 / 1.5
    assert (claim["kind"], claim["verdict"], claim["document"], claim["factor"]) == ("claim", "held", None, None)
    assert "differs, by ×" in cell.result["data"]["text/html"]
    refused = run(kernel, '%bench C:busy C:hello --runs 1 --figure "C:hello / C:busy < 2"')
    assert refused.status == "error" and refused.error["ename"] == "directive-error"
    assert "--figure" in refused.error["evalue"]


def test_bench_runs_get_the_session_limits(monkeypatch):
    """A bench run is limited like any run (memory, CPU, processes), with its own timeout and no
    output kept."""
    from types import SimpleNamespace

    from cancho_kernel.kernel.bench import parse_bench_options
    from cancho_kernel.kernel.directives import Settings

    monkeypatch.delenv("CANCHO_BENCH_RUNS", raising=False)
    settings = Settings()
    opts = parse_bench_options("a --runs 2 --timeout 7", SimpleNamespace(settings=settings), cell=False)
    session = settings.run_limits()
    assert opts.limits.memory == session.memory is not None
    assert (opts.limits.cpu_seconds, opts.limits.processes) == (session.cpu_seconds, session.processes)
    assert (opts.limits.timeout, opts.limits.max_output) == (7.0, 0)
