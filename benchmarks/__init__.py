"""Benchmark harness for cancho: re-creates the bulk-output measurements of runtime.md §10.1.

Run it with ``python -m benchmarks`` (see ``benchmarks/__main__.py``). The package uses the Python
standard library only, so that it can run on a machine where the compiler is half-built: the C rows
are always measured, and a cancho row that cannot be built says so instead of crashing the run.
"""
