/* SPDX-License-Identifier: MIT */
/* The config parser on arbitrary bytes: it must accept or reject, never
 * crash, and a rejected file must leave no half-applied value behind in the
 * scratch config the daemon would then throw away (checked by ASan/LSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        struct config c;
        char err[256];
        if (config_init_defaults(&c) == 0) {
                if (config_load_string(&c, text, "fuzz", err, sizeof err) == 0)
                        (void)config_validate(&c, err, sizeof err);
                /* every value the parser accepted is within its bounds */
                if (c.interval_usec < MIN_INTERVAL_USEC || c.interval_usec > MAX_INTERVAL_USEC)
                        abort();
                config_done(&c);
        }
        free(text);
        return 0;
}
