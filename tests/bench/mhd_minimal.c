/* SPDX-License-Identifier: MIT */
/* mhd_minimal: the baseline of tests/bench/http_latency.sh. A libmicrohttpd
 * server (internal polling thread, epoll) that answers every request with
 * the same ~400-byte JSON body, as fast as libmicrohttpd can: what the
 * HTTP layer costs without any of mlmond's work.
 *
 *   mhd_minimal PORT      prints "ready PORT", serves until stdin closes */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* shaped like an answer of /v1/runs/ID/latency */
static const char BODY[] =
        "{\"window_s\":60.0,\"from\":1700000000000,\"until\":1700000060000,\"since_mark\":null,"
        "\"ops\":{\"inference\":{\"category\":\"model_inference\",\"count\":1000000,\"total_ms\":8856021.123,"
        "\"mean_ms\":8.856021123,\"stddev_ms\":5.712345678,\"min_ms\":0.617,\"max_ms\":101.482,"
        "\"p50_ms\":7.98765,\"p90_ms\":17.24567,\"p99_ms\":32.1234}},"
        "\"padding\":\"........................................................................................\"}\n";

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
        static int marker;
        /* the first call has the headers only: a response queued then makes
         * libmicrohttpd close the connection (mlmond answers on the second
         * call too, so keep-alive holds for both) */
        if (!*con_cls) {
                *con_cls = &marker;
                return MHD_YES;
        }
        *upload_data_size = 0;
        return MHD_queue_response(c, MHD_HTTP_OK, cls);
}

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: mhd_minimal PORT\n");
                return 2;
        }
        unsigned port = (unsigned)atoi(argv[1]);
        struct MHD_Response *r = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL,
                                                NULL, handler, r, MHD_OPTION_CONNECTION_LIMIT, 256U, MHD_OPTION_END);
        if (!d) {
                fprintf(stderr, "mhd_minimal: cannot start on port %u\n", port);
                return 1;
        }
        printf("ready %u body %zu bytes\n", port, sizeof BODY - 1);
        fflush(stdout);
        char buf[64];
        while (read(STDIN_FILENO, buf, sizeof buf) > 0)
                ;
        MHD_stop_daemon(d);
        MHD_destroy_response(r);
        return 0;
}
