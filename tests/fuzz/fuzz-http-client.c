/* SPDX-License-Identifier: MIT */
/* libFuzzer target: mlmonctl's HTTP response parser. The first byte picks
 * how the rest is cut into reads (1 to 255 bytes each, 0: all at once); the
 * answer must be the same as when the text is parsed whole, and a body must
 * be NUL-terminated and no longer than the input.
 *
 *   tools/fuzz.sh 60 http-client */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-client.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int parse_in_reads(const uint8_t *data, size_t size, size_t step, bool head, struct http_response *ret) {
        _cleanup_(http_parser_done) struct http_parser p = { .head_request = head };
        int r = 0;
        for (size_t off = 0; off < size && r == 0; off += step)
                r = http_parser_feed(&p, data + off, size - off < step ? size - off : step);
        if (r < 0)
                return r;
        return http_parser_finish(&p, ret);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        size_t step = data[0] ? data[0] : size;
        bool head = data[0] == 0xff; /* now and then, the answer to a HEAD */
        data++;
        size--;

        struct http_response whole = {}, split = {};
        int r = http_response_parse((const char *)data, size, head, &whole);
        int k = parse_in_reads(data, size, step, head, &split);
        if (r != k)
                abort();
        if (r == 0) {
                if (whole.status < 100 || whole.status > 999 || whole.body_len > size ||
                    whole.body[whole.body_len] != 0)
                        abort();
                if (split.status != whole.status || split.body_len != whole.body_len ||
                    memcmp(split.body, whole.body, whole.body_len) != 0)
                        abort();
        }
        http_response_done(&whole);
        http_response_done(&split);
        return 0;
}
