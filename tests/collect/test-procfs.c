/* SPDX-License-Identifier: MIT */
/* Unit tests for the procfs parsers (daemon/collect/procfs*.c):
 * table-driven parser cases, and the readers against the fixture tree
 * tests/fixtures/proc-basic (test-procfs-live.c reads the live /proc,
 * test-procfs-host.c has the parsers of the host-wide files).
 *
 * Usage: test-procfs [FIXTURES_DIR]   (or FIXTURES_DIR in the environment) */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collect/procfs-host.h"
#include "collect/procfs.h"
#include "tap.h"

/* ---- stat --------------------------------------------------------------- */

/* fields 3..24, the ones the parser reads, and 3..52 of a real line; the
 * values below are what the parser must see */
#define FIELDS_3_24 "S 1 100 100 0 -1 4194560 2500 7 12 3 350 120 0 0 20 0 3 0 123456 1048576000 25600"
#define TAIL                                                                                                  \
        FIELDS_3_24 " "                                                                                       \
                    "18446744073709551615 94000000000000 94000000100000 140730000000000 0 0 0 65536 3686404 " \
                    "1266761467 0 0 0 17 3 0 0 0 0 0 94000000200000 94000000300000 94000001000000 "           \
                    "140730000001000 140730000001020 140730000001020 140730000002000 0\n"

/* "1234 (bash) " TAIL with field `field` replaced by word, into buf. */
static void stat_with_field(unsigned field, const char *word, char *buf, size_t size) {
        char tail[] = TAIL, *save = NULL;
        size_t n = (size_t)snprintf(buf, size, "1234 (bash)");
        unsigned f = 3;

        for (char *w = strtok_r(tail, " \n", &save); w; w = strtok_r(NULL, " \n", &save), f++)
                n += (size_t)snprintf(buf + n, size - n, " %s", f == field ? word : w);
        CHECK(n + 1 < size);
        strcat(buf, "\n");
}

static void test_stat(void) {
        static const struct {
                const char *name, *text;
                int r;
                int pid;
                const char *comm;
        } cases[] = {
                { "normal", "1234 (bash) " TAIL, 0, 1234, "bash" },
                { "no newline", "1234 (bash) " FIELDS_3_24, 0, 1234, "bash" },
                { "spaces", "77 (tmux: server) " TAIL, 0, 77, "tmux: server" },
                { "paren", "77 (a)b) " TAIL, 0, 77, "a)b" },
                { "paren at end", "77 (x)) " TAIL, 0, 77, "x)" },
                { "paren space paren", "77 (a) (b) " TAIL, 0, 77, "a) (b" },
                { "fake fields", "77 (evil) R 9 9 9) " TAIL, 0, 77, "evil) R 9 9 9" },
                { "newline", "77 (a\nb) " TAIL, 0, 77, "a\nb" },
                { "0xff bytes",
                  "77 (\xff\xfe"
                  "x\xff) " TAIL,
                  0, 77,
                  "\xff\xfe"
                  "x\xff" },
                { "empty comm", "77 () " TAIL, 0, 77, "" },
                { "long comm", "77 (0123456789012345678901234567890123456789012345678901234567890123456789) " TAIL, 0,
                  77, "012345678901234567890123456789012345678901234567890123456789012" },
                { "truncated", "1234 (bash) S 1 100 100 0 -1 4194560 2500 7 12", -EINVAL, 0, NULL },
                { "cut after comm", "1234 (bash)", -EINVAL, 0, NULL },
                { "cut in comm", "1234 (bash", -EINVAL, 0, NULL },
                { "empty", "", -EINVAL, 0, NULL },
                { "no pid", "(bash) " TAIL, -EINVAL, 0, NULL },
                { "bad pid", "12a4 (bash) " TAIL, -EINVAL, 0, NULL },
                { "negative pid", "-1 (bash) " TAIL, -EINVAL, 0, NULL },
                { "no space after comm", "1234 (bash)" FIELDS_3_24, -EINVAL, 0, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct proc_stat st;
                memset(&st, 0xaa, sizeof st);
                int r = proc_parse_stat(cases[i].text, &st);
                CHECK_CASE(cases[i].name, r == cases[i].r);
                if (r != 0 || cases[i].r != 0) {
                        /* outputs untouched on failure */
                        CHECK_CASE(cases[i].name, r == 0 || st.pid == (int)0xaaaaaaaa);
                        continue;
                }
                CHECK_CASE(cases[i].name, st.pid == cases[i].pid);
                CHECK_CASE(cases[i].name, streq(st.comm, cases[i].comm));
                CHECK_CASE(cases[i].name, st.state == 'S');
                CHECK_CASE(cases[i].name, st.ppid == 1);
                CHECK_CASE(cases[i].name, st.flags == 4194560);
                CHECK_CASE(cases[i].name, !(st.flags & PROC_PF_KTHREAD));
                CHECK_CASE(cases[i].name, st.minflt == 2500);
                CHECK_CASE(cases[i].name, st.majflt == 12);
                CHECK_CASE(cases[i].name, st.utime_ticks == 350);
                CHECK_CASE(cases[i].name, st.stime_ticks == 120);
                CHECK_CASE(cases[i].name, st.num_threads == 3);
                CHECK_CASE(cases[i].name, st.starttime_ticks == 123456);
                CHECK_CASE(cases[i].name, st.vsize_bytes == 1048576000);
                CHECK_CASE(cases[i].name, st.rss_pages == 25600);
        }

        /* the "normal" line with one field (by its proc(5) number) replaced */
        static const struct {
                unsigned field;
                const char *word;
                int r;
        } bad_fields[] = {
                { 3, "SS", -EINVAL },                                     /* long state */
                { 4, "2147483648", -ERANGE },                             /* ppid */
                { 9, "4294967296", -ERANGE },                             /* flags */
                { 10, "-2500", -EINVAL },                                 /* negative minflt */
                { 14, "18446744073709551616", -ERANGE },                  /* utime */
                { 14, "1844674407370955161600000000000000000", -ERANGE }, /* very long */
                { 14, "35x", -EINVAL },                                   /* junk */
                { 20, "3.0", -EINVAL },                                   /* num_threads */
                { 24, "9223372036854775808", -ERANGE },                   /* rss, signed */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_fields); i++) {
                char line[sizeof "1234 (bash) " TAIL + 64];
                struct proc_stat st;

                stat_with_field(bad_fields[i].field, bad_fields[i].word, line, sizeof line);
                memset(&st, 0xaa, sizeof st);
                CHECK_CASE(bad_fields[i].word, proc_parse_stat(line, &st) == bad_fields[i].r);
                CHECK_CASE(bad_fields[i].word, st.pid == (int)0xaaaaaaaa); /* outputs untouched */
        }

        /* kernel thread: ppid 0, PF_KTHREAD, no mm */
        struct proc_stat st;
        CHECK_R(proc_parse_stat("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 20 0 1 0 24 0 0 "
                                "18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 1 0 0 0 0 0 "
                                "0 0 0 0 0 0 0 0\n",
                                &st),
                0);
        CHECK(st.pid == 2 && st.ppid == 0 && streq(st.comm, "kthreadd"));
        CHECK(st.flags & PROC_PF_KTHREAD);
        CHECK(st.stime_ticks == 3 && st.vsize_bytes == 0 && st.rss_pages == 0 && st.starttime_ticks == 24);
        CHECK(st.num_threads == 1);

        /* max values */
        CHECK_R(proc_parse_stat("2147483647 (x) R 2147483647 0 0 0 -1 4294967295 18446744073709551615 0 "
                                "18446744073709551615 0 18446744073709551615 18446744073709551615 0 0 20 0 "
                                "9223372036854775807 0 18446744073709551615 18446744073709551615 "
                                "9223372036854775807\n",
                                &st),
                0);
        CHECK(st.pid == INT32_MAX && st.ppid == INT32_MAX && st.flags == UINT32_MAX && st.state == 'R');
        CHECK(st.minflt == UINT64_MAX && st.majflt == UINT64_MAX && st.utime_ticks == UINT64_MAX);
        CHECK(st.num_threads == INT64_MAX && st.rss_pages == INT64_MAX && st.vsize_bytes == UINT64_MAX);
}

/* ---- stat: the state and the exit status -------------------------------- */

/* The 52 fields of a zombie's stat (a real one, of `sh -c 'kill -9 $$'`
 * before its parent reaped it), with field 52 given. */
#define STAT_4_51                                                                                                \
        " 2595 3861 2595 0 -1 4227084 96 0 0 0 0 0 0 0 20 0 1 0 30576 0 0 18446744073709551615 0 0 0 0 0 0 0 0 " \
        "0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0"
#define ZOMBIE_3_51 "Z" STAT_4_51

static void test_stat_exit(void) {
        static const struct {
                const char *name, *text;
                int r;
                char state;
                int status;
        } cases[] = {
                { "killed by SIGKILL", "3861 (sh) " ZOMBIE_3_51 " 9\n", 0, 'Z', 9 },
                { "exit 3", "3861 (sh) " ZOMBIE_3_51 " 768", 0, 'Z', 3 << 8 },
                { "core dump", "3861 (a) b) " ZOMBIE_3_51 " 139\n", 0, 'Z', 0x80 | 11 },
                /* a process that runs: its exit_code field is 0 */
                { "running", "1234 (bash) R" STAT_4_51 " 0", 0, 'R', 0 },
                /* a kernel before 3.5 prints 44 fields: fewer than 52 is no exit status */
                { "old kernel", "3861 (sh) Z 2595 3861 2595 0 -1 4227084 96 0 0 0 0 0 0 0 20 0", -ENODATA, 0, 0 },
                { "over 16 bits", "3861 (sh) " ZOMBIE_3_51 " 65536", -ERANGE, 0, 0 },
                { "negative", "3861 (sh) " ZOMBIE_3_51 " -1", -ERANGE, 0, 0 },
                { "junk", "3861 (sh) " ZOMBIE_3_51 " 9x", -EINVAL, 0, 0 },
                { "long state", "3861 (sh) ZZ 1", -EINVAL, 0, 0 },
                { "no paren", "3861 sh Z", -EINVAL, 0, 0 },
                { "nothing after comm", "3861 (sh)", -EINVAL, 0, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char state = '?';
                int status = -7;
                int r = proc_parse_stat_exit(cases[i].text, &state, &status);
                CHECK_CASE(cases[i].name, r == cases[i].r);
                if (r == 0)
                        CHECK_CASE(cases[i].name, state == cases[i].state && status == cases[i].status);
                else
                        CHECK_CASE(cases[i].name, state == '?' && status == -7); /* outputs untouched */
        }
        static const struct {
                char state;
                const char *name;
        } names[] = {
                { 'R', "running" }, { 'S', "sleeping" }, { 'I', "sleeping" }, { 'D', "disk-sleep" }, { 'T', "stopped" },
                { 't', "stopped" }, { 'Z', "zombie" },   { 'X', "zombie" },   { 'W', NULL },         { 0, NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                const char *got = proc_state_name(names[i].state);
                CHECK_CASE(names[i].name ? names[i].name : "none",
                           names[i].name ? got && streq(got, names[i].name) : !got);
        }
        /* a tree's state is its worst member's: in this order */
        for (const char *w = "TDZRS"; *w; w++)
                CHECK_CASE("badness", proc_state_badness(w[0]) > proc_state_badness(w[1]));
}

/* ---- smaps_rollup ------------------------------------------------------- */

static void test_smaps_rollup(void) {
        struct proc_smaps s;

        CHECK_R(proc_parse_smaps_rollup("55c872459000-7ffd55517000 ---p 00000000 00:00 0          [rollup]\n"
                                        "Rss:                1628 kB\nPss:                 192 kB\n"
                                        "Pss_Dirty:           112 kB\nPss_Anon:            112 kB\n"
                                        "Pss_File:             80 kB\nPss_Shmem:             0 kB\n"
                                        "Shared_Clean:       1476 kB\nShared_Dirty:          0 kB\n"
                                        "Private_Clean:        40 kB\nPrivate_Dirty:       112 kB\n"
                                        "Referenced:         1628 kB\nAnonymous:           112 kB\n"
                                        "Swap:                  0 kB\nSwapPss:               0 kB\n",
                                        &s),
                0);
        CHECK(s.rss_bytes == 1628 * 1024 && s.pss_bytes == 192 * 1024);
        CHECK(s.has_pss_anon && s.pss_anon_bytes == 112 * 1024);
        CHECK(s.private_clean_bytes == 40 * 1024 && s.private_dirty_bytes == 112 * 1024);

        /* before Linux 5.9: no Pss_Anon, which is unknown, not 0 */
        CHECK_R(proc_parse_smaps_rollup("00400000-7ffd55517000 ---p 00000000 00:00 0   [rollup]\nRss:  884 kB\n"
                                        "Pss:  213 kB\nShared_Clean:  716 kB\nPrivate_Clean:  92 kB\n"
                                        "Private_Dirty:  76 kB\n",
                                        &s),
                0);
        CHECK(!s.has_pss_anon && s.pss_bytes == 213 * 1024);

        /* a kernel thread's (or an exited process's) file is empty */
        CHECK_R(proc_parse_smaps_rollup("", &s), -EINVAL);
        CHECK_R(proc_parse_smaps_rollup("Rss: 1 kB\nPss: 1 kB\nPrivate_Clean: 1 kB\n", &s), -EINVAL);
        CHECK_R(proc_parse_smaps_rollup("Rss: 1 kB\nPss: 1 kB\nPss: 1 kB\nPrivate_Clean: 1 kB\nPrivate_Dirty: 1 kB\n",
                                        &s),
                -EINVAL);
        CHECK_R(proc_parse_smaps_rollup("Rss: 1 kB\nPss: x kB\nPrivate_Clean: 1 kB\nPrivate_Dirty: 1 kB\n", &s),
                -EINVAL);
}

/* ---- status ------------------------------------------------------------- */

static void test_status(void) {
        struct proc_status s;

        CHECK_R(proc_parse_status("Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t2595\nNgid:\t0\n"
                                  "Pid:\t2595\nPPid:\t2594\nTracerPid:\t0\nUid:\t1000\t1001\t1002\t1003\n"
                                  "Gid:\t0\t0\t0\t0\nFDSize:\t256\nGroups:\t \nVmPeak:\t    5304 kB\n"
                                  "VmHWM:\t    4300 kB\nVmRSS:\t    4200 kB\nRssAnon:\t    1268 kB\n"
                                  "RssFile:\t    3032 kB\nThreads:\t7\nSigQ:\t0/96365\n",
                                  &s),
                0);
        CHECK(s.has_tgid && s.tgid == 2595 && s.ppid == 2594);
        CHECK(s.has_uids && s.uid_real == 1000 && s.uid_effective == 1001 && s.uid_saved == 1002 && s.uid_fs == 1003);
        CHECK(s.has_vmhwm && s.vmhwm_bytes == 4300 * 1024);
        CHECK(s.has_vmrss && s.vmrss_bytes == 4200 * 1024);
        CHECK(s.has_rssanon && s.rssanon_bytes == 1268 * 1024);
        CHECK(s.has_threads && s.threads == 7);

        /* pre-4.5 kernel: no RssAnon; no VmHWM either */
        CHECK_R(proc_parse_status("Tgid:\t10\nPPid:\t1\nUid:\t0\t0\t0\t0\nVmRSS:\t     100 kB\nThreads:\t1\n", &s), 0);
        CHECK(s.has_vmrss && s.vmrss_bytes == 102400);
        CHECK(!s.has_rssanon && !s.has_vmhwm);

        /* kernel thread: no Vm / Rss lines at all */
        CHECK_R(proc_parse_status("Name:\tkthreadd\nState:\tS (sleeping)\nTgid:\t2\nPid:\t2\nPPid:\t0\n"
                                  "Uid:\t0\t0\t0\t0\nKthread:\t1\nThreads:\t1\n",
                                  &s),
                0);
        CHECK(s.has_tgid && s.tgid == 2 && s.ppid == 0 && s.has_uids && s.uid_real == 0);
        CHECK(!s.has_vmrss && !s.has_vmhwm && !s.has_rssanon);
        CHECK(s.has_threads && s.threads == 1);

        /* nothing we know: fine, nothing set */
        CHECK_R(proc_parse_status("", &s), 0);
        CHECK(!s.has_tgid && !s.has_uids && !s.has_vmrss && !s.has_threads);

        static const struct {
                const char *name, *text;
                int r;
        } bad[] = {
                { "junk kB", "VmRSS:\t   12x kB\n", -EINVAL },
                { "no unit", "VmRSS:\t   12\n", -EINVAL },
                { "wrong unit", "VmRSS:\t   12 MB\n", -EINVAL },
                { "no value", "VmRSS:\n", -EINVAL },
                { "kB overflow", "VmRSS:\t18014398509481984 kB\n", -ERANGE },
                { "3 uids", "Uid:\t0\t0\t0\n", -EINVAL },
                { "5 uids", "Uid:\t0\t0\t0\t0\t0\n", -EINVAL },
                { "uid > 32 bit", "Uid:\t4294967296\t0\t0\t0\n", -ERANGE },
                { "tgid junk", "Tgid:\tabc\n", -EINVAL },
                { "tgid range", "Tgid:\t2147483648\n", -ERANGE },
                { "threads junk", "Threads:\t1 2\n", -EINVAL },
                { "dup tgid", "Tgid:\t1\nTgid:\t2\n", -EINVAL },
                { "dup VmRSS", "VmRSS:\t1 kB\nVmRSS:\t1 kB\n", -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                memset(&s, 0xaa, sizeof s);
                CHECK_CASE(bad[i].name, proc_parse_status(bad[i].text, &s) == bad[i].r);
                CHECK_CASE(bad[i].name, s.tgid == (int)0xaaaaaaaa);
        }
}

/* ---- io ----------------------------------------------------------------- */

/* the keys between rchar and cancelled_write_bytes, all 0, and the last one */
#define IO_MIDDLE "wchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: 0\nwrite_bytes: 0\n"
#define IO_LAST "cancelled_write_bytes: 0\n"

static void test_io(void) {
        static const struct {
                const char *name, *text;
                int r;
                uint64_t rchar, cancelled;
        } cases[] = {
                { "normal",
                  "rchar: 1168749\nwchar: 60240\nsyscr: 9529\nsyscw: 357\nread_bytes: 3280896\n"
                  "write_bytes: 225280\ncancelled_write_bytes: 94208\n",
                  0, 1168749, 94208 },
                { "any order, unknown key",
                  "cancelled_write_bytes: 5\nfuture_key: 7\nwrite_bytes: 0\nread_bytes: 0\nsyscw: 0\n"
                  "syscr: 0\nwchar: 0\nrchar: 1",
                  0, 1, 5 },
                { "max uint64",
                  "rchar: 18446744073709551615\n" IO_MIDDLE "cancelled_write_bytes: 18446744073709551615\n", 0,
                  UINT64_MAX, UINT64_MAX },
                { "overflow", "rchar: 18446744073709551616\n" IO_MIDDLE IO_LAST, -ERANGE, 0, 0 },
                { "missing key", "rchar: 1\n" IO_MIDDLE, -EINVAL, 0, 0 },
                { "duplicate key", "rchar: 1\nrchar: 2\n" IO_MIDDLE IO_LAST, -EINVAL, 0, 0 },
                { "negative", "rchar: -1\n" IO_MIDDLE IO_LAST, -EINVAL, 0, 0 },
                { "trailing junk", "rchar: 1 2\n" IO_MIDDLE IO_LAST, -EINVAL, 0, 0 },
                { "prefix is not the key", "xrchar: 1\n" IO_MIDDLE IO_LAST, -EINVAL, 0, 0 },
                { "empty", "", -EINVAL, 0, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct proc_io io;
                memset(&io, 0xaa, sizeof io);
                int r = proc_parse_io(cases[i].text, &io);
                CHECK_CASE(cases[i].name, r == cases[i].r);
                if (cases[i].r < 0) {
                        CHECK_CASE(cases[i].name, io.rchar == UINT64_C(0xaaaaaaaaaaaaaaaa));
                        continue;
                }
                CHECK_CASE(cases[i].name, io.rchar == cases[i].rchar);
                CHECK_CASE(cases[i].name, io.cancelled_write_bytes == cases[i].cancelled);
        }

        struct proc_io io;
        CHECK_R(proc_parse_io(cases[0].text, &io), 0);
        CHECK(io.wchar == 60240 && io.syscr == 9529 && io.syscw == 357 && io.read_bytes == 3280896 &&
              io.write_bytes == 225280);
}

/* ---- statm, schedstat ----------------------------------------------------- */

/* statm's size, resident and shared pages, or schedstat's run, wait and
 * timeslices: the two parsers as three numbers */
static int parse_three(bool statm, const char *text, uint64_t ret[3]) {
        struct proc_statm m = {};
        struct proc_schedstat s = {};
        int r = statm ? proc_parse_statm(text, &m) : proc_parse_schedstat(text, &s);

        ret[0] = statm ? m.size_pages : s.run_ns;
        ret[1] = statm ? m.resident_pages : s.wait_ns;
        ret[2] = statm ? m.shared_pages : s.timeslices;
        return r;
}

static void test_statm_schedstat(void) {
        static const struct {
                const char *name;
                bool statm; /* else schedstat */
                const char *text;
                int r;
                uint64_t want[3];
        } cases[] = {
                { "statm", true, "1251 993 758 193 0 270 0\n", 0, { 1251, 993, 758 } },
                { "statm kernel thread", true, "0 0 0 0 0 0 0\n", 0, { 0, 0, 0 } },
                { "statm no newline", true, "1 2 3 4 5 6 7", 0, { 1, 2, 3 } },
                { "statm six fields", true, "1 2 3 4 5 6\n", -EINVAL, {} },
                { "statm junk", true, "1 2 x 4 5 6 7\n", -EINVAL, {} },
                { "statm overflow", true, "18446744073709551616 2 3 4 5 6 7\n", -ERANGE, {} },
                { "statm empty", true, "", -EINVAL, {} },
                { "schedstat", false, "17551182 2041199 53\n", 0, { 17551182, 2041199, 53 } },
                { "schedstats off", false, "0 0 0\n", 0, { 0, 0, 0 } },
                { "schedstat two fields", false, "1 2\n", -EINVAL, {} },
                { "schedstat negative", false, "-1 2 3\n", -EINVAL, {} },
                { "schedstat empty", false, "", -EINVAL, {} },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t v[3];
                CHECK_CASE(cases[i].name, parse_three(cases[i].statm, cases[i].text, v) == cases[i].r);
                CHECK_CASE(cases[i].name, memcmp(v, cases[i].want, sizeof v) == 0); /* all 0 on failure */
        }
}

/* ---- net/dev -------------------------------------------------------------- */

#define NETDEV_HDR                                                                                 \
        "Inter-|   Receive                                                |  Transmit\n"           \
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs " \
        "drop fifo colls carrier compressed\n"
#define NETDEV_LO \
        "    lo:    3267      29    0    0    0     0          0         0     3267      29    0    0    0     0       0          0\n"

static void test_netdev(void) {
        static const struct {
                const char *name, *text;
                int r;
                uint64_t rx_bytes, rx_packets, tx_bytes, tx_packets;
                unsigned interfaces;
        } cases[] = {
                { "lo only", NETDEV_HDR NETDEV_LO, 0, 0, 0, 0, 0, 0 },
                { "headers only", NETDEV_HDR, 0, 0, 0, 0, 0, 0 },
                { "two interfaces",
                  NETDEV_HDR NETDEV_LO
                  "  eth0: 8273645    6021    0    0    0     0          0         0   912345    4012    0    0    0     0       0          0\n"
                  "  eth1:    1000      10    1    2    0     0          0         3      500       5    0    0    0     0       0          0\n",
                  0, 8274645, 6031, 912845, 4017, 2 },
                { "no space after colon",
                  NETDEV_HDR
                  "  eth0:123 4 0 0 0 0 0 0 56 7 0 0 0 0 0 0\n"
                  "wlan0:1234567890      10    0    0    0     0          0         0      500       5    0    0    0     0       0          0\n",
                  0, 1234568013, 14, 556, 12, 2 },
                { "no trailing newline", NETDEV_HDR "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", 0, 1, 2, 9, 10,
                  1 },
                { "missing field", NETDEV_HDR "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "no colon", NETDEV_HDR "  eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "no name", NETDEV_HDR "  : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "junk in lo", NETDEV_HDR "  lo: 1 2 3 x 5 6 7 8 9 10 11 12 13 14 15 16\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "sum overflow",
                  NETDEV_HDR
                  "a: 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\nb: 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
                  -ERANGE, 0, 0, 0, 0, 0 },
                { "one header line", "Inter-|   Receive\n", -EINVAL, 0, 0, 0, 0, 0 },
                { "empty", "", -EINVAL, 0, 0, 0, 0, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct proc_netdev nd = {};
                CHECK_CASE(cases[i].name, proc_parse_netdev(cases[i].text, &nd) == cases[i].r);
                CHECK_CASE(cases[i].name, nd.rx_bytes == cases[i].rx_bytes && nd.rx_packets == cases[i].rx_packets);
                CHECK_CASE(cases[i].name, nd.tx_bytes == cases[i].tx_bytes && nd.tx_packets == cases[i].tx_packets);
                CHECK_CASE(cases[i].name, nd.interfaces == cases[i].interfaces);
        }
}

static void test_pid_list(void) {
        _cleanup_free_ int *pids = NULL;
        size_t n = 0;

        CHECK_R(proc_parse_pid_list("", &pids, &n), 0);
        CHECK(n == 0 && pids == NULL);
        CHECK_R(proc_parse_pid_list("\n", &pids, &n), 0);
        CHECK(n == 0);
        CHECK_R(proc_parse_pid_list("101 102 ", &pids, &n), 0);
        CHECK(n == 2 && pids[0] == 101 && pids[1] == 102);
        CHECK_R(proc_parse_pid_list("7", &pids, &n), 0);
        CHECK(n == 3 && pids[2] == 7);

        int *before = pids;
        CHECK_R(proc_parse_pid_list("5 abc", &pids, &n), -EINVAL);
        CHECK_R(proc_parse_pid_list("5 0", &pids, &n), -EINVAL);
        CHECK_R(proc_parse_pid_list("-5", &pids, &n), -EINVAL);
        CHECK_R(proc_parse_pid_list("2147483648", &pids, &n), -ERANGE);
        CHECK(n == 3 && pids == before && pids[2] == 7);

        /* growth beyond the initial capacity */
        char big[8192] = "";
        size_t len = 0;
        for (int i = 1; i <= 1000; i++)
                len += (size_t)snprintf(big + len, sizeof big - len, "%d ", i);
        CHECK_R(proc_parse_pid_list(big, &pids, &n), 0);
        CHECK(n == 1003 && pids[3] == 1 && pids[1002] == 1000);
}

/* ---- readers over the fixture tree --------------------------------------- */

static void check_cmdline(int piddir, size_t max, const char *want) {
        _cleanup_free_ char *cmdline = NULL;
        CHECK_R(proc_read_cmdline(piddir, max, &cmdline), 0);
        CHECK_STR(cmdline, want);
}

/* The host files, and what a missing root gives. */
static void fixture_host(const char *root) {
        char boot_id[64];
        CHECK_R(proc_read_boot_id(root, boot_id), 0);
        CHECK(streq(boot_id, "0f6a3c4e-5b2d-4e8f-9a1b-2c3d4e5f6a7b"));

        struct proc_cpu_total c;
        CHECK_R(proc_read_host_cpu(root, &c), 0);
        CHECK(c.ncpus == 2 && c.user == 1337 && c.steal == 9);

        struct proc_meminfo m;
        CHECK_R(proc_read_meminfo(root, &m), 0);
        CHECK(m.has_available && m.total_bytes == UINT64_C(24684100) * 1024 &&
              m.swap_free_bytes == UINT64_C(2000000) * 1024);

        struct proc_loadavg l;
        CHECK_R(proc_read_loadavg(root, &l), 0);
        CHECK(l.running == 2 && l.total == 345 && l.load1 > 0.519 && l.load1 < 0.521);

        CHECK_R(proc_open_pid_dir(root, 999), -ENOENT);
        CHECK_R(proc_open_pid_dir(root, 0), -EINVAL);
        CHECK_R(proc_read_boot_id("/nonexistent-proc-root", boot_id), -ENOENT);
        CHECK_R(proc_read_loadavg("/nonexistent-proc-root", &l), -ENOENT);
}

/* 100: normal process, two threads */
static void fixture_process(const char *root) {
        _cleanup_close_ int fd = proc_open_pid_dir(root, 100);
        CHECK(fd >= 0);

        struct proc_stat st;
        CHECK_R(proc_read_stat(fd, &st), 0);
        CHECK(st.pid == 100 && streq(st.comm, "python3") && st.state == 'S' && st.ppid == 1);
        CHECK(st.utime_ticks == 350 && st.stime_ticks == 120 && st.num_threads == 2 && st.rss_pages == 25600);
        CHECK(st.starttime_ticks == 123456 && st.vsize_bytes == 1048576000 && !(st.flags & PROC_PF_KTHREAD));

        struct proc_statm sm;
        CHECK_R(proc_read_statm(fd, &sm), 0);
        CHECK(sm.size_pages == 256000 && sm.resident_pages == 25600 && sm.shared_pages == 5120);

        struct proc_status s;
        CHECK_R(proc_read_status(fd, &s), 0);
        CHECK(s.tgid == 100 && s.ppid == 1 && s.uid_real == 1000 && s.threads == 2);
        CHECK(s.has_vmrss && s.vmrss_bytes == 102400 * 1024 && s.rssanon_bytes == 81920 * 1024 &&
              s.vmhwm_bytes == 110000 * 1024);

        struct proc_io io;
        CHECK_R(proc_read_io(fd, &io), 0);
        CHECK(io.rchar == 1168749 && io.write_bytes == 225280 && io.cancelled_write_bytes == 94208);

        struct proc_schedstat ss;
        CHECK_R(proc_read_schedstat(fd, &ss), 0);
        CHECK(ss.run_ns == 17551182 && ss.wait_ns == 2041199 && ss.timeslices == 53);

        struct proc_netdev nd;
        CHECK_R(proc_read_netdev(fd, &nd), 0);
        CHECK(nd.interfaces == 2 && nd.rx_bytes == 8274645 && nd.tx_packets == 4017);

        uint64_t ino = 0;
        CHECK_R(proc_read_netns_inode(fd, &ino), 0);
        CHECK(ino == UINT64_C(4026531840));

        check_cmdline(fd, 4096, "python3 -m http.server");
        check_cmdline(fd, 5, "pytho");
        check_cmdline(fd, 8, "python3"); /* "python3\0" -> trailing separator trimmed */

        _cleanup_free_ int *kids = NULL;
        size_t nkids = 0;
        CHECK_R(proc_read_children(fd, &kids, &nkids), 0);
        CHECK(nkids == 2 && kids && kids[0] == 101 && kids[1] == 102); /* 102 listed by both threads */
        /* one thread's list alone */
        _cleanup_free_ int *own = NULL, *other = NULL;
        size_t nown = 0, nother = 0;
        CHECK_R(proc_read_thread_children(fd, 103, &own, &nown), 0);
        CHECK(nown == 1 && own[0] == 102);
        CHECK_R(proc_read_thread_children(fd, 104, &other, &nother), -ENOENT);
}

/* 101, 102 and the kernel thread 2 */
static void fixture_others(const char *root) {
        struct proc_stat st;
        struct proc_status s;
        struct proc_statm sm;
        struct proc_io io;
        struct proc_schedstat ss;
        struct proc_netdev nd;
        uint64_t ino = 0;

        /* 101: child, comm with a space and parens; no children */
        _cleanup_close_ int fd101 = proc_open_pid_dir(root, 101);
        CHECK(fd101 >= 0);
        CHECK_R(proc_read_stat(fd101, &st), 0);
        CHECK(st.pid == 101 && streq(st.comm, "worker (1)") && st.state == 'R' && st.ppid == 100);
        check_cmdline(fd101, 4096, "worker --id 1");
        _cleanup_free_ int *none = NULL;
        size_t nnone = 99;
        CHECK_R(proc_read_children(fd101, &none, &nnone), 0);
        CHECK(nnone == 0 && none == NULL);
        CHECK_R(proc_read_netns_inode(fd101, &ino), -ENOENT);
        CHECK_R(proc_read_netdev(fd101, &nd), -ENOENT);

        /* 102: no io file, no task dir */
        _cleanup_close_ int fd102 = proc_open_pid_dir(root, 102);
        CHECK(fd102 >= 0);
        CHECK_R(proc_read_stat(fd102, &st), 0);
        CHECK(st.pid == 102 && st.ppid == 100);
        memset(&io, 0xaa, sizeof io);
        int r = proc_read_io(fd102, &io);
        CHECK_R(r, -ENOENT);
        CHECK(proc_errno_is_gone(r));
        CHECK(io.rchar == UINT64_C(0xaaaaaaaaaaaaaaaa));
        CHECK_R(proc_read_children(fd102, &none, &nnone), -ENOENT);
        CHECK_R(proc_read_schedstat(fd102, &ss), -ENOENT);

        /* 2: kernel thread */
        _cleanup_close_ int fd2 = proc_open_pid_dir(root, 2);
        CHECK(fd2 >= 0);
        CHECK_R(proc_read_stat(fd2, &st), 0);
        CHECK(st.pid == 2 && st.ppid == 0 && (st.flags & PROC_PF_KTHREAD) && streq(st.comm, "kthreadd"));
        CHECK_R(proc_read_status(fd2, &s), 0);
        CHECK(s.has_tgid && s.tgid == 2 && !s.has_vmrss && !s.has_vmhwm && !s.has_rssanon && s.has_threads);
        CHECK_R(proc_read_statm(fd2, &sm), 0);
        CHECK(sm.size_pages == 0 && sm.resident_pages == 0 && sm.shared_pages == 0);
        check_cmdline(fd2, 4096, "");
}

static void test_fixture(const char *fixtures) {
        char root[4096];
        snprintf(root, sizeof root, "%s/proc-basic", fixtures);

        fixture_host(root);
        fixture_process(root);
        fixture_others(root);
}

/* ---- an unreadable file ------------------------------------------------- */

static void test_unreadable(const char *fixtures) {
        char tmp[] = "/tmp/test-procfs-XXXXXX", path[4096];
        CHECK(mkdtemp(tmp) != NULL);

        /* a copy of a process dir with a readable stat and a broken io */
        char src[4096];
        _cleanup_free_ char *stat_text = NULL;
        snprintf(src, sizeof src, "%s/proc-basic/100/stat", fixtures);
        CHECK_R(read_file_at(AT_FDCWD, src, 4096, &stat_text, NULL), 0);
        snprintf(path, sizeof path, "%s/stat", tmp);
        FILE *f = fopen(path, "we");
        CHECK(f && fputs(stat_text ? stat_text : "", f) >= 0);
        if (f)
                fclose(f);

        snprintf(path, sizeof path, "%s/io", tmp);
        int want;
        if (geteuid() == 0) {
                /* root bypasses permission checks: make the read fail anyway */
                CHECK(mkdir(path, 0755) == 0);
                want = -EISDIR;
        } else {
                f = fopen(path, "we");
                CHECK(f && fputs("rchar: 1\n", f) >= 0);
                if (f)
                        fclose(f);
                CHECK(chmod(path, 0) == 0);
                want = -EACCES;
        }

        _cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        struct proc_io io;
        memset(&io, 0xaa, sizeof io);
        CHECK_R(proc_read_io(fd, &io), want);
        CHECK(io.rchar == UINT64_C(0xaaaaaaaaaaaaaaaa));
        struct proc_stat st;
        CHECK_R(proc_read_stat(fd, &st), 0);
        CHECK(st.pid == 100);

        /* a stat that only parses when cut short must not be accepted */
        snprintf(path, sizeof path, "%s/statm", tmp);
        f = fopen(path, "we");
        CHECK(f != NULL);
        if (f) {
                for (int i = 0; i < 100; i++)
                        fputs("1 2 3 4 5 6 7 ", f);
                fclose(f);
        }
        struct proc_statm sm;
        CHECK_R(proc_read_statm(fd, &sm), -EFBIG);

        /* a task dir without children files: CONFIG_PROC_CHILDREN=n */
        snprintf(path, sizeof path, "%s/task", tmp);
        CHECK(mkdir(path, 0755) == 0);
        snprintf(path, sizeof path, "%s/task/100", tmp);
        CHECK(mkdir(path, 0755) == 0);
        _cleanup_free_ int *kids = NULL;
        size_t nkids = 0;
        CHECK_R(proc_read_children(fd, &kids, &nkids), -EOPNOTSUPP);
        CHECK(rmdir(path) == 0);
        snprintf(path, sizeof path, "%s/task", tmp);
        CHECK(rmdir(path) == 0);

        snprintf(path, sizeof path, "%s/io", tmp);
        if (geteuid() == 0)
                CHECK(rmdir(path) == 0);
        else
                CHECK(unlink(path) == 0);
        snprintf(path, sizeof path, "%s/stat", tmp);
        CHECK(unlink(path) == 0);
        snprintf(path, sizeof path, "%s/statm", tmp);
        CHECK(unlink(path) == 0);
        CHECK(rmdir(tmp) == 0);
}

int main(int argc, char *argv[]) {
        const char *fixtures = argc > 1 ? argv[1] : getenv("FIXTURES_DIR");

        if (!fixtures) {
                fprintf(stderr, "usage: %s FIXTURES_DIR (or set $FIXTURES_DIR)\n", argv[0]);
                return 2;
        }

        test_stat();
        test_stat_exit();
        test_status();
        test_smaps_rollup();
        test_io();
        test_statm_schedstat();
        test_netdev();
        test_pid_list();
        test_fixture(fixtures);
        test_unreadable(fixtures);

        TEST_DONE();
}
