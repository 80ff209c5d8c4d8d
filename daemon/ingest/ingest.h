/* SPDX-License-Identifier: MIT */
/* StatsD listeners: a unix datagram socket (the sender is known from
 * SCM_CREDENTIALS) and UDP (tags #run:/#pid:, else the registered process
 * that owns the sending port). Lines go through statsd.c and land in the
 * runs' op tables via the manager. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct manager;
struct ingest;

int ingest_new(struct manager *m, struct ingest **ret, char *errbuf, size_t errlen);
void ingest_free(struct ingest *g);
/* Drops the cached port -> run answers. NULL is fine. */
void ingest_forget_ports(struct ingest *g);

/* /proc/net/udp text -> the inode of the socket bound to local port `port`
 * (any address). -ENOENT if none. Pure; exposed for tests. Format:
 *   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ...
 *   12: 0100007F:9C40 0100007F:1FBD 01 00000000:00000000 00:00000000 00000000     0        0 123456 2 ...
 */
int proc_net_udp_find_port(const char *text, uint16_t port, uint64_t *ret_inode);
