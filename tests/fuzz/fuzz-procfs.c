/* SPDX-License-Identifier: MIT */
/* libFuzzer target: every proc_parse_*() on the same NUL-terminated input,
 * and discovery's environ (the raw bytes) and cgroup parsers.
 *
 *   tools/fuzz.sh 60 procfs */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect/discover.h"
#include "collect/procfs-host.h"
#include "collect/procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;

        struct proc_stat st;
        if (proc_parse_stat(text, &st) == 0 && strnlen(st.comm, sizeof st.comm) >= sizeof st.comm)
                abort(); /* comm must stay NUL-terminated */

        char state = 0;
        int exit_status = 0;
        if (proc_parse_stat_exit(text, &state, &exit_status) == 0 && (exit_status < 0 || exit_status > 0xffff))
                abort();
        (void)proc_state_name(state);

        struct proc_statm statm;
        (void)proc_parse_statm(text, &statm);
        struct proc_schedstat ss;
        (void)proc_parse_schedstat(text, &ss);
        struct proc_io io;
        (void)proc_parse_io(text, &io);
        struct proc_status status;
        (void)proc_parse_status(text, &status);
        struct proc_smaps sm;
        if (proc_parse_smaps_rollup(text, &sm) == 0 && !sm.has_pss_anon && sm.pss_anon_bytes != 0)
                abort(); /* an absent Pss_Anon is no figure */
        struct proc_netdev nd;
        (void)proc_parse_netdev(text, &nd);
        struct proc_cpu_total cpu;
        if (proc_parse_cpu_total(text, &cpu) == 0 && cpu.ncpus == 0)
                abort();
        struct proc_meminfo mem;
        (void)proc_parse_meminfo(text, &mem);
        struct proc_loadavg la;
        (void)proc_parse_loadavg(text, &la);
        /* 8125 is the StatsD port, also the one the corpus seeds bind */
        struct proc_udp_socket us, *all = NULL;
        size_t n_all = 0;
        if (proc_parse_net_udp_all(text, false, &all, &n_all) < 0 && n_all > 0)
                abort(); /* a table without a header has no socket */
        free(all);
        (void)proc_parse_net_udp_line(text, text + size, &us);

        /* discovered values are NUL-terminated, 1..DISCOVER_VALUE_MAX bytes */
        struct discovered d = {};
        discover_parse_environ((const char *)data, size, &d);
        (void)discover_parse_cgroup(text, &d);
        for (enum discover_tag t = 0; t < _DT_MAX; t++)
                if (strnlen(d.value[t], sizeof d.value[t]) >= sizeof d.value[t])
                        abort();

        _cleanup_free_ int *pids = NULL;
        size_t n = 0;
        if (proc_parse_pid_list(text, &pids, &n) == 0)
                for (size_t i = 0; i < n; i++)
                        if (pids[i] <= 0)
                                abort();
        return 0;
}
