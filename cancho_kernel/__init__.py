"""cancho-kernel: a compiler for the cancho language and a Jupyter kernel on top of it."""

__version__ = "0.1.0"
