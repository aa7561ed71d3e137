/* 8 MiB to stdout, one putchar per byte: 131,072 copies of one 64-byte line.
 * C twin of benchmarks/programs/putchar_8m.cho (runtime.md §10.1 "C, putchar per byte").
 * Build: cc -O2 putchar_8m.c -o putchar_8m
 *
 * Note: with -O2, glibc's <stdio.h> inlines putchar(c) as putc(c, stdout), whose single-thread
 * fast path skips the stream lock; the libc putchar *function* (what a compiler calling the
 * symbol gets) always locks and measured about 2x slower here (80 vs 40 ms). That is what
 * "C putchar built with cc -O2" means, as in the seed, so the twin keeps it. */
#include <stdio.h>

static const char line[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijk\n";

int main(void) {
    const long width = (long)sizeof line - 1; /* 64: the literal's NUL is not output */
    long total = 0;
    for (long n = 0; n < 131072; n++) {
        for (long k = 0; k < width; k++) {
            putchar((unsigned char)line[k]);
        }
        total += width;
    }
    return total == 8388608 ? 0 : 1;
}
