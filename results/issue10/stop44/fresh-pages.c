// Probe: does a reader's p99 grow when part of what it reads moves to freshly written pages
// (copy-on-write, as versioning's chunks), against writers that overwrite in place?
// usage: fresh DIR MODE(fresh|inplace) SECONDS
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define MB (1L << 20)
#define W 4
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  const char *dir = argv[1]; int fresh = strcmp(argv[2], "fresh") == 0 ? 1 : strcmp(argv[2], "fresh-unaligned") == 0 ? 2 : 0; double secs = atof(argv[3]);
  int fd[W]; char p[512];
  volatile uint64_t *latest = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  volatile int *stop = (volatile int *)(latest + 64);
  char *wbuf = aligned_alloc(4096, 4 * MB); memset(wbuf, 7, 4 * MB);
  for (int w = 0; w < W; w++) {
    snprintf(p, sizeof p, "%s/w%d", dir, w); fd[w] = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    pwrite(fd[w], wbuf, 4 * MB, 0); latest[w] = 1 * MB + MB / 2;
  }
  char *rbuf = aligned_alloc(4096, 4 * MB);
  char *maps[W] = {0};
  if (getenv("MAPPED")) for (int w = 0; w < W; w++) maps[w] = mmap(0, 64L << 30, PROT_READ, MAP_SHARED, fd[w], 0);
  int maxn = 200000; double *lat = malloc(sizeof(double) * maxn); char *chg = malloc(maxn);
  for (int phase = 0; phase < 2; phase++) {
    pid_t kids[W] = {0};
    if (phase == 1) {
      *stop = 0;
      for (int w = 0; w < W; w++) if ((kids[w] = fork()) == 0) {
        setpriority(PRIO_PROCESS, 0, 10);
        uint64_t off = 0; double next = now() + 0.05 * w / W;
        while (!*stop) {
          while (now() < next) usleep(1000);
          next += 0.05;
          if (fresh) { off += 4 * MB + (fresh == 2 ? 12288 : 0); if (getenv("RING") && off >= (uint64_t)atol(getenv("RING")) * 4 * MB) off = 0; }
          long cs = getenv("CALL") ? atol(getenv("CALL")) : MB;
          for (int i = 0; i < 4; i++) { wbuf[i * MB] ^= 1; for (long k = 0; k < MB; k += cs) pwrite(fd[w], wbuf + i * MB + k, cs, off + i * MB + k); }
          { int rb = getenv("READBACK") ? atoi(getenv("READBACK")) : 0; static char *tmp; if (!tmp) tmp = aligned_alloc(4096, 4 * MB); for (int r = 0; r < rb; r++) for (long k = 0; k < 4 * MB; k += 32768) pread(fd[w], tmp + k, 32768, off + k); }
          if (getenv("DELAY_US")) usleep(atoi(getenv("DELAY_US"))); latest[w] = off + MB + MB / 2;
        }
        _exit(0);
      }
      usleep(300000);
    }
    int n = 0; uint64_t seen[W]; for (int w = 0; w < W; w++) seen[w] = latest[w];
    double end = now() + secs;
    while (now() < end && n < maxn) {
      double t0 = now(); int c = 0;
      for (int w = 0; w < W; w++) { uint64_t o = latest[w]; if (o != seen[w]) { c = 1; seen[w] = o; } long rs = getenv("RCALL") ? atol(getenv("RCALL")) : MB; if (maps[w]) { for (long k = 0; k < MB; k += rs) memcpy(rbuf + w * MB + k, maps[w] + o + k, rs); } else { long sk = getenv("RSKIP") ? atol(getenv("RSKIP")) : 0; for (long k = 0; k < MB; k += rs) pread(fd[w], rbuf + w * MB + k, rs, o - MB / 2 + (k / rs) * (rs + sk)); } }
      lat[n] = (now() - t0) * 1e6; chg[n] = c; n++;
    }
    if (phase == 1) { *stop = 1; for (int w = 0; w < W; w++) waitpid(kids[w], 0, 0); }
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), *c2 = malloc(sizeof(double) * n); int na = 0, nb = 0;
    for (int i = 0; i < n; i++) { a[i] = lat[i]; if (chg[i]) b[nb++] = lat[i]; else c2[na++] = lat[i]; }
    qsort(a, n, sizeof(double), cmp); qsort(b, nb, sizeof(double), cmp); qsort(c2, na, sizeof(double), cmp);
    { double *k1 = malloc(sizeof(double) * n), *k2 = malloc(sizeof(double) * n); int n1 = 0, n2 = 0;
      for (int i = 2; i < n; i++) { if (chg[i - 1] && !chg[i]) k1[n1++] = lat[i]; if (chg[i - 2] && !chg[i - 1] && !chg[i]) k2[n2++] = lat[i]; }
      qsort(k1, n1, sizeof(double), cmp); qsort(k2, n2, sizeof(double), cmp);
      if (n1 && n2) printf("  k1 n=%d med=%.0f  k2 n=%d med=%.0f\n", n1, k1[n1 / 2], n2, k2[n2 / 2]); }
    printf("%s phase=%s reads=%d med=%.0f p99=%.0f | new: n=%d (%.2f%%) med=%.0f | steady med=%.0f p99=%.0f\n", argv[2], phase ? "loaded" : "idle", n, a[n / 2], a[(int)(n * 0.99)], nb, 100.0 * nb / n, nb ? b[nb / 2] : 0, c2[na / 2], c2[(int)(na * 0.99)]);
  }
  return 0;
}
