/* SPDX-License-Identifier: MIT */
/* The families of GET /metrics that are not a run's: the host, its GPU/NPU
 * devices and the CPU package, and mlmond itself (metrics-host.h). */
#include "http/metrics-host.h"

#include <math.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "collect/accel/accel.h"
#include "collect/procfs-host.h"
#include "collect/procfs.h"
#include "util.h"
#include "version.h"

#define NS_PER_SEC 1e9

/* A family of one series, left out when unknown (or a counter that is not
 * finite: no rate() survives +Inf). */
static void single(struct metrics_encoder *e, const char *name, enum metric_type type, const char *help, bool known,
                   double v) {
        const struct metric_family f = { name, type, help, NULL };
        if (!known || (type == METRIC_COUNTER && !isfinite(v)))
                return;
        e->begin(e, &f);
        e->series(e, &f, &(struct metric_series){ .value = v });
        e->end(e, &f);
}

static void host_cpu(struct metrics_encoder *e, const struct manager_stats *m) {
        static const struct metric_family f = { "mlmond_host_cpu_seconds_total", METRIC_COUNTER,
                                                "CPU time of the whole host by mode, all CPUs together (/proc/stat).",
                                                NULL };
        const struct proc_cpu_total *c = &m->host_cpu;
        const struct {
                const char *mode;
                uint64_t ticks;
        } modes[] = { { "user", c->user },     { "nice", c->nice }, { "system", c->system },   { "idle", c->idle },
                      { "iowait", c->iowait }, { "irq", c->irq },   { "softirq", c->softirq }, { "steal", c->steal } };
        double tck = (double)(m->clk_tck > 0 ? m->clk_tck : 100);
        e->begin(e, &f);
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                const struct metric_label mode = { "mode", modes[i].mode };
                e->series(
                        e, &f,
                        &(struct metric_series){ .extra = &mode, .n_extra = 1, .value = (double)modes[i].ticks / tck });
        }
        e->end(e, &f);
}

void metrics_put_host(struct metrics_encoder *e, const struct manager_stats *m) {
        const struct host_sample *h = &m->host;
        const struct proc_meminfo *mem = &h->mem;
        bool avail = h->has_mem && mem->has_available;
        single(e, "mlmond_host_cpus", METRIC_GAUGE, "CPUs of the host (as /proc/stat lists them).", h->ncpus > 0,
               h->ncpus);
        if (m->has_host_cpu)
                host_cpu(e, m);
        single(e, "mlmond_host_memory_total_bytes", METRIC_GAUGE, "Memory of the host (MemTotal).", h->has_mem,
               (double)mem->total_bytes);
        single(e, "mlmond_host_memory_available_bytes", METRIC_GAUGE, "Memory available for new work (MemAvailable).",
               avail, (double)mem->available_bytes);
        single(e, "mlmond_host_memory_used_bytes", METRIC_GAUGE, "MemTotal - MemAvailable.", avail,
               (double)sat_sub_u64(mem->total_bytes, mem->available_bytes));
        single(e, "mlmond_host_swap_total_bytes", METRIC_GAUGE, "Swap space of the host (SwapTotal).", h->has_mem,
               (double)mem->swap_total_bytes);
        single(e, "mlmond_host_swap_used_bytes", METRIC_GAUGE, "SwapTotal - SwapFree.", h->has_mem,
               (double)sat_sub_u64(mem->swap_total_bytes, mem->swap_free_bytes));
        single(e, "mlmond_host_load1", METRIC_GAUGE, "1-minute load average.", h->has_load, h->load.load1);
        single(e, "mlmond_host_load5", METRIC_GAUGE, "5-minute load average.", h->has_load, h->load.load5);
        single(e, "mlmond_host_load15", METRIC_GAUGE, "15-minute load average.", h->has_load, h->load.load15);
}

/* The host's GPU/NPU devices: one family per figure (mlmond_device_*),
 * labelled by device, from the latest device read (accel.h), each series
 * left out while unknown; and the CPU package's power and energy (RAPL). */
enum device_metric { DM_BUSY, DM_MEM_USED, DM_MEM_TOTAL, DM_POWER, DM_ENERGY, DM_TEMP, DM_FREQ, _DM_MAX };

static bool device_value(const struct gpu_device *d, enum device_metric k, double *ret) {
        switch (k) {
        case DM_BUSY:
                *ret = d->busy_pct / 100.0;
                return d->has_busy;
        case DM_MEM_USED:
                *ret = (double)d->mem_used_bytes;
                return d->has_mem_used;
        case DM_MEM_TOTAL:
                *ret = (double)d->mem_total_bytes;
                return d->has_mem_total;
        case DM_POWER:
                *ret = d->power_w;
                return d->has_power;
        case DM_ENERGY:
                *ret = d->energy_j;
                return d->has_energy;
        case DM_TEMP:
                *ret = d->temp_c;
                return d->has_temp;
        case DM_FREQ:
                *ret = d->freq_mhz * 1e6;
                return d->has_freq;
        default:
                return false;
        }
}

static const struct metric_family device_families[_DM_MAX] = {
        [DM_BUSY] = { "mlmond_device_busy_ratio", METRIC_GAUGE,
                      "Busy share of the device over the last device interval (sysfs, NVML).", NULL },
        [DM_MEM_USED] = { "mlmond_device_memory_used_bytes", METRIC_GAUGE, "Device memory in use (VRAM, NPU buffers).",
                          NULL },
        [DM_MEM_TOTAL] = { "mlmond_device_memory_total_bytes", METRIC_GAUGE, "Device memory in all.", NULL },
        [DM_POWER] = { "mlmond_device_power_watts", METRIC_GAUGE, "Power drawn by the device (hwmon, NVML).", NULL },
        [DM_ENERGY] = { "mlmond_device_energy_joules_total", METRIC_COUNTER,
                        "Energy used by the device since mlmond began watching it.", NULL },
        [DM_TEMP] = { "mlmond_device_temperature_celsius", METRIC_GAUGE, "Device temperature (edge).", NULL },
        [DM_FREQ] = { "mlmond_device_frequency_hertz", METRIC_GAUGE, "Current clock of the device's engines.", NULL },
};

static void device_info(struct metrics_encoder *e, const struct gpu_device *d, size_t n) {
        static const struct metric_family f = { "mlmond_device_info", METRIC_GAUGE,
                                                "The host's GPUs and NPUs (value 1), by PCI address or node.", NULL };
        if (n == 0)
                return;
        e->begin(e, &f);
        for (size_t i = 0; i < n; i++) {
                const struct metric_label l[] = { { "device", d[i].id },
                                                  { "kind", d[i].kind },
                                                  { "driver", d[i].driver },
                                                  { "node", d[i].node },
                                                  { "name", d[i].name } };
                e->series(e, &f, &(struct metric_series){ .extra = l, .n_extra = ELEMENTSOF(l), .value = 1 });
        }
        e->end(e, &f);
}

static void device_gts(struct metrics_encoder *e, const struct gpu_device *d, size_t n) {
        static const struct metric_family f = { "mlmond_device_gt_busy_ratio", METRIC_GAUGE,
                                                "Busy share of each GT of an Intel GPU (render/compute and media).",
                                                NULL };
        bool begun = false;
        for (size_t i = 0; i < n; i++)
                for (size_t g = 0; g < d[i].n_gts; g++) {
                        if (!d[i].gts[g].has_busy)
                                continue;
                        if (!begun)
                                e->begin(e, &f);
                        begun = true;
                        const struct metric_label l[] = { { "device", d[i].id }, { "gt", d[i].gts[g].name } };
                        e->series(e, &f,
                                  &(struct metric_series){
                                          .extra = l, .n_extra = 2, .value = d[i].gts[g].busy_pct / 100.0 });
                }
        if (begun)
                e->end(e, &f);
}

void metrics_put_devices(struct metrics_encoder *e, const struct manager_stats *m) {
        size_t n = 0;
        const struct gpu_device *d = m->accel ? accel_devices(m->accel, &n) : NULL;
        device_info(e, d, n);
        for (int k = 0; k < _DM_MAX; k++) {
                const struct metric_family *f = &device_families[k];
                bool begun = false;
                for (size_t i = 0; i < n; i++) {
                        double v;
                        if (!device_value(&d[i], (enum device_metric)k, &v))
                                continue;
                        if (!begun)
                                e->begin(e, f);
                        begun = true;
                        const struct metric_label l = { "device", d[i].id };
                        e->series(e, f, &(struct metric_series){ .extra = &l, .n_extra = 1, .value = v });
                }
                if (begun)
                        e->end(e, f);
        }
        device_gts(e, d, n);
        const struct gpu_device *pkg = m->accel ? accel_package(m->accel) : NULL;
        single(e, "mlmond_host_package_power_watts", METRIC_GAUGE, "CPU package power (RAPL, packages summed).",
               pkg && pkg->has_power, pkg ? pkg->power_w : 0);
        single(e, "mlmond_host_package_energy_joules_total", METRIC_COUNTER,
               "CPU package energy since mlmond started (RAPL, packages summed, wrap-around handled).",
               pkg && pkg->has_energy, pkg ? pkg->energy_j : 0);
}

/* mlmond's own: the kernel's /proc, whatever --proc-root says */
bool metrics_self_rss(uint64_t *ret) {
        _cleanup_close_ int dir = proc_open_pid_dir("/proc", getpid());
        struct proc_statm st;
        if (dir < 0 || proc_read_statm(dir, &st) < 0)
                return false;
        *ret = st.resident_pages * (uint64_t)sysconf(_SC_PAGESIZE);
        return true;
}

void metrics_put_daemon(struct metrics_encoder *e, const struct manager_stats *m, const uint64_t *left_out) {
        static const struct metric_family build = { "mlmond_build_info", METRIC_GAUGE,
                                                    "Always 1, with mlmond's version as a label.", NULL };
        static const struct metric_family limited = {
                "mlmond_metrics_left_out_total", METRIC_COUNTER,
                "Series GET /metrics left out over its limits since mlmond started ([metrics] keys), by reason.", NULL
        };
        struct timespec ts = {};
        bool has_cpu = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0;
        uint64_t rss = 0;
        bool has_rss = metrics_self_rss(&rss);
        const struct metric_label version = { "version", MLMOND_VERSION };
        e->begin(e, &build);
        e->series(e, &build, &(struct metric_series){ .extra = &version, .n_extra = 1, .value = 1 });
        e->end(e, &build);
        single(e, "mlmond_uptime_seconds", METRIC_GAUGE, "Time since mlmond started.", true,
               (double)m->uptime_usec / 1e6);
        single(e, "mlmond_runs_active", METRIC_GAUGE, "Running runs (the ones exported here).", true, m->n_runs);
        single(e, "mlmond_ticks_total", METRIC_COUNTER, "Sampler ticks since mlmond started.", true, m->ticks);
        single(e, "mlmond_tick_overruns_total", METRIC_COUNTER,
               "Times a run's sampling fell a whole interval behind its schedule.", true, m->overruns);
        single(e, "mlmond_last_tick_duration_seconds", METRIC_GAUGE, "How long the last sampler tick took.",
               m->ticks > 0, m->last_tick_ms / 1000.0);
        single(e, "mlmond_db_write_errors_total", METRIC_COUNTER, "Failed database writes since mlmond started.", true,
               (double)m->db_write_errors);
        single(e, "mlmond_statsd_received_total", METRIC_COUNTER, "StatsD lines received.", true, m->statsd_received);
        single(e, "mlmond_statsd_malformed_total", METRIC_COUNTER, "StatsD lines (and datagrams) dropped as malformed.",
               true, m->statsd_malformed);
        single(e, "mlmond_statsd_unmatched_total", METRIC_COUNTER, "StatsD lines dropped: no running run matched.",
               true, m->statsd_unmatched);
        single(e, "mlmond_statsd_refused_total", METRIC_COUNTER,
               "StatsD lines dropped: a #run:/#pid: tag named a run the sender may not write to.", true,
               m->statsd_refused);
        e->begin(e, &limited);
        for (size_t i = 0; i < _LEFT_OUT_MAX; i++) {
                const struct metric_label reason = { "reason", metrics_left_out_reasons[i] };
                e->series(e, &limited,
                          &(struct metric_series){ .extra = &reason, .n_extra = 1, .value = (double)left_out[i] });
        }
        e->end(e, &limited);
        single(e, "mlmond_process_cpu_seconds_total", METRIC_COUNTER, "CPU time mlmond itself has used.", has_cpu,
               (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC);
        single(e, "mlmond_process_resident_memory_bytes", METRIC_GAUGE, "Resident memory of mlmond itself.", has_rss,
               (double)rss);
}
