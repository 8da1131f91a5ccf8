/* Strategy versioning through the C ABI: a server inside this process; the user's file
 * (direct placement) holds a base; three writes become three snapshots, each read back by
 * number while the user's file is untouched; atomio_materialize puts the newest into the
 * user's file (twice: idempotent); the same on a server file (exported); bad input. */
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
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);           \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

#define BASE 64
#define SIZE 110

/* The file as version v (0: the base alone) has it, bytes [0, SIZE). */
static void expected(int v, unsigned char *out)
{
    memset(out, 0, SIZE);
    memset(out, 'b', BASE);
    if (v >= 1)
        memset(out, 'A', 16); /* v1: [0, 16) */
    if (v >= 2)
        memset(out + 8, 'B', 16); /* v2: [8, 24) */
    if (v >= 3)
        memset(out + 100, 'C', 10); /* v3: [100, 110), past the base's end */
}

/* The whole ordinary file at `path` into `out` (cap bytes); its length. */
static long slurp(const char *path, unsigned char *out, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(out, 1, cap, f);
    fclose(f);
    return (long)n;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: versions DATA_DIR USER_FILE EXPORT_PATH\n");
        return 2;
    }
    const char *path = argv[2];
    unsigned char want[SIZE], got[SIZE + 16];

    /* The user's file before atomio: the base. */
    FILE *uf = fopen(path, "wb");
    ASSERT(uf != NULL);
    memset(got, 'b', BASE);
    ASSERT(fwrite(got, 1, BASE, uf) == BASE);
    fclose(uf);

    atomio_server *server = NULL;
    CHECK(atomio_server_start("127.0.0.1:0", argv[1], 0, &server));
    const char *addr = atomio_server_address(server);
    atomio_client *client = NULL;
    CHECK(atomio_connect(&addr, 1, &client));
    atomio_file *file = NULL;
    CHECK(atomio_open_direct(client, path, 0, &file));
    uint64_t latest = 99;
    EXPECT(atomio_latest_version(file, &latest), ATOMIO_EINVAL); /* atomic mode off */
    CHECK(atomio_materialize(file));                              /* no-op */
    CHECK(atomio_set_atomic(file, "versioning"));
    CHECK(atomio_latest_version(file, &latest));
    ASSERT(latest == 0);

    uint64_t off[3] = {0, 8, 100}, len[3] = {16, 16, 10};
    const char fill[3] = {'A', 'B', 'C'};
    for (int v = 1; v <= 3; v++) {
        unsigned char data[16];
        memset(data, fill[v - 1], sizeof data);
        CHECK(atomio_write_list(file, 1, &off[v - 1], &len[v - 1], data, len[v - 1]));
        CHECK(atomio_latest_version(file, &latest));
        ASSERT(latest == (uint64_t)v);
    }
    uint64_t size = 0;
    CHECK(atomio_size(file, &size));
    ASSERT(size == SIZE);

    /* Every version by number; the newest also by an ordinary read. */
    uint64_t all_off = 0, all_len = SIZE, base_len = BASE;
    for (int v = 1; v <= 3; v++) {
        expected(v, want);
        memset(got, 0xee, sizeof got);
        /* v1 and v2 end with the base (64 bytes); v3 at 110 */
        uint64_t *l = v < 3 ? &base_len : &all_len;
        CHECK(atomio_read_version(file, (uint64_t)v, 1, &all_off, l, got, (size_t)*l));
        ASSERT(memcmp(got, want, (size_t)*l) == 0);
    }
    CHECK(atomio_read_list(file, 1, &all_off, &all_len, got, SIZE));
    ASSERT(memcmp(got, want, SIZE) == 0);
    /* Two ranges of version 2 in one call. */
    uint64_t two_off[2] = {4, 20}, two_len[2] = {8, 8};
    CHECK(atomio_read_version(file, 2, 2, two_off, two_len, got, 16));
    expected(2, want);
    ASSERT(memcmp(got, want + 4, 8) == 0 && memcmp(got + 8, want + 20, 8) == 0);

    /* The user's file is still the base: versions live on the servers. */
    expected(0, want);
    ASSERT(slurp(path, got, sizeof got) == BASE && memcmp(got, want, BASE) == 0);

    /* Bad input: clear codes, never a crash. */
    EXPECT(atomio_read_version(file, 0, 1, &all_off, &base_len, got, BASE), ATOMIO_EINVAL);
    if (strstr(atomio_last_error(), "version 0") == NULL)
        return 1;
    EXPECT(atomio_read_version(file, 4, 1, &all_off, &base_len, got, BASE), ATOMIO_ENOTFOUND);
    if (strstr(atomio_last_error(), "not assigned") == NULL)
        return 1;
    EXPECT(atomio_read_version(file, 1, 1, &all_off, &all_len, got, SIZE), ATOMIO_EINVAL); /* past v1's end */
    EXPECT(atomio_read_version(file, 1, 1, &all_off, &base_len, NULL, BASE), ATOMIO_EINVAL);
    EXPECT(atomio_read_version(file, 1, 1, &all_off, &base_len, got, BASE - 1), ATOMIO_EINVAL);
    EXPECT(atomio_read_version(NULL, 1, 1, &all_off, &base_len, got, BASE), ATOMIO_EINVAL);
    EXPECT(atomio_latest_version(file, NULL), ATOMIO_EINVAL);
    EXPECT(atomio_latest_version(NULL, &latest), ATOMIO_EINVAL);
    EXPECT(atomio_materialize(NULL), ATOMIO_EINVAL);

    /* Materialize: the user's file becomes the newest snapshot; again changes nothing. */
    expected(3, want);
    for (int i = 0; i < 2; i++) {
        CHECK(atomio_materialize(file));
        ASSERT(slurp(path, got, sizeof got) == SIZE && memcmp(got, want, SIZE) == 0);
    }
    CHECK(atomio_size(file, &size));
    ASSERT(size == SIZE);
    /* Older snapshots are gone with the base they stood on; the materialized one reads. */
    EXPECT(atomio_read_version(file, 2, 1, &all_off, &base_len, got, BASE), ATOMIO_ENOTFOUND);
    CHECK(atomio_read_version(file, 3, 1, &all_off, &all_len, got, SIZE));
    ASSERT(memcmp(got, want, SIZE) == 0);
    EXPECT(atomio_export(file, path), ATOMIO_EINVAL); /* onto its own base */
    ASSERT(slurp(path, got, sizeof got) == SIZE && memcmp(got, want, SIZE) == 0);
    CHECK(atomio_close(file));

    /* Another strategy: materialize does nothing, snapshots are refused. */
    CHECK(atomio_open_direct(client, path, 0, &file));
    CHECK(atomio_set_atomic(file, "ching:datatype:one-try"));
    CHECK(atomio_materialize(file));
    EXPECT(atomio_latest_version(file, &latest), ATOMIO_EINVAL);
    EXPECT(atomio_read_version(file, 1, 1, &all_off, &base_len, got, BASE), ATOMIO_EINVAL);
    CHECK(atomio_close(file));

    /* Servers placement: the base is the server file's objects. */
    CHECK(atomio_open(client, "/versions", ATOMIO_CREATE | ATOMIO_EXCL, 4096, 0, &file));
    CHECK(atomio_set_atomic(file, "versioning"));
    CHECK(atomio_write_list(file, 1, &off[0], &len[0], "AAAAAAAAAAAAAAAA", 16));
    CHECK(atomio_write_list(file, 1, &off[1], &len[1], "BBBBBBBBBBBBBBBB", 16));
    CHECK(atomio_latest_version(file, &latest));
    ASSERT(latest == 2);
    /* The export is the newest snapshot, before any materialization. */
    CHECK(atomio_export(file, argv[3]));
    ASSERT(slurp(argv[3], got, sizeof got) == 24);
    ASSERT(memcmp(got, "AAAAAAAABBBBBBBBBBBBBBBB", 24) == 0);
    /* The base (read with atomic mode off) is empty until materialized. */
    CHECK(atomio_set_atomic(file, NULL));
    CHECK(atomio_size(file, &size));
    ASSERT(size == 0);
    CHECK(atomio_set_atomic(file, "versioning"));
    CHECK(atomio_materialize(file));
    CHECK(atomio_set_atomic(file, NULL));
    uint64_t srv_len = 24;
    memset(got, 0, sizeof got);
    CHECK(atomio_read_list(file, 1, &all_off, &srv_len, got, 24));
    ASSERT(memcmp(got, "AAAAAAAABBBBBBBBBBBBBBBB", 24) == 0);
    CHECK(atomio_close(file));

    atomio_disconnect(client);
    CHECK(atomio_server_stop(server));
    printf("versions ok\n");
    return 0;
}
