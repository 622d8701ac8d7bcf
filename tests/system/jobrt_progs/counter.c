/* counter: a deterministic job for checkpoint tests.  Usage: counter INPUT OUTPUT LOG N
 * Reads 8-byte records with read(), keeps state on the heap, the stack and in FP registers,
 * writes with stdio (OUTPUT, stdout) and with write() (LOG), churns malloc, sleeps and reads the
 * clock.  The output depends only on INPUT and N. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    int in = open(argv[1], O_RDONLY);
    FILE *out = fopen(argv[2], "w");
    int log = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    long n = atol(argv[4]);
    if (in < 0 || !out || log < 0)
        return 3;
    double acc = 0.5;
    uint64_t h = 1469598103934665603ULL;
    uint64_t *heap = calloc(4096, sizeof *heap);
    char *ring[16] = {0};
    volatile uint64_t stackbuf[64] = {0};
    for (long i = 0; i < n; i++) {
        uint64_t rec;
        if (read(in, &rec, 8) != 8) {
            lseek(in, 0, SEEK_SET);
            if (read(in, &rec, 8) != 8)
                return 4;
        }
        h = (h ^ rec) * 1099511628211ULL;
        acc = acc * 1.000001 + (double)(rec % 1000) / 7.0;
        heap[i % 4096] += h;
        stackbuf[i % 64] ^= h;
        free(ring[i % 16]);
        ring[i % 16] = malloc(1 + h % 70000);
        memset(ring[i % 16], (int)i, 1 + h % 70000);
        fprintf(out, "%ld %016llx %.6f %llx\n", i, (unsigned long long)h, acc,
                (unsigned long long)stackbuf[(i * 7) % 64]);
        if (i % 10 == 0) {
            char line[80];
            int len = snprintf(line, sizeof line, "log %ld %llx\n", i,
                               (unsigned long long)heap[i % 4096]);
            if (write(log, line, len) != len)
                return 5;
        }
        if (i % 50 == 0) {
            printf("progress %ld\n", i);
            fflush(stdout);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        usleep(300);
    }
    fclose(out);
    close(log);
    printf("done %016llx %.3f\n", (unsigned long long)h, acc);
    return 0;
}
