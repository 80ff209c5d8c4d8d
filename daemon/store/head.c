/* SPDX-License-Identifier: MIT */
#include "store/head.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "util.h"

#define HEAD_PACK_VERSION 1

#define FIELD(f) offsetof(struct sample, f)
static const struct pack_field head_fields[] = {
        { FIELD(interval_us), PACK_U64 },
        { FIELD(cpu_pct), PACK_DOUBLE },
        { FIELD(cpu_time_ns), PACK_U64 },
        { FIELD(user_time_ns), PACK_U64 },
        { FIELD(system_time_ns), PACK_U64 },
        { FIELD(rss_bytes), PACK_U64 },
        { FIELD(rss_anon_bytes), PACK_U64 },
        { FIELD(peak_rss_bytes), PACK_U64 },
        { FIELD(threads), PACK_U32 },
        { FIELD(processes), PACK_U32 },
        { FIELD(pss_bytes), PACK_U64 },
        { FIELD(pss_anon_bytes), PACK_U64 },
        { FIELD(uss_bytes), PACK_U64 },
        { FIELD(read_bytes), PACK_U64 },
        { FIELD(write_bytes), PACK_U64 },
        { FIELD(rchar_bytes), PACK_U64 },
        { FIELD(wchar_bytes), PACK_U64 },
        { FIELD(read_bytes_per_s), PACK_DOUBLE },
        { FIELD(write_bytes_per_s), PACK_DOUBLE },
        { FIELD(netns_rx_bytes), PACK_U64 },
        { FIELD(netns_tx_bytes), PACK_U64 },
        { FIELD(netns_rx_bytes_per_s), PACK_DOUBLE },
        { FIELD(netns_tx_bytes_per_s), PACK_DOUBLE },
        { FIELD(gpu_mem_bytes), PACK_U64 },
        { FIELD(gpu_util_pct), PACK_DOUBLE },
        { FIELD(energy_j), PACK_DOUBLE },
};
static const size_t head_flags[] = {
        FIELD(has_cpu_pct),  FIELD(has_rss),     FIELD(has_peak_rss), FIELD(has_pss),
        FIELD(has_pss_anon), FIELD(has_io),      FIELD(has_io_rate),  FIELD(has_net),
        FIELD(has_net_rate), FIELD(has_gpu_mem), FIELD(has_gpu_util), FIELD(has_energy),
};
_Static_assert(ELEMENTSOF(head_fields) == HEAD_FIELDS, "HEAD_FIELDS counts the head's figures");

static const struct pack_layout head_layout = { .version = HEAD_PACK_VERSION,
                                                .fields = head_fields,
                                                .n_fields = ELEMENTSOF(head_fields),
                                                .flags = head_flags,
                                                .n_flags = ELEMENTSOF(head_flags) };

size_t head_pack(const struct sample *m, uint8_t buf[static HEAD_PACKED_MAX]) {
        return pack_struct(&head_layout, m, buf);
}

int head_unpack(int64_t ts, const void *data, size_t len, struct sample *ret) {
        struct sample m = { .ts_ms = ts };
        if (unpack_struct(&head_layout, data, len, &m) < 0)
                return -EBADMSG;
        *ret = m;
        return 0;
}

/* ---- the migration from columns (sql/014) -------------------------------- */

/* The columns of version 13's samples after ts, in their order, grouped by
 * the flag that says whether they are known (else they were NULL; the
 * group's first column sets the flag): their type and where they lie. */
#define ALWAYS 0
static const struct column_group {
        enum pack_type type;
        size_t known;     /* the flag's offset; ALWAYS: always known */
        size_t fields[4]; /* offsets; 0 ends the list (ts_ms lies there) */
} column_groups[] = {
        { PACK_DOUBLE, FIELD(has_cpu_pct), { FIELD(cpu_pct) } },
        { PACK_U64, ALWAYS, { FIELD(cpu_time_ns), FIELD(user_time_ns), FIELD(system_time_ns) } },
        { PACK_U64, FIELD(has_rss), { FIELD(rss_bytes), FIELD(rss_anon_bytes) } },
        { PACK_U64, FIELD(has_peak_rss), { FIELD(peak_rss_bytes) } },
        { PACK_U32, ALWAYS, { FIELD(threads), FIELD(processes) } },
        { PACK_U64, FIELD(has_io), { FIELD(read_bytes), FIELD(write_bytes), FIELD(rchar_bytes), FIELD(wchar_bytes) } },
        { PACK_DOUBLE, FIELD(has_io_rate), { FIELD(read_bytes_per_s), FIELD(write_bytes_per_s) } },
        { PACK_U64, FIELD(has_net), { FIELD(netns_rx_bytes), FIELD(netns_tx_bytes) } },
        { PACK_DOUBLE, FIELD(has_net_rate), { FIELD(netns_rx_bytes_per_s), FIELD(netns_tx_bytes_per_s) } },
        { PACK_U64, FIELD(has_gpu_mem), { FIELD(gpu_mem_bytes) } },
        { PACK_DOUBLE, FIELD(has_gpu_util), { FIELD(gpu_util_pct) } },
        { PACK_DOUBLE, FIELD(has_energy), { FIELD(energy_j) } },
        { PACK_U64, ALWAYS, { FIELD(interval_us) } },
        { PACK_U64, FIELD(has_pss), { FIELD(pss_bytes), FIELD(uss_bytes) } },
        { PACK_U64, FIELD(has_pss_anon), { FIELD(pss_anon_bytes) } },
};
#undef ALWAYS
#undef FIELD

/* Column v into the field: whether it was not NULL. */
static bool column_read(sqlite3_value *v, enum pack_type type, char *field) {
        if (sqlite3_value_type(v) == SQLITE_NULL)
                return false;
        if (type == PACK_DOUBLE) {
                double d = sqlite3_value_double(v);
                memcpy(field, &d, sizeof d);
                return true;
        }
        int64_t x = sqlite3_value_int64(v);
        uint64_t u = x < 0 ? 0 : (uint64_t)x; /* a negative value read 0 */
        if (type == PACK_U32)
                *(uint32_t *)field = u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
        else
                memcpy(field, &u, sizeof u);
        return true;
}

static void head_pack_sql(sqlite3_context *c, int argc, sqlite3_value **v) {
        struct sample m = {};
        char *base = (char *)&m;
        int k = 0;
        for (size_t i = 0; i < ELEMENTSOF(column_groups); i++) {
                const struct column_group *g = &column_groups[i];
                for (size_t j = 0; j < ELEMENTSOF(g->fields) && g->fields[j] && k < argc; j++) {
                        bool known = column_read(v[k++], g->type, base + g->fields[j]);
                        if (j == 0 && g->known)
                                *(bool *)(base + g->known) = known;
                }
        }
        uint8_t buf[HEAD_PACKED_MAX];
        size_t n = head_pack(&m, buf);
        sqlite3_result_blob(c, buf, (int)n, SQLITE_TRANSIENT);
}

int head_register_pack(sqlite3 *db) {
        int rc = sqlite3_create_function_v2(db, "head_pack", HEAD_FIELDS, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                            head_pack_sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}
