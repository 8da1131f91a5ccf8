/* Built against an installed atomio with `cc pc_smoke.c $(pkg-config --cflags --libs atomio)`
 * (packaging/test-install.sh): a server inside this process, a client, a file written
 * atomically and read back; prints which libatomio.so it ran (dladdr), which the test
 * checks is the installed one.   pc_smoke DATA_DIR */
#define _GNU_SOURCE
#include "atomio.h"
#include <dlfcn.h>
#include <stdio.h>
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pc_smoke DATA_DIR\n");
        return 2;
    }
    Dl_info info;
    if (!dladdr((void *)atomio_connect, &info) || !info.dli_fname) {
        fprintf(stderr, "dladdr failed\n");
        return 1;
    }
    atomio_server *server = NULL;
    CHECK(atomio_server_start("127.0.0.1:0", argv[1], 0, &server));
    const char *addr = atomio_server_address(server);
    atomio_client *client = NULL;
    CHECK(atomio_connect(&addr, 1, &client));
    atomio_file *file = NULL;
    CHECK(atomio_open(client, "/pc_smoke", ATOMIO_CREATE | ATOMIO_EXCL, 4096, 0, &file));
    CHECK(atomio_set_atomic(file, "ching:datatype:one-try"));
    uint64_t offs[2] = {100, 9000}, lens[2] = {5, 6};
    CHECK(atomio_write_list(file, 2, offs, lens, "hello world", 11));
    char back[12] = {0};
    CHECK(atomio_read_list(file, 2, offs, lens, back, 11));
    uint64_t size = 0;
    CHECK(atomio_size(file, &size));
    if (memcmp(back, "hello world", 11) != 0 || size != 9006) {
        fprintf(stderr, "read back \"%s\", size %llu\n", back, (unsigned long long)size);
        return 1;
    }
    CHECK(atomio_close(file));
    atomio_disconnect(client);
    CHECK(atomio_server_stop(server));
    printf("pc_smoke ok: %s\n", info.dli_fname);
    return 0;
}
