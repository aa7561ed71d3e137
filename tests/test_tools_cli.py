"""`cancho fmt`, `cancho ids`, `cancho layout` and `cancho SUB --help` on the command line
(tools_cli.py, the hunks in cli.py): the reference's messages and exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cancho_kernel import cli

UNFORMATTED = "// keep me\nfn f(a:int)->[] int{return (a);}\n"
FORMATTED = "// keep me\nfn f(a: int) -> [] int {\n    return a;\n}\n"
PROGRAM = """\
struct Rgb { r: byte, g: byte, b: byte }
struct Entry { generation: int, live: bool, value: int }
struct Pair[T] { a: T, b: T }

fn twice(n: int) -> [] int { let d = n * 2; return d; }

fn main(world: World) -> [] int {
    release(world);
    return twice(0);
}
"""


def cancho(*args: str, capsys) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_fmt_rewrites_and_check_reports_without_writing(tmp_path, capsys):
    f = tmp_path / "a.cho"
    f.write_text(UNFORMATTED)
    assert cancho("fmt", "--check", str(f), capsys=capsys) == (1, f"would reformat {f}\n", "")
    assert f.read_text() == UNFORMATTED
    assert cancho("fmt", str(f), capsys=capsys) == (0, f"formatted {f}\n", "")
    assert f.read_text() == FORMATTED
    assert cancho("fmt", "--check", str(f), capsys=capsys) == (0, "", "")


def test_fmt_walks_a_directory_skipping_dot_names_and_reports_a_parse_error(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.cho").write_text(UNFORMATTED)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "c.cho").write_text(UNFORMATTED)
    (tmp_path / "notes.txt").write_text("not cancho")
    bad = tmp_path / "bad.cho"
    bad.write_text("fn f( -> [] int {}\n")
    code, out, err = cancho("fmt", str(tmp_path), capsys=capsys)
    assert code == 1
    assert out == f"formatted {tmp_path / 'sub' / 'b.cho'}\n"
    assert f"{bad}:1:" in err and "error:" in err
    assert bad.read_text() == "fn f( -> [] int {}\n"
    assert (tmp_path / ".hidden" / "c.cho").read_text() == UNFORMATTED


def test_fmt_of_a_missing_file_is_the_environment(tmp_path, capsys):
    code, _, err = cancho("fmt", str(tmp_path / "nope.cho"), capsys=capsys)
    assert code == 3 and "cannot read" in err


def test_ids_prints_the_reference_report_and_ignores_a_rename(tmp_path, capsys):
    f = tmp_path / "p.cho"
    f.write_text(PROGRAM)
    code, out, err = cancho("ids", str(f), "--std", capsys=capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["type", "Rgb"], ["type", "Entry"], ["type", "Pair"],
        ["sig", "twice"], ["body", "twice"], ["sig", "main"], ["body", "main"]]
    assert all(len(line.split()[2]) == 64 for line in lines)
    assert lines[3].startswith("sig  twice" + " " * 19)
    f.write_text(PROGRAM.replace("let d = n * 2; return d;", "let e = n * 2;\n    return e;"))
    assert cancho("ids", str(f), capsys=capsys)[1] == out
    f.write_text(PROGRAM.replace("n * 2", "n * 3"))
    changed = cancho("ids", str(f), capsys=capsys)[1].splitlines()
    assert changed[3] == lines[3] and changed[4] != lines[4] and changed[5:] == lines[5:]


def test_ids_and_layout_refuse_a_program_that_does_not_check(tmp_path, capsys):
    f = tmp_path / "p.cho"
    f.write_text("fn main(world: World) -> [] int { return true; }\n")
    for command in ("ids", "layout"):
        code, out, err = cancho(command, str(f), capsys=capsys)
        assert code == 1 and out == "" and "[type-mismatch]" in err


def test_layout_reports_each_declared_type(tmp_path, capsys):
    f = tmp_path / "p.cho"
    f.write_text(PROGRAM)
    code, out, err = cancho("layout", str(f), capsys=capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "type                     leaves    size   packed   stride"
    assert lines[2] == "Entry                         3      24       24       24"
    rgb = lines[1].split()
    assert rgb[:2] == ["Rgb", "3"] and rgb[3] == "3"  # three byte leaves pack into three bytes
    assert not any(line.startswith("Pair") for line in lines)  # generic: no one layout


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_every_subcommand_prints_its_usage_on_help(command, capsys):
    code, out, err = cancho(command, "--help", capsys=capsys)
    assert code == 0 and err == ""
    assert f"cancho {command}" in out


def test_backend_llvm_is_accepted_where_the_reference_accepts_it(tmp_path, capsys):
    f = tmp_path / "p.cho"
    f.write_text(PROGRAM)
    for command in ("check", "ids", "layout", "authority"):
        code, _, err = cancho(command, str(f), "--backend", "llvm", capsys=capsys)
        assert code == 0, (command, err)


def test_fmt_survives_a_link_loop_and_writes_through_a_link(tmp_path, capsys):
    real = tmp_path / "real.cho"
    real.write_text(UNFORMATTED)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "link.cho").symlink_to(real)
    (tmp_path / "d" / "up").symlink_to(tmp_path, target_is_directory=True)
    code, out, err = cancho("fmt", str(tmp_path / "d"), capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "d" / "link.cho").is_symlink() and real.read_text() == FORMATTED


def test_print_renders_the_canonical_text_without_comments(tmp_path, capsys):
    f = tmp_path / "a.cho"
    f.write_text(UNFORMATTED)
    assert cancho("print", str(f), capsys=capsys) == (0, FORMATTED.replace("// keep me\n", ""), "")
    f.write_text("fn f( -> [] int {}\n")
    code, out, err = cancho("print", str(f), capsys=capsys)
    assert code == 1 and out == "" and f"{f}:1:" in err
    code, _, err = cancho("print", str(f), str(f), capsys=capsys)
    assert code == 2 and err.startswith("`print` renders one file at a time\n\n")
