"""How a trapped program's supervisor learns which trap site fired (``compiler/trapsites.py``).

A trap is an undefined instruction holding the site's number. A SIGILL handler (:data:`HANDLER_C`)
reads the number at the faulting address (``si_addr``; only for a SIGILL the CPU raised, never
one sent by ``kill``, which it raises again at once), reports it, and returns with the default
action restored (``SA_RESETHAND``): the instruction runs again and ends the process by SIGILL
exactly as it would have without the handler (the same status, the same core-dump bit, nothing
written to the program's own streams).

Where the report goes:

* **exe**: every executable is linked with a small object (:data:`EXE_OBJECT_C`, built once by
  ``chelper.py``) whose constructor arms the handler only when ``CANCHO_TRAP_FD`` names a
  descriptor (the launcher, ``measure.py``, sets it for its runs; the variable is removed and
  the descriptor made close-on-exec, so the program and what it starts see neither). The
  handler writes an 8-byte record, ``CTRP`` and the number; the launcher adds the number to
  its report line.
* **jit**: the C child (``jit_child.py``) arms the handler with a page shared with the worker
  (mapped when the worker loads the child, so every fork shares it); the worker takes the
  number after the wait (``cancho_jit_trap_take``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

from .chelper import HelperSpec, built_helper

ENV_FD = "CANCHO_TRAP_FD"
RECORD_MAGIC = b"CTRP"

HANDLER_C = r"""
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int cancho_trap_fd = -1;
static volatile uint32_t *cancho_trap_slot = 0;  /* [0] the trapping pid, [1] the site number */

static void cancho_trap_handler(int sig, siginfo_t *si, void *context) {
    (void)sig;
    (void)context;
    if (si == 0 || si->si_code <= 0 || si->si_addr == 0) {
        /* Sent (kill(2), raise(3)): no instruction to run again. The action is the default
           again (SA_RESETHAND) and SA_NODEFER leaves SIGILL unblocked, so this ends the process
           by SIGILL as the sender meant. */
        raise(SIGILL);
        return;
    }
    {  /* raised by the CPU at the faulting instruction */
        const unsigned char *pc = (const unsigned char *)si->si_addr;
        uint32_t number = 0;
        int found = 0;
#if defined(__x86_64__)
        if (pc[0] == 0x0f && pc[1] == 0xb9 && pc[2] == 0x80) {  /* ud1 eax, [rax + disp32] */
            memcpy(&number, pc + 3, 4);
            found = 1;
        }
#elif defined(__aarch64__)
        uint32_t insn;
        memcpy(&insn, pc, 4);
        if ((insn & 0xffff0000u) == 0) {  /* udf #imm16 */
            number = insn & 0xffffu;
            found = 1;
        }
#endif
        if (found && cancho_trap_fd >= 0) {
            unsigned char record[8] = {'C', 'T', 'R', 'P', 0, 0, 0, 0};
            memcpy(record + 4, &number, 4);
            ssize_t w = write(cancho_trap_fd, record, sizeof record);
            (void)w;
        }
        if (found && cancho_trap_slot != 0) {
            cancho_trap_slot[1] = number;
            __sync_synchronize();
            cancho_trap_slot[0] = (uint32_t)getpid();
        }
    }
    /* SA_RESETHAND restored the default action: returning runs the trap again, which now ends
       the process by SIGILL exactly as it would have without this handler. */
}

static void cancho_trap_arm(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = cancho_trap_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGILL, &sa, 0);
}
"""

EXE_OBJECT_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
""" + HANDLER_C + r"""
__attribute__((constructor)) static void cancho_trap_from_env(void) {
    const char *text = getenv("CANCHO_TRAP_FD");
    if (text == 0) return;
    char *end = 0;
    long fd = strtol(text, &end, 10);
    unsetenv("CANCHO_TRAP_FD");
    if (end == text || *end != 0 || fd < 3 || fd > 1 << 20) return;
    if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0) return;
    cancho_trap_fd = (int)fd;
    cancho_trap_arm();
}
"""

OBJECT_SPEC = HelperSpec(EXE_OBJECT_C, "trap-report", ("-O2", "-fPIC", "-c"))


@lru_cache(maxsize=1)
def exe_object() -> Optional[Path]:
    """The object every executable is linked with (None without a C compiler: no location)."""
    return built_helper(OBJECT_SPEC.source, OBJECT_SPEC.stem, OBJECT_SPEC.flags)


def parse_record(data: bytes) -> Optional[int]:
    """A site number from the handler's 8-byte record."""
    if len(data) != 8 or not data.startswith(RECORD_MAGIC):
        return None
    return int.from_bytes(data[4:], "little")
