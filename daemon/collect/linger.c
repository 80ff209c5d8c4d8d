/* SPDX-License-Identifier: MIT */
/* What a run leaves behind on its GPUs: once its main process has exited,
 * the members of its last sample that are still there (the same pid and
 * start time; the main process itself as a zombie) and still hold device
 * memory. A worker stuck in the driver, or a child the main process did not
 * wait for, keeps a GPU's memory allocated for nobody. */
#include "collect/probe.h"

#include <string.h>
#include <unistd.h>

/* The member's use of the devices now, through a scratch run (the run's
 * own energy and uses stay as they were). */
static bool member_use(struct collect_ctx *ctx, struct member *x, int dirfd, struct probe_linger *ret) {
        struct accel_run scratch = {};
        struct sample s = {};
        int fds[1] = { dirfd };
        struct accel_member acc[1] = { x->acc };
        accel_collect_run(ctx->accel, &scratch, fds, acc, 1, &s);
        x->acc = acc[0];
        bool found = false;
        for (size_t i = 0; i < scratch.n_uses && !found; i++)
                if (scratch.uses[i].has_mem && scratch.uses[i].mem_bytes > 0) {
                        snprintf(ret->device, sizeof ret->device, "%s", scratch.uses[i].device);
                        ret->mem_bytes = scratch.uses[i].mem_bytes;
                        found = true;
                }
        accel_run_done(&scratch);
        return found;
}

int probe_lingering_gpu(struct collect_ctx *ctx, struct probe *r, struct probe_linger *ret) {
        if (!ctx->accel || !accel_per_process(ctx->accel))
                return 0;
        /* the children first: the main process is gone or a zombie */
        for (size_t k = 0; k < r->n_members; k++) {
                size_t i = (k + 1) % r->n_members;
                struct member *x = &r->members[i];
                _cleanup_close_ int own = -1;
                int dirfd = i == 0 ? r->dirfd : (own = proc_open_pid_dir(ctx->proc_root, x->pid));
                struct proc_stat st;
                if (dirfd < 0 || proc_read_stat(dirfd, &st) < 0 || st.starttime_ticks != x->start_ticks ||
                    st.state == 'X')
                        continue;
                if (member_use(ctx, x, dirfd, ret)) {
                        ret->pid = x->pid;
                        ret->state = st.state;
                        return 1;
                }
        }
        return 0;
}
