/* SPDX-License-Identifier: MIT */
/* Host-wide files below the proc root: /proc/stat, meminfo, loadavg, the
 * boot id and the UDP socket tables. */
#include "collect/procfs-host.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "collect/procfs-text.h"

/* /proc/stat, the aggregate line first, then one line per online CPU:
 *
 *   cpu  1337 0 1302 58130 353 0 24 9 0 0
 *   cpu0 426 0 466 29674 14 0 4 3 0 0
 *   cpu1 910 0 836 28456 338 0 19 6 0 0
 *   intr 1234567 ...
 *
 * user nice system idle iowait irq softirq steal guest guest_nice, in clock
 * ticks. guest and guest_nice are already counted in user and nice, so they
 * are not kept. */
int proc_parse_cpu_total(const char *text, struct proc_cpu_total *ret) {
        struct proc_cpu_total c = {};
        const char *p = text, *line, *end, *q;
        uint64_t v[8];
        int r;

        line = next_line(&p, &end);
        if (!line || !startswith(line, "cpu") || (line[3] != ' ' && line[3] != '\t'))
                return -EINVAL;
        q = line + 3;
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                r = next_u64(&q, end, &v[i]);
                if (r < 0)
                        return r;
        }

        while ((line = next_line(&p, &end)))
                if (startswith(line, "cpu") && line[3] >= '0' && line[3] <= '9')
                        c.ncpus++;
        /* there is always at least one online CPU; a zero here is a broken
         * text and would end up as a divisor */
        if (c.ncpus == 0)
                return -EINVAL;

        c.user = v[0];
        c.nice = v[1];
        c.system = v[2];
        c.idle = v[3];
        c.iowait = v[4];
        c.irq = v[5];
        c.softirq = v[6];
        c.steal = v[7];
        *ret = c;
        return 0;
}

/* /proc/meminfo, the keys we use (MemAvailable exists since 3.14):
 *
 *   MemTotal:        8123456 kB
 *   MemFree:         1234567 kB
 *   MemAvailable:    5678901 kB
 *   Buffers:          123456 kB
 *   Cached:          2345678 kB
 *   SwapCached:            0 kB
 *   ...
 *   SwapTotal:       2097148 kB
 *   SwapFree:        2097148 kB
 */
int proc_parse_meminfo(const char *text, struct proc_meminfo *ret) {
        struct proc_meminfo m = {};
        const struct proc_key keys[] = {
                { "MemTotal", value_kb, &m.total_bytes },         { "MemFree", value_kb, &m.free_bytes },
                { "Buffers", value_kb, &m.buffers_bytes },        { "Cached", value_kb, &m.cached_bytes },
                { "SwapTotal", value_kb, &m.swap_total_bytes },   { "SwapFree", value_kb, &m.swap_free_bytes },
                { "MemAvailable", value_kb, &m.available_bytes }, /* last: optional */
        };
        const unsigned required = (1u << (ELEMENTSOF(keys) - 1)) - 1;
        unsigned seen;
        int r = parse_key_values(text, keys, ELEMENTSOF(keys), &seen);
        if (r < 0)
                return r;
        if ((seen & required) != required)
                return -EINVAL;

        m.has_available = seen & (1u << (ELEMENTSOF(keys) - 1));
        *ret = m;
        return 0;
}

/* "%lu.%02lu" as the kernel prints loads, parsed by hand so the result does
 * not depend on LC_NUMERIC. */
static int word_to_load(const char *w, size_t n, double *ret) {
        const char *dot = memchr(w, '.', n);
        size_t ni = dot ? (size_t)(dot - w) : n;
        uint64_t ip;
        double v, scale = 0.1;
        int r;

        r = word_to_u64(w, ni, &ip);
        if (r < 0)
                return r;
        v = (double)ip;
        if (dot) {
                if (ni + 1 == n)
                        return -EINVAL;
                for (size_t i = ni + 1; i < n; i++, scale /= 10) {
                        if (w[i] < '0' || w[i] > '9')
                                return -EINVAL;
                        v += (w[i] - '0') * scale;
                }
        }
        *ret = v;
        return 0;
}

/* /proc/loadavg: three load averages, runnable/total scheduling entities,
 * last pid allocated.
 *
 *   0.52 0.58 0.59 2/345 12345
 */
int proc_parse_loadavg(const char *text, struct proc_loadavg *ret) {
        struct proc_loadavg l = {};
        const char *p = text, *end = text + strlen(text), *w, *slash;
        double load[3];
        uint64_t last_pid;
        size_t n;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(load); i++) {
                n = next_word(&p, end, &w);
                r = word_to_load(w, n, &load[i]);
                if (r < 0)
                        return r;
        }

        n = next_word(&p, end, &w);
        slash = memchr(w, '/', n);
        if (!slash)
                return -EINVAL;
        r = word_to_uint(w, (size_t)(slash - w), &l.running);
        if (r < 0)
                return r;
        r = word_to_uint(slash + 1, n - (size_t)(slash - w) - 1, &l.total);
        if (r < 0)
                return r;

        r = next_u64(&p, end, &last_pid);
        if (r < 0)
                return r;

        l.load1 = load[0];
        l.load5 = load[1];
        l.load15 = load[2];
        *ret = l;
        return 0;
}

/* A small file below the proc root, through read_line_at() when line is set,
 * else read_small_at(). */
static int read_host_small(const char *proc_root, const char *name, bool line, char *buf, size_t size) {
        char path[PATH_MAX];
        int r = proc_root_path(proc_root, name, path);
        if (r < 0)
                return r;
        return line ? read_line_at(AT_FDCWD, path, buf, size) : read_small_at(AT_FDCWD, path, buf, size);
}

/* sys/kernel/random/boot_id: "1b4e28ba-2fa1-11d2-883f-0016d3cca427\n" */
int proc_read_boot_id(const char *proc_root, char ret[64]) {
        char buf[64];
        int r = read_host_small(proc_root, "sys/kernel/random/boot_id", true, buf, sizeof buf);
        if (r < 0)
                return r == -EFBIG ? -EINVAL : r;
        memcpy(ret, buf, strlen(buf) + 1);
        return 0;
}

int proc_read_host_cpu(const char *proc_root, struct proc_cpu_total *ret) {
        _cleanup_free_ char *buf = NULL;
        char path[PATH_MAX];
        size_t len;
        int r;

        r = proc_root_path(proc_root, "stat", path);
        if (r < 0)
                return r;
        /* The cpu lines come first; a huge intr line may hit the cap, which
         * is harmless as long as the cpu block was read whole, so not
         * read_big_at(). */
        r = read_file_at(AT_FDCWD, path, PROC_BIG_MAX, &buf, &len);
        if (r < 0)
                return r;
        if (len >= PROC_BIG_MAX) {
                const char *p = buf, *line, *end;
                bool cut = false;

                while (!cut && (line = next_line(&p, &end))) {
                        if (!startswith(line, "cpu")) {
                                buf[line - buf] = 0;
                                cut = true;
                        } else if (*end != '\n')
                                break; /* a cpu line was cut short */
                }
                if (!cut)
                        return -EFBIG;
        }
        return proc_parse_cpu_total(buf, ret);
}

int proc_read_meminfo(const char *proc_root, struct proc_meminfo *ret) {
        _cleanup_free_ char *buf = NULL;
        char path[PATH_MAX];
        int r;

        r = proc_root_path(proc_root, "meminfo", path);
        if (r < 0)
                return r;
        r = read_big_at(AT_FDCWD, path, PROC_BIG_MAX, &buf);
        return r < 0 ? r : proc_parse_meminfo(buf, ret);
}

int proc_read_loadavg(const char *proc_root, struct proc_loadavg *ret) {
        char buf[256];
        int r = read_host_small(proc_root, "loadavg", false, buf, sizeof buf);
        return r < 0 ? r : proc_parse_loadavg(buf, ret);
}

/* /proc/net/udp and /proc/net/udp6, a header line then one socket per line
 * (udp6 has 32-digit addresses):
 *
 *    sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 *   339: 0100007F:1FBD 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 41234 2 0000000000000000 0
 *
 * Addresses and ports are hexadecimal, the inode decimal; the columns after
 * the inode are not used. */
enum udp_field { UDP_SLOT, UDP_ADDR_PORT, UDP_HEX, UDP_HEX_PAIR, UDP_DEC };

static const enum udp_field udp_columns[] = {
        UDP_SLOT,      /* sl */
        UDP_ADDR_PORT, /* local_address */
        UDP_ADDR_PORT, /* rem_address */
        UDP_HEX,       /* st */
        UDP_HEX_PAIR,  /* tx_queue:rx_queue */
        UDP_HEX_PAIR,  /* tr:tm->when */
        UDP_HEX,       /* retrnsmt */
        UDP_DEC,       /* uid */
        UDP_DEC,       /* timeout */
        UDP_DEC,       /* inode */
};

/* "HEX:HEX", the number after the colon in *ret_b. An address before the
 * colon has 8 (IPv4) or 32 (IPv6) digits. */
static int word_to_hex_pair(const char *w, size_t n, bool address, uint64_t *ret_b) {
        const char *colon = memchr(w, ':', n);
        uint64_t a;
        size_t na;
        int r;

        if (!colon)
                return -EINVAL;
        na = (size_t)(colon - w);
        if (address && na != 8 && na != 32)
                return -EINVAL;
        /* an IPv6 address is four 32-bit words: check each */
        for (size_t i = 0; i < na; i += 16) {
                r = word_to_hex(w + i, na - i < 16 ? na - i : 16, &a);
                if (r < 0)
                        return r;
        }
        return word_to_hex(colon + 1, n - na - 1, ret_b);
}

static int udp_column(enum udp_field kind, const char *w, size_t n, uint64_t *ret) {
        switch (kind) {
        case UDP_SLOT:
                if (n < 2 || w[n - 1] != ':')
                        return -EINVAL;
                return word_to_u64(w, n - 1, ret);
        case UDP_ADDR_PORT:
                return word_to_hex_pair(w, n, true, ret);
        case UDP_HEX:
                return word_to_hex(w, n, ret);
        case UDP_HEX_PAIR:
                return word_to_hex_pair(w, n, false, ret);
        case UDP_DEC:
                return word_to_u64(w, n, ret);
        }
        return -EINVAL;
}

int proc_parse_net_udp_line(const char *line, const char *end, struct proc_udp_socket *ret) {
        uint64_t v[ELEMENTSOF(udp_columns)];
        const char *p = line, *w;

        for (size_t i = 0; i < ELEMENTSOF(udp_columns); i++) {
                size_t n = next_word(&p, end, &w);
                int r = udp_column(udp_columns[i], w, n, &v[i]);
                if (r < 0)
                        return r;
        }
        if (v[1] > UINT16_MAX || v[7] > UINT32_MAX)
                return -EINVAL;

        *ret = (struct proc_udp_socket){ .local_port = (uint16_t)v[1], .uid = (uint32_t)v[7], .inode = v[9] };
        return 0;
}

int proc_parse_net_udp_all(const char *text, bool v6, struct proc_udp_socket **sockets, size_t *n) {
        const char *p = text, *line, *end;

        if (!next_line(&p, &end) || *end != '\n')
                return -EINVAL; /* no header */
        while ((line = next_line(&p, &end))) {
                struct proc_udp_socket s;
                if (proc_parse_net_udp_line(line, end, &s) < 0)
                        continue;
                if (!GREEDY_REALLOC(*sockets, *n + 1))
                        return -ENOMEM;
                s.v6 = v6;
                (*sockets)[(*n)++] = s;
        }
        return 0;
}

/* A busy host can have tens of thousands of UDP sockets, ~150 bytes each. */
#define PROC_NET_UDP_MAX (8u << 20)

int proc_read_udp_sockets(const char *proc_root, struct proc_udp_socket **sockets, size_t *n) {
        static const char *const tables[] = { "net/udp", "net/udp6" };
        int r = 0;
        bool any = false;

        for (size_t t = 0; t < ELEMENTSOF(tables); t++) {
                _cleanup_free_ char *buf = NULL;
                char path[PATH_MAX];

                r = proc_root_path(proc_root, tables[t], path);
                if (r < 0)
                        return r;
                r = read_big_at(AT_FDCWD, path, PROC_NET_UDP_MAX, &buf);
                if (r >= 0)
                        r = proc_parse_net_udp_all(buf, t == 1, sockets, n);
                if (r == -ENOMEM)
                        return r;
                any = any || r >= 0;
        }
        return any ? 0 : r;
}
