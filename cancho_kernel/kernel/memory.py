"""Giving the memory of large cells back to the system (issue 22, finding 10).

Four cells each holding a 50 MiB string literal kept ~600 MiB in the kernel after ``%reset``,
though nothing referred to them any more: glibc's malloc raises its mmap threshold each time a
large block is freed (up to 32 MiB), so the next large blocks came from a thread's arena, whose
free top ``malloc_trim`` does not give back. Here the threshold is fixed at
:data:`MMAP_THRESHOLD` when the kernel starts (a large block is its own mapping, unmapped when
freed) and :func:`release_memory` collects Python's cycles and trims every arena after
``%reset`` and after a large cell. Outside glibc both do nothing.
"""

from __future__ import annotations

import ctypes
import functools
import gc

M_TRIM_THRESHOLD = -1  # <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20  # bytes: a block this large is mapped on its own
TRIM_THRESHOLD = 4 << 20  # bytes of free top a heap keeps before giving it back


@functools.lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):  # not glibc
        return None
    return libc


def bound_allocator() -> None:
    """Fix the mmap and trim thresholds (setting them turns glibc's dynamic raise off)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def release_memory() -> None:
    """Collect Python's cycles, then give every arena's free pages back to the system."""
    gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
