"""The cancho compiler: a pipeline lexer -> parser -> resolve -> check -> codegen -> backends.

The public surface the CLI and the kernel use lives in :mod:`cancho_kernel.compiler.api`.
"""
