"""The C side of a JIT run (:data:`CHILD_SOURCE`): forked from the worker, it becomes the program.

Why a module of its own: the kernel checks and, if needed, builds this helper (chelper.py)
before it starts the JIT worker, and must not load LLVM for that (mcjit.py does); why the child
is C at all is said in mcjit.py.
"""

from __future__ import annotations

from .chelper import HelperSpec
from .confine import C_SOURCE as CONFINE_C_SOURCE
from .trapreport import HANDLER_C as TRAP_HANDLER_C

CHILD_SOURCE = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
""" + CONFINE_C_SOURCE + TRAP_HANDLER_C + r"""

/* The page the program's trap handler writes the site number to (trapreport.py): mapped
   shared when the worker loads this library, so the worker and every child it forks see it. */
static volatile uint32_t *trap_page = 0;

__attribute__((constructor)) static void map_trap_page(void) {
    void *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) trap_page = (volatile uint32_t *)p;
}

/* The site number the child `pid` (0: any child) trapped at, taken once; -1 if none. */
long long cancho_jit_trap_take(int pid) {
    if (trap_page == 0 || trap_page[0] == 0) return -1;
    if (pid != 0 && trap_page[0] != (uint32_t)pid) return -1;
    __sync_synchronize();
    long long number = (long long)trap_page[1];
    trap_page[0] = 0;
    return number;
}

typedef int (*main_fn)(int, char **);

static void fail(const char *what) {
    char buf[256];
    int n = snprintf(buf, sizeof buf,
                     "cancho: the JIT child failed before running the program: %s: %s\n",
                     what, strerror(errno));
    if (n > 0) { ssize_t w = write(2, buf, (size_t)n); (void)w; }
    _exit(127);
}

/* The address space this process has now (VmSize), bytes; 0 if unknown. */
static unsigned long long vm_size(void) {
    char buf[8192];
    size_t len = 0;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
        if (len == sizeof buf - 1) break;
    }
    close(fd);
    buf[len] = 0;
    char *p = strstr(buf, "VmSize:");
    return p ? strtoull(p + 7, NULL, 10) * 1024ULL : 0;
}

/* Close what exec would have closed: every close-on-exec descriptor above 2. */
static void close_exec_descriptors(void) {
    int victims[256];
    for (;;) {
        int n = 0, more = 0;
        DIR *d = opendir("/proc/self/fd");
        if (d == NULL) return;
        int self = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            int fd = atoi(e->d_name);
            if (fd <= 2 || fd == self) continue;
            int flags = fcntl(fd, F_GETFD);
            if (flags < 0 || !(flags & FD_CLOEXEC)) continue;
            if (n == (int)(sizeof victims / sizeof victims[0])) { more = 1; break; }
            victims[n++] = fd;
        }
        closedir(d);
        for (int i = 0; i < n; i++) close(victims[i]);
        if (!more) return;
    }
}

/* C stdio as libc sets it up lazily for a fresh process (see mcjit.py). */
static void restore_stdio(void) {
    FILE *streams[2] = {stdin, stdout};
    for (int fd = 0; fd < 2; fd++) {
        size_t size = 8192;  /* glibc's BUFSIZ, capped by the descriptor's st_blksize */
        int mode = _IOFBF;
        struct stat st;
        if (fstat(fd, &st) == 0) {
            if (st.st_blksize > 0 && (size_t)st.st_blksize < size) size = (size_t)st.st_blksize;
            if (isatty(fd)) mode = _IOLBF;
        }
        setvbuf(streams[fd], malloc(size), mode, size);
    }
    setvbuf(stderr, NULL, _IONBF, 0);
}

static void set_limit(int resource, unsigned long long soft, unsigned long long hard,
                      const char *what) {
    struct rlimit rl = {(rlim_t)soft, (rlim_t)hard};
    if (setrlimit(resource, &rl) != 0) fail(what);
}

/* Fork; in the child become the program and never return. fds[0..2]: the child's 0/1/2
   (-1 closes it); use_fds 0 keeps the inherited ones. memory/cpu/nproc/fsize < 0: no limit.
   Returns the child's pid, or -errno. */
int cancho_jit_spawn(void *entry, int argc, char **argv, int use_fds, const int *fds,
                     int own_group, int parent, long long memory, long long cpu, long long nproc,
                     long long fsize, const int *reset, int nreset, int nroots, char *const *roots) {
    if (trap_page != 0) trap_page[0] = 0;
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid > 0) return (int)pid;
    if (own_group && setpgid(0, 0) != 0) fail("setpgid");
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent) _exit(137);
    for (int i = 0; i < nreset; i++) signal(reset[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (use_fds) {
        for (int target = 0; target < 3; target++) {
            if (fds[target] < 0) {
                close(target);
            } else if (fds[target] == target) {
                int flags = fcntl(target, F_GETFD);
                if (flags >= 0) fcntl(target, F_SETFD, flags & ~FD_CLOEXEC);
            } else if (dup2(fds[target], target) < 0) {
                fail("dup2");
            }
        }
        for (int i = 0; i < 3; i++) {
            if (fds[i] > 2) close(fds[i]);
        }
    }
    close_exec_descriptors();
    if (memory >= 0) {
        unsigned long long limit = vm_size() + (unsigned long long)memory;
        set_limit(RLIMIT_AS, limit, limit, "RLIMIT_AS");
    }
    if (cpu >= 0) set_limit(RLIMIT_CPU, (unsigned long long)cpu, (unsigned long long)cpu + 1,
                            "RLIMIT_CPU");
    if (nproc >= 0) set_limit(RLIMIT_NPROC, (unsigned long long)nproc,
                              (unsigned long long)nproc, "RLIMIT_NPROC");
    if (fsize >= 0) set_limit(RLIMIT_FSIZE, (unsigned long long)fsize,
                              (unsigned long long)fsize, "RLIMIT_FSIZE");
    if (nroots >= 0) {
        int r = cancho_confine(nroots, roots);
        if (r != 0) {
            errno = -r;
            fail("Landlock");
        }
    }
    restore_stdio();
    cancho_trap_slot = trap_page;
    cancho_trap_arm();
    int status = ((main_fn)entry)(argc, argv);
    fflush(NULL);  /* what exit() does to stdio; a failed flush is ignored, as there */
    _exit(status);
}
"""

CHILD_SPEC = HelperSpec(CHILD_SOURCE, "jit-child", ("-O2", "-shared", "-fPIC"))
