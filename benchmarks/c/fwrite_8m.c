/* 8 MiB to stdout as 131,072 fwrite calls of one prepared 64-byte line.
 * C twin of benchmarks/programs/write_bytes_8m.cho (runtime.md §10.1 "C, fwrite per 64-byte line").
 * Build: cc -O2 fwrite_8m.c -o fwrite_8m */
#include <stdio.h>

static const char line[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijk\n";

int main(void) {
    const size_t width = sizeof line - 1; /* 64 */
    long total = 0;
    for (long n = 0; n < 131072; n++) {
        total += (long)fwrite(line, 1, width, stdout);
    }
    return total == 8388608 ? 0 : 1;
}
