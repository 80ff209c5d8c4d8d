/* SPDX-License-Identifier: MIT */
#include "collect/accel/accel.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/accel/drm.h"
#include "collect/accel/gpudev.h"
#include "collect/accel/nvml.h"
#include "collect/procfs-host.h"
#include "collect/accel/rapl.h"
#include "collect/sample.h"
#include "util.h"

/* The DRM client side and the sysfs device set (filled in below). */
static const struct gpu_device *accel_sysfs_devices(struct accel *a, usec_t now_usec, size_t *ret_n);
static void accel_sweep_begin(struct accel *a, usec_t now_usec);
static void accel_sweep_end(struct accel *a, usec_t max_age_usec);
static void accel_drm_cache_free(struct drm_proc_cache *c);

struct accel {
        bool gpu_on, energy_on;
        char *proc_root, *sys_root;
        long clk_tck;
        unsigned fd_rescan_ticks;
        usec_t device_interval_usec, next_device_usec;
        bool devices_read; /* in this tick */

        struct drm_clients *drm;
        struct gpudev_set *gpudev;
        struct gpu_device *sys_devices; /* a copy of gpudev's latest */
        /* processes holding each accel node (NPUs have no per-client
         * stats): the last sweep's count divides the device's busy */
        struct holder_count {
                char node[GPU_NAME_MAX];
                unsigned prev, cur;
        } * holders;
        size_t n_holders;

        struct nvml *nvml;
        struct nvml_snapshot nv;
        bool has_nv;
        struct rapl *rapl;

        /* the merged device list (sysfs, then NVML) and the energy each
         * spent over the last device interval */
        struct gpu_device *devices;
        size_t n_devices;
        double *dev_delta_j;
        bool *has_dev_delta;
        int64_t devices_ts_ms;
        struct gpu_device package;
        bool has_package;
        bool has_pkg_delta;
        double pkg_delta_j;
        bool has_host_prev, has_host_delta;
        uint64_t host_busy_prev_ns, host_busy_delta_ns;
};

int accel_new(const struct accel_options *c, struct accel **ret) {
        struct accel *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->gpu_on = c->gpu;
        a->energy_on = c->energy;
        a->proc_root = strdup(c->proc_root);
        a->sys_root = strdup(c->sys_root);
        if (!a->proc_root || !a->sys_root) {
                accel_free(a);
                return -ENOMEM;
        }
        a->clk_tck = sysconf(_SC_CLK_TCK);
        if (a->clk_tck <= 0)
                a->clk_tck = 100;
        a->fd_rescan_ticks = c->fd_rescan_ticks;
        a->device_interval_usec = c->device_interval_usec;

        if (a->gpu_on && (drm_clients_new(&a->drm) < 0 || gpudev_set_new(a->sys_root, &a->gpudev) < 0)) {
                accel_free(a);
                return -ENOMEM;
        }
        if (a->gpu_on && c->nvml_library && c->nvml_library[0]) {
                char err[256];
                int r = nvml_open(c->nvml_library, &a->nvml, err, sizeof err);
                if (r < 0)
                        log_info("NVIDIA GPUs (NVML) off: %s", err);
                else
                        log_info("NVIDIA GPUs (NVML): %zu device(s)", nvml_device_count(a->nvml));
        }
        if (a->energy_on && rapl_new(a->sys_root, &a->rapl) < 0) {
                accel_free(a);
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

void accel_free(struct accel *a) {
        if (!a)
                return;
        nvml_close(a->nvml);
        rapl_free(a->rapl);
        drm_clients_free(a->drm);
        gpudev_set_free(a->gpudev);
        free(a->sys_devices);
        free(a->holders);
        free(a->devices);
        free(a->dev_delta_j);
        free(a->has_dev_delta);
        free(a->proc_root);
        free(a->sys_root);
        free(a);
}

bool accel_per_process(const struct accel *a) {
        return a && a->gpu_on && (a->nvml || a->n_devices > 0);
}

const struct gpu_device *accel_devices(const struct accel *a, size_t *ret_n) {
        *ret_n = a->n_devices;
        return a->devices;
}

int64_t accel_devices_ts(const struct accel *a) {
        return a->devices_ts_ms;
}

const struct gpu_device *accel_package(const struct accel *a) {
        return a->has_package ? &a->package : NULL;
}

static const struct gpu_device *find_device(const struct gpu_device *v, size_t n, const char *id, size_t *ret_i) {
        for (size_t i = 0; i < n; i++)
                if (streq(v[i].id, id)) {
                        if (ret_i)
                                *ret_i = i;
                        return &v[i];
                }
        return NULL;
}

/* The host's busy CPU time, for the runs' share of the package energy. */
static void read_host_busy(struct accel *a) {
        struct proc_cpu_total cpu;
        a->has_host_delta = false;
        if (proc_read_host_cpu(a->proc_root, &cpu) < 0)
                return;
        uint64_t busy = (cpu.user + cpu.nice + cpu.system + cpu.irq + cpu.softirq + cpu.steal) *
                        (1000000000ULL / (uint64_t)a->clk_tck);
        if (a->has_host_prev && busy >= a->host_busy_prev_ns) {
                a->host_busy_delta_ns = busy - a->host_busy_prev_ns;
                a->has_host_delta = true;
        }
        a->host_busy_prev_ns = busy;
        a->has_host_prev = true;
}

/* Reads every device source and rebuilds the list, keeping each device's
 * energy delta since the previous list. */
static void read_devices(struct accel *a, usec_t now_usec) {
        struct gpu_device *nd = NULL;
        size_t n = 0;
        const struct gpu_device *src[2] = { NULL, NULL };
        size_t nsrc[2] = { 0, 0 };

        if (a->gpu_on) {
                src[0] = accel_sysfs_devices(a, now_usec, &nsrc[0]);
                if (a->nvml && nvml_sample(a->nvml, now_usec, &a->nv) == 0) {
                        a->has_nv = true;
                        src[1] = a->nv.devices;
                        nsrc[1] = a->nv.n_devices;
                } else
                        a->has_nv = false;
        }
        for (size_t k = 0; k < 2; k++)
                for (size_t i = 0; i < nsrc[k]; i++) {
                        /* an NVIDIA card is also a DRM card with the nvidia-drm driver: NVML's view wins */
                        size_t j;
                        if (find_device(nd, n, src[k][i].id, &j)) {
                                nd[j] = src[k][i];
                                continue;
                        }
                        if (!GREEDY_REALLOC(nd, n + 1))
                                goto oom;
                        nd[n++] = src[k][i];
                }
        double *dj = calloc(n ? n : 1, sizeof *dj);
        bool *hj = calloc(n ? n : 1, sizeof *hj);
        if (!dj || !hj) {
                free(dj);
                free(hj);
                goto oom;
        }
        for (size_t i = 0; i < n; i++) {
                const struct gpu_device *p = find_device(a->devices, a->n_devices, nd[i].id, NULL);
                if (p && p->has_energy && nd[i].has_energy && nd[i].energy_j >= p->energy_j) {
                        dj[i] = nd[i].energy_j - p->energy_j;
                        hj[i] = true;
                }
        }
        free(a->devices);
        free(a->dev_delta_j);
        free(a->has_dev_delta);
        a->devices = nd;
        a->n_devices = n;
        a->dev_delta_j = dj;
        a->has_dev_delta = hj;
        goto energy;
oom:
        free(nd);
        log_warning("out of memory reading the GPU/NPU devices");
energy:
        a->has_pkg_delta = false;
        if (a->rapl) {
                double pdj, pw;
                if (rapl_sample(a->rapl, now_usec, &pdj, &pw)) {
                        a->has_pkg_delta = true;
                        a->pkg_delta_j = pdj;
                        a->package.has_power = true;
                        a->package.power_w = pw;
                } else
                        a->package.has_power = false;
                double total;
                if (rapl_energy_j(a->rapl, &total)) {
                        snprintf(a->package.id, sizeof a->package.id, "package");
                        snprintf(a->package.kind, sizeof a->package.kind, "cpu");
                        snprintf(a->package.driver, sizeof a->package.driver, "rapl");
                        a->package.has_energy = true;
                        a->package.energy_j = total;
                        a->has_package = true;
                }
        }
        read_host_busy(a);
        a->devices_ts_ms = now_realtime_ms();
}

bool accel_tick_begin(struct accel *a, usec_t now_usec) {
        if (!a || (!a->gpu_on && !a->energy_on))
                return false;
        a->devices_read = false;
        accel_sweep_begin(a, now_usec);
        /* a little slack: a device read due within 10 ms happens now */
        if (now_usec + 10 * USEC_PER_MSEC < a->next_device_usec)
                return false;
        read_devices(a, now_usec);
        a->next_device_usec = (now_usec / a->device_interval_usec + 1) * a->device_interval_usec;
        a->devices_read = true;
        return true;
}

void accel_tick_end(struct accel *a, usec_t max_age_usec) {
        if (!a || !a->gpu_on)
                return;
        accel_sweep_end(a, max_age_usec);
}

void accel_run_energy(struct accel *a, struct accel_run *ar, uint64_t cpu_time_ns) {
        if (!a || !a->energy_on)
                return;
        double j = 0;
        bool known = false;
        if (ar->has_cpu_mark && a->has_pkg_delta && a->has_host_delta && cpu_time_ns >= ar->cpu_mark_ns) {
                double cj;
                if (energy_cpu_share_j(a->pkg_delta_j, cpu_time_ns - ar->cpu_mark_ns, a->host_busy_delta_ns, &cj)) {
                        j += cj;
                        known = true;
                }
        }
        ar->cpu_mark_ns = cpu_time_ns;
        ar->has_cpu_mark = true;
        /* each GPU's energy by the run's share of its busy time */
        for (size_t i = 0; i < ar->n_uses; i++) {
                const struct gpu_use *u = &ar->uses[i];
                size_t k;
                const struct gpu_device *d = find_device(a->devices, a->n_devices, u->device, &k);
                if (!d || !a->has_dev_delta[k] || !u->has_util || !d->has_busy)
                        continue;
                double share = d->busy_pct > 0 ? u->util_pct / d->busy_pct : 0;
                j += a->dev_delta_j[k] * (share > 1 ? 1 : share);
                known = true;
        }
        if (known) {
                ar->energy_j = (ar->has_energy ? ar->energy_j : 0) + j;
                ar->has_energy = true;
        }
}

void accel_member_done(struct accel_member *m) {
        accel_drm_cache_free(m->drm);
        m->drm = NULL;
}

void accel_run_done(struct accel_run *ar) {
        free(ar->uses);
        ar->uses = NULL;
        ar->n_uses = 0;
}

/* ---- DRM/accel clients and sysfs devices (drm.c, gpudev.c) ---- */

static const struct gpu_device *accel_sysfs_devices(struct accel *a, usec_t now_usec, size_t *ret_n) {
        *ret_n = 0;
        int n = gpudev_sample(a->gpudev, now_usec);
        if (n < 0)
                log_debug_errno(n, "reading the GPU/NPU devices in sysfs: %m");
        size_t k = gpudev_count(a->gpudev);
        struct gpu_device *v = GREEDY_REALLOC(a->sys_devices, k ? k : 1);
        if (!v)
                return NULL;
        for (size_t i = 0; i < k; i++)
                v[i] = *gpudev_get(a->gpudev, i);
        *ret_n = k;
        return v;
}

static void accel_sweep_begin(struct accel *a, usec_t now_usec) {
        if (!a->gpu_on)
                return;
        drm_clients_begin(a->drm, now_usec);
        for (size_t i = 0; i < a->n_holders; i++) {
                a->holders[i].prev = a->holders[i].cur;
                a->holders[i].cur = 0;
        }
}

static void accel_sweep_end(struct accel *a, usec_t max_age_usec) {
        drm_clients_end(a->drm, max_age_usec);
}

static void accel_drm_cache_free(struct drm_proc_cache *c) {
        drm_proc_cache_free(c);
}

static struct holder_count *holder_count(struct accel *a, const char *node) {
        for (size_t i = 0; i < a->n_holders; i++)
                if (streq(a->holders[i].node, node))
                        return &a->holders[i];
        if (!GREEDY_REALLOC(a->holders, a->n_holders + 1))
                return NULL;
        struct holder_count *x = &a->holders[a->n_holders++];
        *x = (struct holder_count){ 0 };
        size_t l = strnlen(node, sizeof x->node - 1);
        memcpy(x->node, node, l);
        return x;
}

#define MAX_RUN_HOLDERS 8

/* The run's DRM clients (each counted once per sweep), then its share of
 * each NPU it holds open: the device's busy time and memory split evenly
 * between the processes that held it at the previous sweep (an estimate;
 * the kernel has no per-client NPU counters). */
static void collect_drm(struct accel *a, const int *pid_dirfds, struct accel_member *members, size_t n,
                        struct gpu_use *uses, size_t *n_uses, size_t max) {
        _cleanup_free_ struct drm_proc *procs = calloc(n ? n : 1, sizeof *procs);
        if (!procs)
                return;
        for (size_t i = 0; i < n; i++)
                procs[i] = (struct drm_proc){ .pid = members[i].pid, .dirfd = pid_dirfds[i], .cache = &members[i].drm };
        struct drm_holder holders[MAX_RUN_HOLDERS];
        size_t nh = 0;
        if (drm_collect(a->drm, procs, n, a->fd_rescan_ticks, uses, max, n_uses, holders, MAX_RUN_HOLDERS, &nh) < 0) {
                *n_uses = 0;
                return;
        }
        /* a client of a device with no PCI address is keyed by its node:
         * name it as /v1/system does where sysfs knows the node */
        for (size_t i = 0; i < *n_uses; i++)
                if (!gpudev_is_pci_address(uses[i].device)) {
                        const char *id = gpudev_id_for_node(a->gpudev, uses[i].device);
                        if (id)
                                snprintf(uses[i].device, sizeof uses[i].device, "%s", id);
                }
        for (size_t i = 0; i < nh; i++) {
                if (holders[i].kind != DRM_FD_ACCEL)
                        continue; /* NVIDIA holders: NVML has the per-process figures */
                struct holder_count *hc = holder_count(a, holders[i].node);
                if (!hc)
                        continue;
                hc->cur += holders[i].procs;
                const char *id = gpudev_id_for_node(a->gpudev, holders[i].node);
                const struct gpu_device *d = id ? find_device(a->devices, a->n_devices, id, NULL) : NULL;
                if (!d)
                        continue;
                struct gpu_use *u = gpu_use_get(uses, n_uses, max, d->id);
                if (!u)
                        continue;
                if (!u->driver[0])
                        snprintf(u->driver, sizeof u->driver, "%s", d->driver);
                unsigned share = hc->prev > hc->cur ? hc->prev : hc->cur;
                double k = (double)holders[i].procs / (double)(share ? share : 1);
                u->estimated = true;
                gpu_use_add_engine(u, "npu", d->has_busy, d->has_busy ? d->busy_pct * k : 0);
                if (d->has_mem_used)
                        gpu_use_add_region(u, "memory", (uint64_t)((double)d->mem_used_bytes * k));
        }
}

/* NVML's processes that are members of the run. False when a device's
 * process lists could not all be read: a run missing from them may still
 * use it (unknown, not 0). */
static bool collect_nvml(struct accel *a, const struct accel_member *members, size_t n, struct gpu_use *uses,
                         size_t *n_uses, size_t max) {
        if (!a->has_nv)
                return !a->nvml; /* NVML on but unread this time: unknown */
        bool complete = true;
        for (size_t i = 0; i < a->nv.n_devices; i++)
                complete = complete && a->nv.procs_known[i];
        for (size_t i = 0; i < a->nv.n_procs; i++) {
                const struct nvml_proc *p = &a->nv.procs[i];
                bool member = false;
                for (size_t k = 0; k < n && !member; k++)
                        member = members[k].pid == p->pid;
                if (!member)
                        continue;
                struct gpu_use *u = gpu_use_get(uses, n_uses, max, p->device_id);
                if (!u)
                        return complete;
                snprintf(u->driver, sizeof u->driver, "nvidia");
                u->clients++;
                if (p->has_mem)
                        gpu_use_add_region(u, "fb", p->mem_bytes);
                gpu_use_add_engine(u, "sm", p->has_util, p->sm_util_pct);
                gpu_use_add_engine(u, "enc", p->has_util, p->enc_util_pct);
                gpu_use_add_engine(u, "dec", p->has_util, p->dec_util_pct);
        }
        return complete;
}

/* The headline figures: per device the busiest engine; summed over the
 * devices (100 = one device's busiest engine fully busy). */
static void summarize(struct gpu_use *uses, size_t n, bool known_zero, struct sample *s) {
        /* no device in use: 0 where the fds (and NVML) were looked at */
        s->has_gpu_mem = n == 0 && known_zero;
        s->has_gpu_util = n == 0 && known_zero;
        s->gpu_mem_bytes = 0;
        s->gpu_util_pct = 0;
        for (size_t i = 0; i < n; i++) {
                struct gpu_use *u = &uses[i];
                gpu_use_finish(u);
                if (u->has_mem) {
                        s->gpu_mem_bytes += u->mem_bytes;
                        s->has_gpu_mem = true;
                }
                if (u->has_util) {
                        s->gpu_util_pct += u->util_pct;
                        s->has_gpu_util = true;
                }
        }
}

void accel_collect_run(struct accel *a, struct accel_run *ar, const int *pid_dirfds, struct accel_member *members,
                       size_t n, struct sample *s) {
        if (!accel_per_process(a)) {
                ar->n_uses = 0;
                return;
        }
        struct gpu_use uses[GPU_MAX_RUN_DEVICES];
        size_t nu = 0;
        collect_drm(a, pid_dirfds, members, n, uses, &nu, GPU_MAX_RUN_DEVICES);
        bool complete = collect_nvml(a, members, n, uses, &nu, GPU_MAX_RUN_DEVICES);
        summarize(uses, nu, complete, s);
        if (!GREEDY_REALLOC(ar->uses, nu ? nu : 1)) {
                ar->n_uses = 0;
                return;
        }
        memcpy(ar->uses, uses, nu * sizeof *uses);
        ar->n_uses = nu;
}
