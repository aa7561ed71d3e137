"""Reading the process tree from `/proc`: a process's children, from every one of its threads.

Both the run's supervision (``process.py``: killing what a run left) and the stdin watch
(``stdin_watch.py``: is a process of the run blocked reading its stdin?) walk the same tree;
this module is the one place that reads it.
"""

from __future__ import annotations

import os


def children_of(pid: int) -> list[int]:
    """The live and zombie children of ``pid``, from /proc (every thread's)."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(w) for w in f.read().split()]
        except (OSError, ValueError):
            continue
    return kids
