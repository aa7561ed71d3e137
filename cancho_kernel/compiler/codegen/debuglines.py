"""Line locations for listings: each statement's instructions tagged with the source line they
came from (LLVM's `!dbg` locations, line tables only), so `%%ir --annotate` / `%%asm --annotate`
can put each block of instructions under its line.

Only a listing asks for them (`kernel/listing.py` sets ``ModuleLowering.debug``): the programs the
backends run are lowered without, so their IR, its caches and its machine code are unchanged.
"""

from __future__ import annotations

from llvmlite import ir

PRODUCER = "cancho-kernel"


class DebugLines:
    """The debug metadata of one module: a compile unit, a file per source, a subprogram per
    function, a location per (function, line, column)."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.files: dict[str, ir.DIValue] = {}
        self.subprograms: dict[str, ir.DIValue] = {}
        self.unit: ir.DIValue | None = None
        self.sources: dict[str, object] = {}  # path -> SourceFile, for quoting a line

    def _file(self, source) -> ir.DIValue:
        path = source.path
        self.sources.setdefault(path, source)
        if path not in self.files:
            self.files[path] = self.module.add_debug_info("DIFile", {"filename": path, "directory": ""})
            if self.unit is None:
                self.unit = self.module.add_debug_info("DICompileUnit", {
                    "language": ir.DIToken("DW_LANG_C99"), "file": self.files[path], "producer": PRODUCER,
                    "isOptimized": True, "runtimeVersion": 0,
                    "emissionKind": ir.DIToken("LineTablesOnly")}, is_distinct=True)
        return self.files[path]

    def subprogram(self, func: ir.Function, span) -> ir.DIValue:
        """The function's subprogram, attached to it on first use."""
        sp = self.subprograms.get(func.name)
        if sp is None:
            file = self._file(span.source)
            kind = self.module.add_debug_info("DISubroutineType", {"types": self.module.add_metadata([])})
            sp = self.module.add_debug_info("DISubprogram", {
                "name": func.name, "scope": file, "file": file, "line": span.line, "type": kind,
                "scopeLine": span.line, "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
                "unit": self.unit}, is_distinct=True)
            func.set_metadata("dbg", sp)
            self.subprograms[func.name] = sp
        return sp

    def at(self, func: ir.Function, span) -> ir.DIValue:
        """The location of ``span`` (its first line and column) in ``func``."""
        sp = self.subprogram(func, span)
        line, column = span.source.line_col(span.start)
        return self.module.add_debug_info("DILocation", {"line": line, "column": column, "scope": sp})

    def module_text(self) -> str:
        """The metadata lines the assembled module needs: the nodes, the compile unit list and
        the debug-info version flag (without it LLVM drops the locations)."""
        if self.unit is None:
            return ""
        i32 = ir.IntType(32)
        version = self.module.add_metadata([i32(2), "Debug Info Version", i32(3)])
        dwarf = self.module.add_metadata([i32(7), "Dwarf Version", i32(5)])
        self.module.add_named_metadata("llvm.module.flags", version)
        self.module.add_named_metadata("llvm.module.flags", dwarf)
        self.module.add_named_metadata("llvm.dbg.cu", self.unit)
        return "\n".join(self.module._get_metadata_lines())  # llvmlite's own printer of them


def lowered_with_lines(prog, target=None) -> tuple[str, dict]:
    """The program's IR with every statement's line (afresh: the per-function cache holds
    untagged text), and the sources by path, so a listing can quote each line."""
    from ..target import HOST
    from .lower import ModuleLowering

    ml = ModuleLowering(prog, target or HOST)
    lines = ml.debug = DebugLines(ml.module)
    text = ml.lower()
    return text, lines.sources
