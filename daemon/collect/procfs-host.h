/* SPDX-License-Identifier: MIT */
/* Host-wide files below the proc root: /proc/stat, meminfo, loadavg, the
 * boot id and the UDP socket tables (which StatsD attribution indexes).
 * Parsers are pure functions of a NUL-terminated buffer; readers take the
 * proc root (--proc-root). The conventions of procfs.h hold. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* /proc/stat "cpu " line (aggregate) in ticks, and the number of "cpuN" lines. */
struct proc_cpu_total {
        uint64_t user, nice, system, idle, iowait, irq, softirq, steal;
        unsigned ncpus;
};
int proc_parse_cpu_total(const char *text, struct proc_cpu_total *ret);

/* /proc/meminfo, kB -> bytes. */
struct proc_meminfo {
        uint64_t total_bytes, free_bytes, available_bytes, buffers_bytes, cached_bytes, swap_total_bytes,
                swap_free_bytes;
        bool has_available;
};
int proc_parse_meminfo(const char *text, struct proc_meminfo *ret);

/* /proc/loadavg. */
struct proc_loadavg {
        double load1, load5, load15;
        unsigned running, total;
};
int proc_parse_loadavg(const char *text, struct proc_loadavg *ret);

/* /proc/net/udp{,6}: the socket bound to a local port (any address). */
struct proc_udp_socket {
        uint16_t local_port;
        bool v6;      /* from net/udp6 (set by proc_parse_net_udp_all) */
        uint32_t uid; /* the socket's owner */
        uint64_t inode;
};
/* One socket line, [line, end) without the newline. */
int proc_parse_net_udp_line(const char *line, const char *end, struct proc_udp_socket *ret);
/* Every socket of the table, appended to *sockets (grown with
 * GREEDY_REALLOC), v6 set on each. Malformed socket lines are skipped;
 * -EINVAL without a header line, -ENOMEM. */
int proc_parse_net_udp_all(const char *text, bool v6, struct proc_udp_socket **sockets, size_t *n);

int proc_read_boot_id(const char *proc_root, char ret[64]); /* sys/kernel/random/boot_id */
int proc_read_host_cpu(const char *proc_root, struct proc_cpu_total *ret);
int proc_read_meminfo(const char *proc_root, struct proc_meminfo *ret);
int proc_read_loadavg(const char *proc_root, struct proc_loadavg *ret);
/* Every UDP socket of net/udp then net/udp6, appended to *sockets: the
 * index of port -> socket that StatsD attribution uses. A missing table
 * (no IPv6) is skipped; -errno when neither can be read. */
int proc_read_udp_sockets(const char *proc_root, struct proc_udp_socket **sockets, size_t *n);
