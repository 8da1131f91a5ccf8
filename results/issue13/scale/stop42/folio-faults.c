// Cost of a write fault into an already-present large folio from a new shared mapping.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#define F (2L << 20)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  long n = 54; int fd = open("d/fold", O_RDWR | O_CREAT | O_TRUNC, 0644);
  fallocate(fd, 0, 0, n * F);
  for (int round = 0; round < 6; round++) {
    char *m = mmap(0, n * F + F, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    madvise(m, n * F, MADV_HUGEPAGE);
    double t = now();
    for (long i = 0; i < n; i++) m[i * F + 100] = round;  // one byte per folio
    double dt = now() - t;
    // then touch every page in the first folio (4K writes) to see page-level cost when mapped
    printf("round %d: %.1f us per folio fault (%s)\n", round, dt * 1e6 / n, round == 0 ? "allocate+zero" : "already present");
    munmap(m, n * F + F);
  }
  return 0;
}
