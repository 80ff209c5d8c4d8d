/* SPDX-License-Identifier: MIT */
/* StatsD listeners: a unix datagram socket (the sender is known from
 * SCM_CREDENTIALS) and UDP (tags #run:/#pid:, else the registered process
 * that owns the sending port). Lines go through statsd.c and land in the
 * runs' op tables via the manager; events become the runs' marks. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "manager-ops.h"

struct ingest;

struct ingest_options {
        sd_event *event;
        const char *proc_root; /* to find the process that owns a UDP port */
        const char *unix_path; /* statsd_socket; NULL, "" or "none": off */
        const char *udp;       /* statsd_udp HOST:PORT; NULL, "" or "none": off */
        int udp_fd;            /* the socket systemd passed for statsd_udp, or -1 */
        struct manager_link manager;
};

/* What the listeners saw: lines received, lines (and datagrams) dropped as
 * malformed, lines that reached no running run, lines whose #run:/#pid:
 * tag named a run their sender may not write to (neither root nor the
 * run's owner, or a UDP sender whose socket has no known owner). */
struct ingest_counters {
        uint64_t received, malformed, unmatched, refused;
};

int ingest_new(const struct ingest_options *o, struct ingest **ret, char *errbuf, size_t errlen);
void ingest_free(struct ingest *g);
/* NULL gives zeros. */
const struct ingest_counters *ingest_counters(const struct ingest *g);
/* Reads the datagrams queued on the listeners now (as many as one wake-up
 * would): called before an HTTP request is answered, so that the answer
 * holds every line, and every mark, that its client sent before asking.
 * NULL is fine. */
void ingest_drain(struct ingest *g);
/* The port -> run answers are stale (a run came or went): the next UDP
 * datagram that needs one rebuilds them. NULL is fine. */
void ingest_forget_ports(struct ingest *g);
