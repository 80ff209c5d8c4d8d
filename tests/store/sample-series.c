/* SPDX-License-Identifier: MIT */
#include "sample-series.h"

#include "xorshift.h"

/* A process as the probe samples it: counters that grow, the rates over
 * each interval from them, an interval with a little jitter. */
void sample_series(struct sample *v, size_t n, uint64_t cpu_per_s, uint64_t rss, bool io, uint64_t *seed) {
        bool busy = cpu_per_s > 0;
        struct sample prev = {};
        for (size_t i = 0; i < n; i++) {
                struct sample s = { .ts_ms = 1800000000000 + (int64_t)i * 1000 + (int64_t)(xorshift64s(seed) % 3) };
                s.interval_us = i ? 1000000 + xorshift64s(seed) % 200 : 0;
                double dt = (double)s.interval_us / 1e6;
                uint64_t dcpu = cpu_per_s ? cpu_per_s + xorshift64s(seed) % (cpu_per_s / 10 + 1) : 0;
                s.cpu_time_ns = prev.cpu_time_ns + dcpu;
                s.user_time_ns = s.cpu_time_ns / 10000000 * 10000000;
                s.system_time_ns = 20000000;
                if (i) {
                        s.has_cpu_pct = true;
                        s.cpu_pct = (double)dcpu / 1e9 / dt * 100.0;
                }
                s.has_rss = s.has_peak_rss = true;
                s.rss_bytes = rss + (busy ? 4096 * (xorshift64s(seed) % 4) : 0);
                s.rss_anon_bytes = s.rss_bytes / 2;
                s.peak_rss_bytes = rss + 4 * 4096;
                s.threads = 4;
                s.processes = 1;
                s.has_io = true;
                uint64_t dr = io ? 4096 * (xorshift64s(seed) % 100) : 0, dw = io ? 512 * (xorshift64s(seed) % 50) : 0;
                s.read_bytes = prev.read_bytes + dr;
                s.write_bytes = prev.write_bytes + dw;
                s.rchar_bytes = prev.rchar_bytes + dr + (busy ? xorshift64s(seed) % 1000 : 0);
                s.wchar_bytes = prev.wchar_bytes + dw;
                if (i) {
                        s.has_io_rate = true;
                        s.read_bytes_per_s = (double)dr / dt;
                        s.write_bytes_per_s = (double)dw / dt;
                }
                s.has_net = true;
                uint64_t drx = busy ? xorshift64s(seed) % 3000 : 0, dtx = busy ? xorshift64s(seed) % 3000 : 0;
                s.netns_rx_bytes = prev.netns_rx_bytes + drx;
                s.netns_tx_bytes = prev.netns_tx_bytes + dtx;
                if (i) {
                        s.has_net_rate = true;
                        s.netns_rx_bytes_per_s = (double)drx / dt;
                        s.netns_tx_bytes_per_s = (double)dtx / dt;
                }
                v[i] = s;
                prev = s;
        }
}
