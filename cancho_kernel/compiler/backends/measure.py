"""A tiny C launcher between a run's supervisor and the program: honest peak memory, the run's
resource limits, and no process that outlives the run.

* **Peak memory.** Linux folds the memory of the process a program was spawned from into the
  program's peak RSS (the address space it had before `exec` counts), so a program started
  directly by a large Python process reports that process's size. The launcher, a few hundred
  KiB, forks the program, waits for it and writes the program's own rusage to descriptor 3.
* **Limits.** posix_spawn cannot set a resource limit and the caller may have threads, so the
  limits (RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE) are set here, in the child, after `fork`.
* **Nothing outlives the run.** The launcher is a child subreaper (PR_SET_CHILD_SUBREAPER), so
  whatever the program starts — even a process that left the run's group with `setsid` — is
  re-parented to it when its own parent dies; when the program ends, every remaining descendant
  is killed and reaped before the launcher reports. SIGTERM or SIGHUP to the launcher (how a
  supervisor stops a run) kills the program, sweeps, and ends as if the program died by SIGKILL.
  The launcher dies with its supervisor (PR_SET_PDEATHSIG -> SIGTERM, so it sweeps first) and
  the program dies with the launcher (PR_SET_PDEATHSIG -> SIGKILL).
* **Safe mode.** The launcher runs inside the sandbox (sandbox.py: ``bwrap … -- launcher …``),
  from a copy no sandboxed program can write (:func:`trusted_launcher`). Given roots, the program is confined to them on disk with
  Landlock (confine.py) after `fork`, before `execv`; if that fails it does not run.
* **No file left behind.** Given a path to clean up, it removes that file and its directory as
  soon as the program has been exec'd, so even a supervisor killed by SIGKILL leaves nothing.

Otherwise it ends exactly as the program did (same exit status, or the same signal), so callers
see no difference. It is compiled once with `cc -O2` into a per-user cache directory; without a C
compiler callers fall back to a Python trampoline (process.py).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from .chelper import built_helper, c_compiler
from .confine import C_SOURCE as CONFINE_C_SOURCE
from .confine import Confinement, launcher_args as confine_args

REPORT_FD = 3

SOURCE = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
""" + CONFINE_C_SOURCE + r"""
/* argv: launcher PARENT GROUP AS CPU NPROC FSIZE CLEANUP CONFINE [ROOTS...] PROGRAM ARGV0 ARGS...
   PARENT   the supervisor's pid: the launcher gets SIGTERM when it dies ("-": none)
   GROUP    "1": the program leads its own process group; "0": it stays in ours (a terminal)
   AS CPU NPROC FSIZE  RLIMIT_AS bytes, RLIMIT_CPU seconds, RLIMIT_NPROC, RLIMIT_FSIZE bytes
            for the program ("-": none)
   CLEANUP  a file removed, with its directory, once the program runs ("-": none)
   CONFINE  "-": not confined; else K, then K roots for cancho_confine (confine.py): the
            program reaches only those on disk (Landlock), or does not run at all
   Descriptor 3 receives one line: "status utime_us stime_us maxrss_kib [trap]"; trap, the
   site number the program's trap reporter (trapreport.py) sent on the descriptor named by
   CANCHO_TRAP_FD, only when the program died by SIGILL. */

static volatile sig_atomic_t target = 0;   /* what a stop request kills: pid, or -pgid */
static volatile sig_atomic_t stopped = 0;

static void on_stop(int sig) {
    (void)sig;
    stopped = 1;
    if (target != 0) kill((pid_t)target, SIGKILL);
}

/* Kill and reap every child (orphans included: we are their subreaper) until none is left. */
static void sweep(void) {
    pid_t self = getpid();
    for (;;) {
        DIR *d = opendir("/proc");
        if (d != NULL) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                char path[64], buf[512];
                if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
                snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) continue;
                ssize_t n = read(fd, buf, sizeof buf - 1);
                close(fd);
                if (n <= 0) continue;
                buf[n] = 0;
                char *close_paren = strrchr(buf, ')');
                char state;
                int ppid;
                if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2
                    && ppid == self)
                    kill((pid_t)atol(e->d_name), SIGKILL);
            }
            closedir(d);
        }
        int st;
        pid_t r = waitpid(-1, &st, 0);
        if (r < 0 && errno == ECHILD) return;
        if (r < 0 && errno != EINTR) return;
    }
}

static int set_limit(int resource, const char *text, int slack) {
    if (strcmp(text, "-") == 0) return 0;
    unsigned long long v = strtoull(text, NULL, 10);
    struct rlimit rl = {(rlim_t)v, (rlim_t)(v + slack)};
    return setrlimit(resource, &rl);
}

int main(int argc, char **argv) {
    if (argc < 11) return 127;
    int nroots = strcmp(argv[8], "-") == 0 ? 0 : atoi(argv[8]);
    if (nroots < 0 || argc < 11 + nroots) return 127;
    char **roots = argv + 9;
    char **program = argv + 9 + nroots;  /* PROGRAM ARGV0 ARGS... */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    if (strcmp(argv[1], "-") != 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
        if (getppid() != (pid_t)atol(argv[1])) return 128 + SIGKILL;  /* already gone */
    }
    int group = strcmp(argv[2], "1") == 0;
    if (!group) {  /* on a terminal, a Ctrl-C is the program's (as system(3) does) */
        signal(SIGINT, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
    }
    const char *cleanup = strcmp(argv[7], "-") == 0 ? NULL : argv[7];
    int ready[2], trap[2];
    if (pipe2(ready, O_CLOEXEC) < 0) return 127;
    if (pipe2(trap, O_CLOEXEC | O_NONBLOCK) < 0) return 127;
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    sigprocmask(SIG_BLOCK, &stops, &old);
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGTERM, &dfl, NULL);
        sigaction(SIGHUP, &dfl, NULL);
        sigaction(SIGINT, &dfl, NULL);
        sigaction(SIGQUIT, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(3);
        close(ready[0]);
        int trap_fd = fcntl(trap[1], F_DUPFD, 10);  /* not close-on-exec: the program's */
        if (trap_fd >= 0) {
            char text[16];
            snprintf(text, sizeof text, "%d", trap_fd);
            setenv("CANCHO_TRAP_FD", text, 1);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != self) _exit(127);
        if (group) setpgid(0, 0);
        if (set_limit(RLIMIT_AS, argv[3], 0) || set_limit(RLIMIT_CPU, argv[4], 1)
            || set_limit(RLIMIT_NPROC, argv[5], 0) || set_limit(RLIMIT_FSIZE, argv[6], 0)) {
            dprintf(2, "cannot set the run's limits: %s\n", strerror(errno));
            _exit(127);
        }
        if (strcmp(argv[8], "-") != 0) {
            int r = cancho_confine(nroots, roots);
            if (r != 0) {
                dprintf(2, "cannot confine the program to its directories (Landlock): %s\n",
                        strerror(-r));
                _exit(127);
            }
        }
        execv(program[0], program + 1);
        int e = errno;
        if (write(ready[1], &e, sizeof e) < 0) { /* nothing more to say */ }
        dprintf(2, "cannot run %s: %s\n", program[0], strerror(e));
        _exit(127);
    }
    if (group) setpgid(pid, pid);  /* also here, so a stop request finds the group at once */
    target = group ? -pid : pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (stopped) kill(pid, SIGKILL);
    close(ready[1]);
    close(trap[1]);
    int e;
    ssize_t n;
    do { n = read(ready[0], &e, sizeof e); } while (n < 0 && errno == EINTR);
    close(ready[0]);
    if (cleanup != NULL) {
        unlink(cleanup);
        char *dir = strdup(cleanup);
        if (dir != NULL) { rmdir(dirname(dir)); free(dir); }
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) return 127;
    }
    target = 0;
    sweep();
    unsigned char record[8];
    char site[16] = "";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGILL
        && read(trap[0], record, sizeof record) == (ssize_t)sizeof record
        && memcmp(record, "CTRP", 4) == 0) {
        unsigned number = (unsigned)record[4] | (unsigned)record[5] << 8
                          | (unsigned)record[6] << 16 | (unsigned)record[7] << 24;
        snprintf(site, sizeof site, " %u", number);
    }
    close(trap[0]);
    dprintf(3, "%d %lld %lld %ld%s\n", status,
            (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, ru.ru_maxrss, site);
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


@dataclass(frozen=True)
class LaunchLimits:
    """The resource limits the launcher sets on the program (None: not set)."""

    address_space: int | None = None   # RLIMIT_AS, bytes
    cpu_seconds: int | None = None     # RLIMIT_CPU (SIGXCPU at the limit, SIGKILL a second later)
    processes: int | None = None       # RLIMIT_NPROC (counts every process of the user)
    file_size: int | None = None       # RLIMIT_FSIZE, bytes (SIGXFSZ past it)


def launcher_argv(launcher_path: str, program: str, argv: Sequence[str], *, parent: int | None,
                  own_group: bool, limits: LaunchLimits = LaunchLimits(),
                  cleanup: str | None = None, confine: Confinement | None = None) -> list[str]:
    """The launcher's command line for one program (see SOURCE for the positions).
    ``confine``: the program reaches only those directories on disk (safe mode)."""
    def num(v: int | None) -> str:
        return "-" if v is None else str(int(v))

    return [launcher_path, num(parent), "1" if own_group else "0", num(limits.address_space),
            num(limits.cpu_seconds), num(limits.processes), num(limits.file_size), cleanup or "-",
            *confine_args(confine), program, *argv]


@lru_cache(maxsize=1)
def launcher() -> Optional[str]:
    """Path of the compiled launcher, building it on first use; None without a C compiler."""
    path = built_helper(SOURCE, "measure")
    return str(path) if path is not None else None


def trusted_launcher(writable: Sequence[str]) -> Optional[str]:
    """The launcher for a sandboxed run: the cached build when no sandbox-writable directory
    (``writable``: the notebook's, which on a hub is ``$HOME``, holding the cache) contains it,
    else a private build of this process (a planted ``measure-HASH`` in a writable cache is
    never run); None without a C compiler."""
    shared = launcher()
    if shared is None:
        return None
    real = os.path.realpath(shared)
    roots = [os.path.realpath(w) for w in writable]
    if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
        return shared
    return _private_launcher()


@lru_cache(maxsize=1)
def _private_launcher() -> Optional[str]:
    """The launcher compiled into a 0700 directory of this process's own outside every notebook
    (removed at exit), once per process."""
    cc = c_compiler()
    if cc is None:
        return None
    tmp = tempfile.mkdtemp(prefix="cancho-helper-")
    atexit.register(shutil.rmtree, tmp, True)
    src, out = os.path.join(tmp, "measure.c"), os.path.join(tmp, "measure")
    with open(src, "w") as f:
        f.write(SOURCE)
    done = subprocess.run([*cc, "-O2", "-o", out, src], capture_output=True)
    return out if done.returncode == 0 else None


def parse_trap(text: str) -> Optional[int]:
    """The trap site number the launcher's line ends with, if the program trapped at one."""
    words = text.split()
    return int(words[4]) if len(words) == 5 and words[4].isdigit() else None


def parse_report(text: str) -> Optional[tuple[int, float, float, int]]:
    """(wait status, user seconds, sys seconds, peak RSS KiB) from the launcher's line."""
    try:
        status, user, system, rss = text.split()[:4] if len(text.split()) == 5 else text.split()
        return int(status), int(user) / 1e6, int(system) / 1e6, int(rss)
    except ValueError:
        return None
