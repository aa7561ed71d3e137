"""`%%ir` / `%%asm` listings as Compiler Explorer shows them: a function filter, Intel syntax,
the optimisation level, and a side-by-side diff of two programs or two functions.

The module is worked on through LLVM's module API (llvmlite): the functions asked for are
picked from the parsed module by name (`ValueRef.name`), never by matching IR text, and are
given external linkage before O2 so that a function O2 would inline into every caller and
delete is still there to be shown (the listing says so). Assembly has no per-function API, so
the emitted text is cut at the boundaries the assembler writes for each function (its label,
then `.Lfunc_end`). Intel syntax is LLVM's `--x86-asm-syntax` option, process-wide, so it is
set and put back under a lock.
"""

from __future__ import annotations

import difflib
import html
import re
import threading
from dataclasses import dataclass

from .options import DirectiveError

OPT_LEVELS = (0, 2)
_SYNTAX_LOCK = threading.Lock()
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class ListingOptions:
    """What a `%%ir`/`%%asm` line asks for."""

    functions: tuple[str, ...] = ()
    intel: bool = False
    opt: int = 2
    diff: tuple[str, str] | None = None
    annotate: bool = False

    @property
    def plain(self) -> bool:
        """No option given: the listing exactly as before options existed."""
        return self == ListingOptions()


def _refuse(what: str, args: str, at: int, message: str) -> DirectiveError:
    """A refusal located on the directive line (column counted from its `%%`)."""
    column = len(what) + 2 + at
    return DirectiveError(f"{what}: {message} (column {column} of the `{what}` line); the options are "
                          "--fn NAME, -O0, -O2, --annotate" + (", --intel, --diff A B" if what == "%%asm" else ""))


def parse_listing(what: str, args: str) -> ListingOptions:
    """The options of one `%%ir`/`%%asm` line; an unknown or incomplete one is refused with
    its column."""
    tokens = [(m.group(0), m.start()) for m in _TOKEN.finditer(args)]
    functions: list[str] = []
    intel = annotate = False
    opt: int | None = None
    diff: tuple[str, str] | None = None
    i = 0
    while i < len(tokens):
        word, at = tokens[i]
        if word == "--fn":
            if i + 1 >= len(tokens) or tokens[i + 1][0].startswith("-"):
                raise _refuse(what, args, at, "`--fn` needs a function name")
            functions.append(tokens[i + 1][0])
            i += 2
            continue
        if word == "--diff" and what == "%%asm":
            if i + 2 >= len(tokens) or any(t.startswith("-") for t, _ in tokens[i + 1:i + 3]):
                raise _refuse(what, args, at, "`--diff` needs two names: two programs kept with "
                                              "`%%run --name`, or two functions of the cell")
            diff = (tokens[i + 1][0], tokens[i + 2][0])
            i += 3
            continue
        if word in ("-O0", "-O2"):
            level = int(word[2])
            if opt is not None and opt != level:
                raise _refuse(what, args, at, "give one of -O0 and -O2")
            opt = level
        elif word == "--intel" and what == "%%asm":
            intel = True
        elif word == "--annotate":
            annotate = True
        else:
            raise _refuse(what, args, at, f"unknown option `{word}`")
        i += 1
    return ListingOptions(tuple(functions), intel, 2 if opt is None else opt, diff, annotate)


def symbol(module: str, name: str) -> str:
    """The LLVM name codegen gives a cancho function (docs/ARCHITECTURE.md): `lexs_[module.]name`."""
    return "lexs_" + (module + "." if module else "") + name


def symbol_of(written: str) -> str:
    """`--fn add` / `--fn mod.add` as the symbol's stem (instances add `[T, ...]`)."""
    return symbol("", written)


def matches(name: str, stems: set[str]) -> bool:
    """A function's LLVM name is one asked for: the stem itself or one of its instances."""
    return name in stems or any(name.startswith(s + "[") for s in stems)


def machine(opt: int):
    """The host target machine the backends use (compiler/backends/native.py: the CPU
    `CANCHO_CPU` chooses), at ``opt``."""
    from ..compiler.backends import native

    if opt == 2:
        return native.target_machine()
    import llvmlite.binding as llvm

    from ..compiler import cpu

    native.ensure_initialised()
    chosen = cpu.llvm_cpu()
    return llvm.Target.from_triple(native.host_triple()).create_target_machine(
        cpu=chosen.name, features=chosen.features, opt=0, reloc="pic")


def module_for(ir_text: str, opt: int, keep: set[str]):
    """The program's module at ``opt``, the functions in ``keep`` given external linkage first
    so O2 cannot delete them."""
    import llvmlite.binding as llvm

    from ..compiler.backends import native

    mod = native.parse(ir_text)
    for f in mod.functions:
        if not f.is_declaration and matches(f.name, keep):
            f.linkage = llvm.Linkage.external
    if opt == 2:
        native.optimize(mod, machine(2))
    return mod


@dataclass(frozen=True)
class FnListing:
    """One function's listing: its LLVM name and text."""

    name: str
    text: str


def ir_functions(mod, stems: set[str]) -> list[FnListing]:
    """The definitions asked for, from the module's own function records."""
    return [FnListing(f.name, str(f).strip("\n")) for f in mod.functions
            if not f.is_declaration and matches(f.name, stems)]


def assembly(mod, opt: int, intel: bool) -> str:
    """The module's assembly; Intel syntax when asked (LLVM's option, read when the target
    machine is made, put back afterwards)."""
    import llvmlite.binding as llvm

    from ..compiler.backends import native

    if intel and not native.host_triple().startswith(("x86_64", "i386", "i686")):
        raise DirectiveError(f"--intel is x86's syntax; this machine is {native.host_triple()}")
    with _SYNTAX_LOCK:
        if not intel:
            return machine(opt).emit_assembly(mod)
        llvm.set_option("", "--x86-asm-syntax=intel")
        try:
            return machine(opt).emit_assembly(mod)
        finally:
            llvm.set_option("", "--x86-asm-syntax=att")


def asm_functions(text: str) -> list[FnListing]:
    """Each function's block of the assembler's text: from its label (announced by `.type
    NAME,@function`) to its `.Lfunc_end` label."""
    out: list[FnListing] = []
    announced: set[str] = set()
    name, cur = None, []
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith(".type") and s.endswith("@function"):
            announced.add(s.split(None, 1)[1].rsplit(",", 1)[0].strip('"'))
            continue
        if name is None and line.endswith(":") and not line.startswith((" ", "\t")):
            label = line[:-1].strip('"')
            if label in announced:
                name, cur = label, [line]
            continue
        if name is not None:
            if s.startswith(".Lfunc_end"):
                out.append(FnListing(name, "\n".join(cur)))
                name = None
            else:
                cur.append(line)
    return out


def instructions(text: str) -> list[str]:
    """A block's instructions and labels, without the assembler's directives (`.cfi_*`,
    `.p2align`, ...): what a diff compares."""
    keep = []
    for line in text.split("\n"):
        s = line.strip()
        if not s or (s.startswith(".") and not s.endswith(":")) or s.startswith("#"):
            continue
        keep.append(line.rstrip())
    return keep


def side_by_side(left: tuple[str, list[str]], right: tuple[str, list[str]]) -> tuple[str, str]:
    """Two listings side by side: a unified diff as text, an HTML table (rows that differ
    coloured) for the frontend."""
    (a_name, a), (b_name, b) = left, right
    plain = "\n".join(difflib.unified_diff(a, b, a_name, b_name, lineterm="", n=3)) or \
        f"{a_name} and {b_name} are the same ({len(a)} lines)"
    colours = {"equal": "", "replace": "background:#fff5b1", "delete": "background:#ffebe9",
               "insert": "background:#dafbe1"}
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            x = a[i1 + k] if i1 + k < i2 else ""
            y = b[j1 + k] if j1 + k < j2 else ""
            style = colours[tag]
            rows.append(f"<tr class=\"{tag}\"><td style=\"text-align:left;{style}\"><pre style=\"margin:0\">"
                        f"{html.escape(x)}</pre></td><td style=\"text-align:left;{style}\"><pre style=\"margin:0\">"
                        f"{html.escape(y)}</pre></td></tr>")
    doc = (f"<table class=\"cancho-asm-diff\"><thead><tr><th style=\"text-align:left\">{html.escape(a_name)} "
           f"({len(a)} lines)</th><th style=\"text-align:left\">{html.escape(b_name)} ({len(b)} lines)</th>"
           f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return plain, doc


# -- source annotations ---------------------------------------------------------------------------

_DILOC = re.compile(r"^!(\d+) = !DILocation\((.*)\)$", re.M)
_FIELD = re.compile(r"(\w+): (\"[^\"]*\"|[^,]+)")
_DIFILE = re.compile(r"^!(\d+) = !DIFile\((.*)\)$", re.M)
_DISP = re.compile(r"^!(\d+) = distinct !DISubprogram\((.*)\)$", re.M)
_DBG_REF = re.compile(r",?\s*!dbg !(\d+)")
_ASM_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s+"([^"]*)")?')
_ASM_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")


@dataclass(frozen=True)
class SourceLine:
    """Where a block of instructions came from: the source's path and line."""

    path: str
    line: int


def _fields(text: str) -> dict[str, str]:
    return {k: v.strip().strip('"') for k, v in _FIELD.findall(text)}


def ir_locations(module_text: str) -> dict[str, SourceLine]:
    """`!N` of each DILocation in a module's text -> its file and line (the metadata LLVM printed;
    llvmlite has no reader of an instruction's location)."""
    files = {f"!{n}": _fields(body).get("filename", "") for n, body in _DIFILE.findall(module_text)}
    scopes = {f"!{n}": files.get(_fields(body).get("file", ""), "") for n, body in _DISP.findall(module_text)}
    out: dict[str, SourceLine] = {}
    for n, body in _DILOC.findall(module_text):
        f = _fields(body)
        out[n] = SourceLine(scopes.get(f.get("scope", ""), ""), int(f.get("line", "0") or 0))
    return out


def _header(where: SourceLine, sources: dict, comment: str) -> str:
    source = sources.get(where.path)
    text = source.line_text(where.line).strip() if source is not None else ""
    return f"{comment} {where.path}:{where.line}: {text}"


def annotate_ir(fn_text: str, locations: dict[str, SourceLine], sources: dict) -> str:
    """A function's IR with a `; cell[N]:L: source` line above each run of instructions from L."""
    out, current = [], None
    for line in fn_text.split("\n"):
        m = _DBG_REF.search(line)
        where = locations.get(m.group(1)) if m else None
        if where is not None and where.line and where != current:
            out.append(_header(where, sources, ";"))
            current = where
        out.append(_DBG_REF.sub("", line) if m else line)
    return "\n".join(out)


def annotate_asm(block: str, module_asm: str, sources: dict) -> str:
    """A function's assembly with a `# cell[N]:L: source` line where the `.loc` line changes;
    the assembler's directives left out."""
    files = {m.group(1): m.group(3) or m.group(2) for m in map(_ASM_FILE.match, module_asm.split("\n")) if m}
    out, current = [], None
    for line in block.split("\n"):
        m = _ASM_LOC.match(line)
        if m:
            where = SourceLine(files.get(m.group(1), ""), int(m.group(2)))
            if where.line and where != current:
                out.append(_header(where, sources, "#"))
                current = where
            continue
        s = line.strip()
        if (s.startswith(".") and not s.endswith(":")) or s.startswith((".Ltmp", ".Lfunc_begin")):
            continue  # directives, and the labels debug info adds
        out.append(line)
    return "\n".join(out)


def annotated(what: str, program, opts: ListingOptions, stems: set[str]) -> list[FnListing]:
    """The functions asked for, lowered afresh with their statements' lines, each block of
    instructions under the source line it came from."""
    from ..compiler.codegen.debuglines import lowered_with_lines

    text, sources = lowered_with_lines(program)
    mod = module_for(text, opts.opt, stems)
    if what == "%%ir":
        locations = ir_locations(str(mod))
        return [FnListing(b.name, annotate_ir(b.text, locations, sources)) for b in ir_functions(mod, stems)]
    asm = assembly(mod, opts.opt, opts.intel)
    return [FnListing(b.name, annotate_asm(b.text, asm, sources)) for b in asm_functions(asm)
            if matches(b.name, stems)]
