/* 8 MiB to stdout as 131,072 fwrite calls, copying the 64-byte line byte by byte
 * into a buffer before every write. C twin of benchmarks/programs/fill_8m.cho
 * (runtime.md §10.1 "C, filled byte by byte"; cc -O2 is expected to vectorise the copy).
 * Build: cc -O2 fill_8m.c -o fill_8m */
#include <stdio.h>

static const char line[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijk\n";

int main(void) {
    const size_t width = sizeof line - 1; /* 64 */
    char buf[64] = {0};
    long total = 0;
    for (long n = 0; n < 131072; n++) {
        for (size_t k = 0; k < width; k++) {
            buf[k] = line[k];
        }
        total += (long)fwrite(buf, 1, sizeof buf, stdout);
    }
    return total == 8388608 ? 0 : 1;
}
