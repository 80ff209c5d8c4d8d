/* SPDX-License-Identifier: MIT */
/* Unit tests for the parsers of the host-wide files (daemon/collect/
 * procfs-host.c): /proc/stat, meminfo, loadavg and the UDP socket tables,
 * table-driven (test-procfs.c reads them from its fixture tree). */
#include <stdint.h>
#include <string.h>

#include "collect/procfs-host.h"
#include "tap.h"
#include "util.h"

/* ---- host files ----------------------------------------------------------- */

static void test_cpu_total(void) {
        struct proc_cpu_total c;

        CHECK_R(proc_parse_cpu_total("cpu  1337 5 1302 58130 353 7 24 9 0 0\n"
                                     "cpu0 426 2 466 29674 14 3 4 3 0 0\n"
                                     "cpu1 911 3 836 28456 339 4 20 6 0 0\n"
                                     "intr 1234567 0 9 0\nctxt 2345678\nbtime 1700000000\n",
                                     &c),
                0);
        CHECK(c.user == 1337 && c.nice == 5 && c.system == 1302 && c.idle == 58130 && c.iowait == 353 && c.irq == 7 &&
              c.softirq == 24 && c.steal == 9);
        CHECK(c.ncpus == 2);

        /* sparse cpu numbering (offline CPUs are not listed) */
        CHECK_R(proc_parse_cpu_total("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
                                     "cpu17 1 2 3 4 5 6 7 8 9 10\ncpu130 1 2 3 4 5 6 7 8 9 10\n",
                                     &c),
                0);
        CHECK(c.ncpus == 3 && c.steal == 8);

        memset(&c, 0, sizeof c);
        CHECK_R(proc_parse_cpu_total("cpu  1 2 3 4 5 6 7 8 0 0\n", &c), -EINVAL); /* no cpuN */
        CHECK_R(proc_parse_cpu_total("cpu0 1 2 3 4 5 6 7 8 0 0\ncpu  1 2 3 4 5 6 7 8 0 0\n", &c), -EINVAL);
        CHECK_R(proc_parse_cpu_total("cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n", &c), -EINVAL); /* 7 fields */
        CHECK_R(proc_parse_cpu_total("cpu  1 2 3 -4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", &c), -EINVAL);
        CHECK_R(proc_parse_cpu_total("cpux 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", &c), -EINVAL);
        CHECK_R(proc_parse_cpu_total("", &c), -EINVAL);
        CHECK(c.ncpus == 0 && c.user == 0);
}

static void test_meminfo(void) {
        struct proc_meminfo m;

        CHECK_R(proc_parse_meminfo("MemTotal:       24684100 kB\nMemFree:        24412528 kB\n"
                                   "MemAvailable:   24377228 kB\nBuffers:            6180 kB\n"
                                   "Cached:           119228 kB\nSwapCached:            0 kB\n"
                                   "SwapTotal:       2097148 kB\nSwapFree:        2000000 kB\n"
                                   "HugePages_Total:       0\nHugepagesize:       2048 kB\n",
                                   &m),
                0);
        CHECK(m.total_bytes == UINT64_C(24684100) * 1024 && m.free_bytes == UINT64_C(24412528) * 1024);
        CHECK(m.has_available && m.available_bytes == UINT64_C(24377228) * 1024);
        CHECK(m.buffers_bytes == 6180 * 1024 && m.cached_bytes == 119228 * 1024);
        CHECK(m.swap_total_bytes == UINT64_C(2097148) * 1024 && m.swap_free_bytes == UINT64_C(2000000) * 1024);

        /* before 3.14: no MemAvailable */
        CHECK_R(proc_parse_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\nBuffers: 1 kB\nCached: 2 kB\n"
                                   "SwapTotal: 0 kB\nSwapFree: 0 kB\n",
                                   &m),
                0);
        CHECK(!m.has_available && m.available_bytes == 0 && m.total_bytes == 102400);

        memset(&m, 0, sizeof m);
        CHECK_R(proc_parse_meminfo("MemFree: 50 kB\nBuffers: 1 kB\nCached: 2 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
                                   &m),
                -EINVAL);
        CHECK_R(proc_parse_meminfo("MemTotal: 100\nMemFree: 50 kB\nBuffers: 1 kB\nCached: 2 kB\n"
                                   "SwapTotal: 0 kB\nSwapFree: 0 kB\n",
                                   &m),
                -EINVAL);
        CHECK_R(proc_parse_meminfo("MemTotal: 100 kB\nMemTotal: 100 kB\nMemFree: 50 kB\nBuffers: 1 kB\n"
                                   "Cached: 2 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n",
                                   &m),
                -EINVAL);
        CHECK_R(proc_parse_meminfo("", &m), -EINVAL);
        CHECK(m.total_bytes == 0);
}

static void test_loadavg(void) {
        static const struct {
                const char *name, *text;
                int r;
                double l1, l5, l15;
                unsigned running, total;
        } cases[] = {
                { "normal", "0.52 0.58 0.59 2/345 12345\n", 0, 0.52, 0.58, 0.59, 2, 345 },
                { "big", "123.05 64.00 7.5 130/70000 4194303", 0, 123.05, 64.0, 7.5, 130, 70000 },
                { "integers", "1 2 3 0/1 1\n", 0, 1, 2, 3, 0, 1 },
                { "no slash", "0.52 0.58 0.59 2345 12345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "negative", "-0.52 0.58 0.59 2/345 12345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "trailing dot", "12. 0.58 0.59 2/345 12345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "leading dot", ".5 0.58 0.59 2/345 12345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "two dots", "1.2.3 0.58 0.59 2/345 12345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "exponent", "1e3 0.58 0.59 2/345 12345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "no last pid", "0.52 0.58 0.59 2/345\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "empty total", "0.52 0.58 0.59 2/ 1\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "total range", "0.52 0.58 0.59 2/4294967296 1\n", -ERANGE, 0, 0, 0, 0, 0 },
                { "empty", "", -EINVAL, 0, 0, 0, 0, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct proc_loadavg l = {};
                CHECK_CASE(cases[i].name, proc_parse_loadavg(cases[i].text, &l) == cases[i].r);
                CHECK_CASE(cases[i].name, l.load1 > cases[i].l1 - 1e-9 && l.load1 < cases[i].l1 + 1e-9);
                CHECK_CASE(cases[i].name, l.load5 > cases[i].l5 - 1e-9 && l.load5 < cases[i].l5 + 1e-9);
                CHECK_CASE(cases[i].name, l.load15 > cases[i].l15 - 1e-9 && l.load15 < cases[i].l15 + 1e-9);
                CHECK_CASE(cases[i].name, l.running == cases[i].running && l.total == cases[i].total);
        }
}

/* ---- net/udp --------------------------------------------------------------- */

#define UDP_HEADER                                                                                                       \
        "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer " \
        "drops\n"
#define UDP_LINE(port, inode)                                                                                    \
        "  339: 0100007F:" port " 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 " inode \
        " 2 0000000000000000 0\n"
#define UDP6_LINE(port, inode)                                                                       \
        " 1021: 00000000000000000000000000000000:" port " 00000000000000000000000000000000:0000 07 " \
        "00000000:00000000 00:00000000 00000000  1000        0 " inode " 2 0000000000000000 0\n"

/* The table by port, as StatsD attribution indexes it (the first socket on
 * the port), and what the table's header must be. */
static void test_net_udp(void) {
        static const struct {
                const char *name, *text;
                uint16_t port;
                int r;          /* of the table: 0, or -EINVAL without a header */
                uint64_t inode; /* 0: no socket on the port */
        } cases[] = {
                { "first", UDP_HEADER UDP_LINE("1FBD", "41234") UDP_LINE("9C40", "99887766"), 8125, 0, 41234 },
                { "second", UDP_HEADER UDP_LINE("1FBD", "41234") UDP_LINE("9C40", "99887766"), 0x9C40, 0, 99887766 },
                { "lower-case hex", UDP_HEADER UDP_LINE("9c40", "5"), 0x9C40, 0, 5 },
                { "udp6", UDP_HEADER UDP6_LINE("1FBD", "777"), 8125, 0, 777 },
                { "no final newline", UDP_HEADER "  0: 0100007F:1FBD 00000000:0000 07 0:0 0:0 0 0 0 12", 8125, 0, 12 },
                { "absent", UDP_HEADER UDP_LINE("1FBD", "41234"), 1234, 0, 0 },
                { "header only", UDP_HEADER, 1234, 0, 0 },
                { "empty", "", 1234, -EINVAL, 0 },
                { "no header newline", "sl local_address", 1234, -EINVAL, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ struct proc_udp_socket *v = NULL;
                size_t n = 0;
                uint64_t inode = 0;
                CHECK_CASE(cases[i].name, proc_parse_net_udp_all(cases[i].text, false, &v, &n) == cases[i].r);
                for (size_t k = n; k > 0; k--)
                        if (v[k - 1].local_port == cases[i].port)
                                inode = v[k - 1].inode;
                CHECK_CASE(cases[i].name, inode == cases[i].inode);
        }

        /* a line that is not a socket's */
        static const struct {
                const char *name, *line;
                int r;
        } lines[] = {
                { "garbage", " garbage: ::: ", -EINVAL },
                { "short line", "  339: 0100007F:1FBD 00000000:0000 07", -EINVAL },
                { "bad address width", "  1: 7F:1FBD 0:0 07 0:0 0:0 0 0 0 9", -EINVAL },
                { "port range", "  1: 0100007F:10000 00000000:0000 07 0:0 0:0 0 0 0 9", -EINVAL },
                { "bad inode", "  1: 0100007F:1FBD 00000000:0000 07 0:0 0:0 0 0 0 12x", -EINVAL },
                { "inode range", "  1: 0100007F:1FBD 00000000:0000 07 0:0 0:0 0 0 0 18446744073709551616", -ERANGE },
                { "no slot colon", "  1 0100007F:1FBD 00000000:0000 07 0:0 0:0 0 0 0 9", -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
                struct proc_udp_socket sock = { .inode = 0xaa };
                const char *l = lines[i].line;
                CHECK_CASE(lines[i].name, proc_parse_net_udp_line(l, l + strlen(l), &sock) == lines[i].r);
                CHECK_CASE(lines[i].name, sock.inode == 0xaa);
        }
}

/* The whole table: every well-formed socket with its owner, malformed
 * lines skipped, appended to what was there. */
static void test_net_udp_all(void) {
        _cleanup_free_ struct proc_udp_socket *v = NULL;
        size_t n = 0;
        CHECK_R(proc_parse_net_udp_all(UDP_HEADER UDP_LINE("1FBD", "41234") "  1: junk\n" UDP6_LINE("9C40", "777"),
                                       false, &v, &n),
                0);
        CHECK_EQ_INT(n, 2);
        if (n == 2) {
                CHECK_EQ_INT(v[0].local_port, 8125);
                CHECK_EQ_INT(v[0].uid, 0);
                CHECK_EQ_INT(v[0].inode, 41234);
                CHECK_EQ_INT(v[1].local_port, 0x9C40);
                CHECK_EQ_INT(v[1].uid, 1000);
                CHECK_EQ_INT(v[1].inode, 777);
                CHECK(!v[0].v6 && !v[1].v6);
        }
        CHECK_R(proc_parse_net_udp_all(UDP_HEADER UDP6_LINE("1FBD", "5"), true, &v, &n), 0);
        CHECK_EQ_INT(n, 3);
        if (n == 3)
                CHECK(v[2].v6 && v[2].inode == 5);
        CHECK_R(proc_parse_net_udp_all("", false, &v, &n), -EINVAL);
        CHECK_EQ_INT(n, 3);
}

int main(void) {
        test_cpu_total();
        test_meminfo();
        test_loadavg();
        test_net_udp();
        test_net_udp_all();
        TEST_DONE();
}
