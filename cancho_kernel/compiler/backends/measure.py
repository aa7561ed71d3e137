"""A tiny C launcher that makes a program's peak memory honest.

Linux folds the memory of the process a program was spawned from into the program's peak RSS
(the address space it had before `exec` counts), so a program started directly by a large
Python process reports that process's size. This launcher, itself a few hundred KiB, forks the
program, waits for it, writes the program's own rusage to a descriptor, and then ends exactly as
the program did (same exit status, or the same signal), so callers see no difference except
trustworthy `ru_maxrss`, `ru_utime` and `ru_stime`.

It is compiled once with `cc -O2` into a per-user cache directory; without a C compiler callers
fall back to spawning the program directly.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional

REPORT_FD = 3

SOURCE = r"""
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* argv: launcher PROGRAM ARGV0 ARGS...; descriptor 3 receives one line:
   "status utime_us stime_us maxrss_kib". */
int main(int argc, char **argv) {
    if (argc < 3) return 127;
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        close(3);
        execv(argv[1], argv + 2);
        dprintf(2, "cannot run %s: %s\n", argv[1], strerror(errno));
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) return 127;
    }
    dprintf(3, "%d %lld %lld %ld\n", status,
            (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, ru.ru_maxrss);
    close(3);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    return WEXITSTATUS(status);
}
"""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cancho-kernel"


@lru_cache(maxsize=1)
def launcher() -> Optional[str]:
    """Path of the compiled launcher, building it on first use; None without a C compiler."""
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    target = _cache_dir() / f"measure-{digest}"
    if target.is_file() and os.access(target, os.X_OK):
        return str(target)
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "measure.c"
            src.write_text(SOURCE)
            out = Path(tmp) / "measure"
            r = subprocess.run([*cc.split(), "-O2", "-o", str(out), str(src)], capture_output=True)
            if r.returncode != 0:
                return None
            os.replace(out, target)  # atomic: concurrent builders agree on one file
    except OSError:
        return None
    return str(target)


def parse_report(text: str) -> Optional[tuple[int, float, float, int]]:
    """(wait status, user seconds, sys seconds, peak RSS KiB) from the launcher's line."""
    try:
        status, user, system, rss = text.split()
        return int(status), int(user) / 1e6, int(system) / 1e6, int(rss)
    except ValueError:
        return None
