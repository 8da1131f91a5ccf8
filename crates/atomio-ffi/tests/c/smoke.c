/* The C ABI end to end: a server inside this process, a client, a subarray view written
 * atomically and read back, the file exported as an ordinary file, and bad input. */
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

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: smoke DATA_DIR EXPORT_PATH\n");
        return 2;
    }
    atomio_server *server = NULL;
    CHECK(atomio_server_start("127.0.0.1:0", argv[1], 0, &server));
    const char *addr = atomio_server_address(server);
    atomio_client *client = NULL;
    CHECK(atomio_connect(&addr, 1, &client));
    atomio_file *file = NULL;
    CHECK(atomio_open(client, "/smoke", ATOMIO_CREATE | ATOMIO_EXCL, 4096, 0, &file));
    CHECK(atomio_set_atomic(file, "ching:datatype:one-try"));
    if (!atomio_get_atomic(file)) return 1;

    /* A 10x20 array of 8-byte elements; this client's 3x4 block at (2, 5). */
    atomio_pattern *elem = NULL, *sub = NULL;
    CHECK(atomio_pattern_bytes(8, &elem));
    uint64_t sizes[2] = {10, 20}, subs[2] = {3, 4}, starts[2] = {2, 5};
    CHECK(atomio_pattern_subarray(2, sizes, subs, starts, 0, elem, &sub));
    uint64_t size, extent, data_end, nodes;
    int monotone;
    CHECK(atomio_pattern_info(sub, &size, &extent, &data_end, &nodes, &monotone));
    if (size != 96 || extent != 1600 || !monotone) return 1;

    unsigned char data[96], back[96];
    for (int i = 0; i < 96; i++) data[i] = (unsigned char)(i + 1);
    CHECK(atomio_write_view(file, 0, sub, 0, data, sizeof data));
    CHECK(atomio_read_view(file, 0, sub, 0, back, sizeof back));
    if (memcmp(data, back, sizeof data) != 0) return 1;
    uint64_t fsize = 0;
    CHECK(atomio_size(file, &fsize));
    if (fsize != (4 * 20 + 9) * 8) return 1; /* one past element (4, 8) */

    /* Lists, gather/scatter of a memory type, resize, export. */
    uint64_t offs[2] = {2000, 2100}, lens[2] = {4, 4};
    CHECK(atomio_write_list(file, 2, offs, lens, "abcdefgh", 8));
    atomio_pattern *memv = NULL;
    CHECK(atomio_pattern_hvector(4, 1, 16, elem, &memv)); /* every other 8-byte slot */
    unsigned char src[64], packed[32], dst[64];
    for (int i = 0; i < 64; i++) src[i] = (unsigned char)i;
    CHECK(atomio_gather(memv, 1, src, sizeof src, packed, sizeof packed));
    if (packed[8] != 16) return 1;
    memset(dst, 0, sizeof dst);
    CHECK(atomio_scatter(memv, 1, packed, sizeof packed, dst, sizeof dst));
    if (dst[16] != 16 || dst[8] != 0) return 1;
    CHECK(atomio_set_size(file, 3000));
    CHECK(atomio_size(file, &fsize));
    if (fsize != 3000) return 1;
    CHECK(atomio_export(file, argv[2]));

    /* Bad input: clear codes and messages, never a crash. */
    EXPECT(atomio_write_view(file, 0, NULL, 0, data, 96), ATOMIO_EINVAL);
    if (strstr(atomio_last_error(), "filetype") == NULL) return 1;
    EXPECT(atomio_write_view(file, 0, sub, 0, data, 0), ATOMIO_EINVAL);
    EXPECT(atomio_gather(memv, 1, src, 40, packed, sizeof packed), ATOMIO_EINVAL); /* span too short */
    EXPECT(atomio_write_list(file, 2, offs, lens, NULL, 8), ATOMIO_EINVAL);
    uint64_t overlap_offs[2] = {0, 2}, overlap_lens[2] = {4, 4};
    EXPECT(atomio_write_list(file, 2, overlap_offs, overlap_lens, "abcdefgh", 8), ATOMIO_EINVAL);
    uint64_t huge_off = UINT64_MAX - 1, huge_len = 4;
    EXPECT(atomio_write_list(file, 1, &huge_off, &huge_len, "abcd", 4), ATOMIO_EINVAL);
    EXPECT(atomio_set_atomic(file, "fcntl-please"), ATOMIO_EINVAL);
    EXPECT(atomio_open(client, "/missing", 0, 0, 0, &file), ATOMIO_ENOTFOUND);
    EXPECT(atomio_set_atomic(NULL, NULL), ATOMIO_EINVAL);
    EXPECT(atomio_pattern_hvector(1, 1, 1, NULL, &memv), ATOMIO_EINVAL);

    atomio_pattern_free(memv);
    atomio_pattern_free(sub);
    atomio_pattern_free(elem);
    CHECK(atomio_close(file));
    atomio_disconnect(client);
    CHECK(atomio_server_stop(server));
    printf("smoke ok\n");
    return 0;
}
