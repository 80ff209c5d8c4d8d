/* SPDX-License-Identifier: MIT */
/* libFuzzer target for daemon/collect/cgroup.c's parsers: the input, as a
 * NUL-terminated copy, is parsed as /proc/PID/cgroup and as a limit file
 * (memory.max, memory.limit_in_bytes). Neither may crash or read past the
 * text; what they hand out must keep their promises: paths start with '/'
 * and fit their buffers, a limit is "max" (unlimited) or a number.
 *
 *   tools/fuzz.sh 60 cgroup */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "collect/cgroup.h"

#include "fuzz/fuzz-assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;

        struct cgroup_paths p;
        int r = cgroup_parse_paths(text, &p);
        fuzz_assert(r == 0 || r == -EINVAL);
        if (r == 0) {
                fuzz_assert(!p.has_v2 || (p.v2[0] == '/' && strlen(p.v2) < CGROUP_PATH_MAX));
                fuzz_assert(!p.has_v1_memory || (p.v1_memory[0] == '/' && strlen(p.v1_memory) < CGROUP_PATH_MAX));
        }

        uint64_t v = 0;
        bool unlimited = false;
        r = cgroup_parse_limit(text, &v, &unlimited);
        fuzz_assert(r == 0 || r == -EINVAL);
        if (r == 0 && !unlimited)
                fuzz_assert(v < (UINT64_C(1) << 62));
        free(text);
        return 0;
}
