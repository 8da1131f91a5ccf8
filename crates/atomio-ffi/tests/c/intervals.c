/* Interval I/O through the C ABI: filetypes encoded and decoded (as the MPI
 * library exchanges them between ranks), the interval set of 4 ranks' strided views, and
 * two direct-placement handles (ranks 0 and 1) with strategy "interval": a write inside a
 * rank's own view takes no lock request; a write into another rank's private bytes is
 * refused; with an overlapping strip only the shared bytes are locked; "auto" explains its
 * choice; bad input is an error code, never a crash.
 *
 *   intervals DATA_DIR USER_FILE */
#include "atomio.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != ATOMIO_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,           \
                    atomio_error_name(rc_), atomio_last_error());                         \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

#define EXPECT(call, code)                                                                \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != (code)) {                                                              \
            fprintf(stderr, "%s:%d: %s -> %d (%s), expected %d\n", __FILE__, __LINE__,     \
                    #call, rc_, atomio_last_error(), (code));                             \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

#define ASSERT(cond)                                                                      \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

enum { P = 4, B = 384, BLOCKS = 64 };

/* The strided view of one rank, sent as bytes and rebuilt (what MPI_Allgatherv carries). */
static int round_trip(const atomio_pattern *p, atomio_pattern **out)
{
    size_t len = 0;
    CHECK(atomio_pattern_encode(p, NULL, 0, &len));
    unsigned char *buf = malloc(len);
    ASSERT(buf);
    if (len > 1) {
        size_t got = 0;
        EXPECT(atomio_pattern_encode(p, buf, len - 1, &got), ATOMIO_ELIMIT);
        ASSERT(got == len);
    }
    CHECK(atomio_pattern_encode(p, buf, len, &len));
    CHECK(atomio_pattern_decode(buf, len, out));
    /* Trailing garbage and a truncation are refused. */
    unsigned char *more = malloc(len + 1);
    ASSERT(more);
    memcpy(more, buf, len);
    more[len] = 7;
    atomio_pattern *bad = NULL;
    EXPECT(atomio_pattern_decode(more, len + 1, &bad), ATOMIO_EMALFORMED);
    ASSERT(atomio_pattern_decode(buf, len / 2, &bad) != ATOMIO_OK);
    free(more);
    free(buf);
    return 0;
}

static int stats(atomio_file *f, atomio_io_stats *s)
{
    memset(s, 0xff, sizeof *s);
    CHECK(atomio_file_stats(f, s));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: intervals DATA_DIR USER_FILE\n");
        return 2;
    }
    atomio_server *server = NULL;
    CHECK(atomio_server_start("127.0.0.1:0", argv[1], 0, &server));
    const char *addr = atomio_server_address(server);
    atomio_client *client = NULL;
    CHECK(atomio_connect(&addr, 1, &client));

    /* Rank r owns every P-th block of B bytes: disp r*B, B bytes resized to P*B. */
    atomio_pattern *block = NULL, *ft = NULL, *got = NULL;
    CHECK(atomio_pattern_bytes(B, &block));
    CHECK(atomio_pattern_resized(P * B, block, &ft));
    if (round_trip(ft, &got))
        return 1;
    uint64_t size, extent, end, nodes;
    int mono;
    CHECK(atomio_pattern_info(got, &size, &extent, &end, &nodes, &mono));
    ASSERT(size == B && extent == P * B && mono);

    const atomio_pattern *fts[P] = {got, got, got, got};
    uint64_t disps[P];
    for (int r = 0; r < P; r++)
        disps[r] = (uint64_t)r * B;
    atomio_intervals *set = NULL;
    CHECK(atomio_intervals_from_views(P, fts, disps, 1 << 20, &set));
    atomio_interval_stats st;
    CHECK(atomio_intervals_stats(set, &st));
    ASSERT(st.ranks == P && st.shared_bytes == 0 && st.shared_intervals == 0);
    ASSERT(st.private_bytes >= (1 << 20) - P * B && st.bound >= 1 << 20);
    ASSERT(st.entries <= 16 && st.seconds >= 0);

    /* Two handles on the user's file: ranks 0 and 1. */
    atomio_file *f0 = NULL, *f1 = NULL;
    CHECK(atomio_open_direct(client, argv[2], ATOMIO_CREATE, &f0));
    CHECK(atomio_open_direct(client, argv[2], 0, &f1));
    CHECK(atomio_set_atomic(f0, "interval"));
    CHECK(atomio_set_atomic(f1, "interval"));
    CHECK(atomio_file_set_intervals(f0, set, 0));
    CHECK(atomio_file_set_intervals(f1, set, 1));
    EXPECT(atomio_file_set_intervals(f1, set, P), ATOMIO_EINVAL);
    atomio_intervals_free(set); /* the files keep theirs */

    unsigned char *data = malloc(BLOCKS * B), *back = malloc(BLOCKS * B);
    ASSERT(data && back);
    for (int i = 0; i < BLOCKS * B; i++)
        data[i] = (unsigned char)(i * 7 + 1);
    /* Each rank writes its whole view (BLOCKS blocks): no lock request at all. */
    CHECK(atomio_write_view(f0, disps[0], ft, 0, data, BLOCKS * B));
    CHECK(atomio_write_view(f1, disps[1], ft, 0, data, BLOCKS * B));
    atomio_io_stats s0, s1;
    if (stats(f0, &s0) || stats(f1, &s1))
        return 1;
    ASSERT(s0.calls == 1 && s0.lock_requests == 0 && s0.lock_messages == 0);
    ASSERT(s0.lock_free_calls == 1 && s0.interval_fallbacks == 0);
    ASSERT(s1.lock_requests == 0 && s1.lock_free_calls == 1);
    CHECK(atomio_read_view(f0, disps[0], ft, 0, back, BLOCKS * B)); /* own bytes: no lock */
    ASSERT(memcmp(data, back, BLOCKS * B) == 0);

    /* Rank 0 writing (or reading) rank 1's private block is refused (its owner moves it
     * lock-free, so no lock could order the two). */
    uint64_t off = B, len = 16;
    ASSERT(atomio_write_list(f0, 1, &off, &len, data, 16) != ATOMIO_OK);
    /* Beyond the analyzed bound: undeclared, locked, counted as a fallback. */
    uint64_t far = (uint64_t)1 << 30;
    CHECK(atomio_write_list(f0, 1, &far, &len, data, 16));
    if (stats(f0, &s0))
        return 1;
    ASSERT(s0.lock_requests > 0 && s0.interval_fallbacks == 1);

    /* Overlapping views (2048 bytes every 64 KiB from 0 and from 1024): ranks 0 and 1 both
     * see [1024, 2048); only that strip is locked. */
    atomio_pattern *a = NULL, *b = NULL;
    CHECK(atomio_pattern_bytes(2048, &a));
    CHECK(atomio_pattern_resized(65536, a, &b));
    const atomio_pattern *ov[2] = {b, b};
    uint64_t ovd[2] = {0, 1024};
    CHECK(atomio_intervals_from_views(2, ov, ovd, 4096, &set));
    CHECK(atomio_intervals_stats(set, &st));
    ASSERT(st.shared_bytes == 1024 && st.private_bytes == 2048 && st.shared_intervals == 1);
    atomio_file *g = NULL;
    CHECK(atomio_open_direct(client, argv[2], 0, &g));
    CHECK(atomio_set_atomic(g, "interval"));
    CHECK(atomio_file_set_intervals(g, set, 0));
    uint64_t priv = 0, plen = 1024;
    CHECK(atomio_write_list(g, 1, &priv, &plen, data, 1024));
    atomio_io_stats sg;
    if (stats(g, &sg))
        return 1;
    ASSERT(sg.lock_requests == 0 && sg.lock_free_calls == 1);
    uint64_t both = 512, blen = 1024; /* 512 private + 512 shared */
    CHECK(atomio_write_list(g, 1, &both, &blen, data, 1024));
    if (stats(g, &sg))
        return 1;
    ASSERT(sg.lock_requests > 0 && sg.lock_free_calls == 1 && sg.interval_fallbacks == 0);

    /* auto: explains its choice (shared bytes under two ranks' hulls on the user's file:
     * one kernel fcntl lock on the extent); nothing before a set. */
    char why[512], strat[64];
    atomio_file *h = NULL;
    CHECK(atomio_open_direct(client, argv[2], 0, &h));
    CHECK(atomio_set_atomic(h, "auto"));
    CHECK(atomio_file_explain(h, why, sizeof why));
    ASSERT(why[0] == 0);
    CHECK(atomio_file_set_intervals(h, set, 1));
    CHECK(atomio_file_explain(h, why, sizeof why));
    ASSERT(strncmp(why, "posix-fcntl: ", 13) == 0);
    CHECK(atomio_get_strategy(h, strat, sizeof strat));
    ASSERT(strcmp(strat, "posix-fcntl") == 0);
    char tiny[5];
    CHECK(atomio_file_explain(h, tiny, sizeof tiny));
    ASSERT(strcmp(tiny, "posi") == 0);
    CHECK(atomio_set_atomic(h, NULL));
    CHECK(atomio_get_strategy(h, strat, sizeof strat));
    ASSERT(strat[0] == 0);

    /* Bad input. */
    EXPECT(atomio_file_set_intervals(NULL, set, 0), ATOMIO_EINVAL);
    EXPECT(atomio_file_set_intervals(h, NULL, 0), ATOMIO_EINVAL);
    EXPECT(atomio_intervals_stats(NULL, &st), ATOMIO_EINVAL);
    EXPECT(atomio_file_stats(h, NULL), ATOMIO_EINVAL);
    EXPECT(atomio_file_explain(h, NULL, 8), ATOMIO_EINVAL);
    EXPECT(atomio_pattern_decode(NULL, 4, &got), ATOMIO_EINVAL);
    EXPECT(atomio_pattern_encode(NULL, NULL, 0, &len), ATOMIO_EINVAL);
    atomio_intervals *none = NULL;
    EXPECT(atomio_intervals_from_views(2, ov, NULL, 0, &none), ATOMIO_EINVAL);
    atomio_intervals_free(NULL);

    atomio_intervals_free(set);
    atomio_pattern_free(a);
    atomio_pattern_free(b);
    atomio_pattern_free(got);
    atomio_pattern_free(ft);
    atomio_pattern_free(block);
    free(data);
    free(back);
    CHECK(atomio_close(f0));
    CHECK(atomio_close(f1));
    CHECK(atomio_close(g));
    CHECK(atomio_close(h));
    atomio_disconnect(client);
    CHECK(atomio_server_stop(server));
    printf("intervals ok\n");
    return 0;
}
