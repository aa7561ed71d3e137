"""Effect rows: label covering, discharge by owned capabilities, and the exactness check (§7)."""

from __future__ import annotations

from typing import Iterable, Optional

from .types import Cap, Handle, LabelT

PATH_LABELS = {"fs_read", "fs_write", "exec"}
PREFIX_LABELS = {"ffi", "net_out", "net_in"}

# Which labels owning a capability of each kind discharges.
CAP_LABELS = {
    "Io": {"io_read", "io_write", "err_write"},
    "Heap": {"heap"},
    "Args": {"args"},
    "Clock": {"clock"},
    "Fs": {"fs_read", "fs_write", "file_read", "file_write", "dir_read", "dir_write"},
    "Ffi": {"ffi"},
    "Net": {"net_out", "net_in", "conn_accept", "conn_read", "conn_write", "udp_recv", "udp_send", "poll"},
    "Signals": {"signals", "signals_read"},
    "Exec": {"exec", "child_signal", "pipe_read", "pipe_write"},
}


# Which labels owning a handle outright (a parameter by value) discharges: the authority was
# spent where the handle was made, and only its holder can use it.
HANDLE_LABELS = {
    "File": {"file_read", "file_write"},
    "Dir": {"dir_read", "dir_write"},
    "DirList": {"dir_read"},
    "Pipe": {"pipe_read", "pipe_write"},
    "Child": {"child_signal"},
}


def extends_path(held: str, wanted: str) -> bool:
    """Path-prefix containment at a `/` boundary; the empty path holds everything."""
    if held == "":
        return True
    if wanted == held:
        return True
    if held.endswith("/"):
        return wanted.startswith(held)
    return wanted.startswith(held + "/")


def covers(held: LabelT, wanted: LabelT) -> bool:
    """Does a declared/held label cover a performed one (label_covers semantics)?"""
    if held.name != wanted.name:
        return False
    if held.arg is None or wanted.arg is None:
        return held.arg is None and wanted.arg is None
    if held.name in PATH_LABELS:
        return extends_path(held.arg, wanted.arg)
    if held.name in PREFIX_LABELS:
        return wanted.arg.startswith(held.arg)
    return held.arg == wanted.arg


# Labels no ownership discharges: `conc` is real concurrency, declared even by `main`.
NEVER_DISCHARGED = {"conc"}


def discharged_by(cap: Cap | Handle, label: LabelT) -> bool:
    """Does owning `cap` (a capability or a handle) by value discharge `label`?"""
    if label.name in NEVER_DISCHARGED:
        return False
    if isinstance(cap, Handle):
        return label.name in HANDLE_LABELS.get(cap.name, set())
    if cap.kind == "World":
        return True
    names = CAP_LABELS.get(cap.kind, set())
    if label.name not in names:
        return False
    if label.arg is None or cap.literal is None:
        # file_read/dir_read etc. carry no argument; owning the root kind discharges them.
        return True
    return covers(LabelT(label.name, cap.literal), label)


def undischarged(performed: Iterable[LabelT], owned: list[Cap | Handle]) -> set[LabelT]:
    return {l for l in performed if not any(discharged_by(c, l) for c in owned)}


def check_row(declared: frozenset, performed: set, owned: list[Cap | Handle]) -> Optional[tuple[str, LabelT]]:
    """('not-declared', label) or ('not-performed', label) for the first violation, else None.
    Both directions read what is left once owned parameters discharged their labels, as the
    reference does: an owned `Clock` leaves nothing for a declared `clock` to cover."""
    rest = undischarged(performed, owned)
    for l in sorted(rest, key=lambda x: (x.name, x.arg or "")):
        if not any(covers(d, l) for d in declared):
            return ("not-declared", l)
    for d in sorted(declared, key=lambda x: (x.name, x.arg or "")):
        if not any(covers(d, p) for p in rest):
            return ("not-performed", d)
    return None
