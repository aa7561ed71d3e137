"""The cancho Jupyter kernel.

Modules, one concern each:

* ``kernel``       — the ipykernel ``Kernel`` subclass: messages, history, comms;
* ``session``      — items kept across cells, synthetic files, check/compile of a cell;
* ``directives``   — ``%``/``%%`` directives (a registry) and what a cell's text does;
* ``runner``       — the ``jit`` (warm worker) and ``exe`` backends, interruptible runs;
* ``presentation`` — refusals, run outcomes, definitions, tables as Jupyter messages;
* ``completion``   — completion, inspection and ``is_complete``.
"""

from .kernel import LANGUAGE_INFO, CanchoKernel

__all__ = ["CanchoKernel", "LANGUAGE_INFO"]
