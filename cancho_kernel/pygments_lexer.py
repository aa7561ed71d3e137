"""A Pygments lexer for cancho (language.md §1), registered as the ``pygments.lexers`` entry point
``cancho`` so nbconvert's HTML (which picks the lexer from a notebook's
``language_info.pygments_lexer``) highlights cancho cells. Kernel directive lines (``%%run ...``)
at the top of a cell are shown as preprocessor lines.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace)

__all__ = ["CanchoLexer"]

_KEYWORDS = ("fn", "let", "var", "if", "else", "while", "return", "defer", "match", "borrow",
             "region", "as", "in", "mut", "where", "extern", "module", "import", "pub")
_DECL_MODES = ("res", "val")
_TYPES = ("int", "bool", "byte", "float", "f32", "c_int", "c_ptr")
_PRELUDE = ("World", "Io", "Ffi", "Fs", "Heap", "Args", "Split", "Box", "File", "Opened", "Read",
            "Net", "Thread", "Clock", "Done", "Listener", "Conn", "Udp", "Poller", "Signals", "Dir",
            "SignalWatch", "Exec", "Child", "Pipe", "ChildEnd")
_BUILTINS = ("putchar", "write_bytes", "write_err", "getchar", "split", "release", "narrow",
             "wrapping_add", "wrapping_sub", "wrapping_mul", "byte_of", "int_of", "float_of",
             "truncate", "is_nan", "sqrt", "bits_of", "len", "box", "unbox", "contents", "box_slice",
             "unbox_slice", "arg_count", "arg", "fs_read", "fs_write", "open_read", "file_read",
             "file_close", "trap", "flush_out", "copy_within", "copy_into", "index_of_byte",
             "alloc", "alloc_slice", "null_ptr", "spawn", "join", "value_barrier", "float_of_bits",
             "load_le64", "byte_mask64", "trailing_zeros", "leading_zeros", "popcount")

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


class CanchoLexer(RegexLexer):
    """cancho source (``.cho``) and cancho notebook cells."""

    name = "cancho"
    aliases = ["cancho", "cho"]
    filenames = ["*.cho"]
    mimetypes = ["text/x-cancho"]
    url = "https://github.com/alpibrusl/cancho"

    tokens = {
        "root": [
            (r"^([ \t]*)(%%?[A-Za-z_]+)(.*?)$", bygroups(Whitespace, Comment.Preproc, Comment.Preproc)),
            (r"[ \t\r\n\f]+", Whitespace),
            (r"//.*?$", Comment.Single),
            (r"\bedition\b", Keyword.Namespace),
            (r'"', String, "string"),
            (r"'(\\[nrt\\0']|[^'\\\n])'", String.Char),
            (r"0x[0-9a-fA-F][0-9a-fA-F_]*", Number.Hex),
            (r"[0-9][0-9_]*\.[0-9][0-9_]*([eE][+-]?[0-9][0-9_]*)?(f32)?", Number.Float),
            (r"[0-9][0-9_]*[eE][+-]?[0-9][0-9_]*(f32)?", Number.Float),
            (r"[0-9][0-9_]*", Number.Integer),
            (r"\b(true|false)\b", Keyword.Constant),
            (r"(fn)(\s+)(" + _IDENT + ")", bygroups(Keyword, Whitespace, Name.Function)),
            (r"(struct|enum)(\s+)(" + _IDENT + ")", bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            (r"^(\s*)(static)(\s+)(" + _IDENT + ")", bygroups(Whitespace, Keyword.Declaration, Whitespace, Name.Constant)),
            (r"(&!?)(" + _IDENT + r")\b", bygroups(Operator, Name.Label)),
            (words(_KEYWORDS, suffix=r"\b"), Keyword),
            (words(_DECL_MODES, suffix=r"\b"), Keyword.Declaration),
            (r"\b_\b", Keyword),
            (words(_TYPES, suffix=r"\b"), Keyword.Type),
            (words(_PRELUDE, suffix=r"\b"), Name.Builtin),
            (words(_BUILTINS, suffix=r"\b"), Name.Builtin),
            (r"[A-Z][A-Za-z0-9_]*", Name.Class),
            (_IDENT, Name),
            (r"->|=>|::|\.\.|&&|\|\||==|!=|<=|>=|<<|>>|[+\-*/%!|^~&<>=]", Operator),
            (r"[()\[\]{},.;:]", Punctuation),
            (r".", Text),
        ],
        "string": [
            (r'\\[nrt\\0"]', String.Escape),
            (r'\\.', String.Escape),
            (r'"', String, "#pop"),
            (r'[^"\\\n]+', String),
            (r"\n", String, "#pop"),
        ],
    }
