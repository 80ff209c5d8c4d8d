/* SPDX-License-Identifier: MIT */
/* `mlmonctl run -- CMD [ARGS...]`: forks CMD, registers it before it runs a
 * single instruction, forwards signals to it, waits for it to end, then
 * prints its report (and writes it with --report) and exits with its
 * status. */
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "http-client.h"
#include "json-util.h"
#include "mlmonctl.h"
#include "output.h"
#include "report.h"

/* How long to wait for the daemon to see the job's exit (it learns of it
 * through a pidfd, i.e. at once), and how often to ask. */
#define EXIT_WAIT_USEC (3 * USEC_PER_SEC)
/* How long the sample after the exec waits for it: execs take milliseconds */
#define EXEC_WAIT_MS 2000
#define EXIT_POLL_USEC (50 * USEC_PER_MSEC)

static volatile sig_atomic_t forward_pid;

static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static void forward_signal(int sig, siginfo_t *si, void *ctx _unused_) {
        int saved = errno;
        pid_t pid = forward_pid;
        /* The terminal (Ctrl-C, Ctrl-\, hangup) signals the whole foreground
         * process group, which the job shares with us: it got this signal
         * already, and a second SIGINT could cut short its own cleanup
         * (Python's KeyboardInterrupt handlers). Only what was sent to us
         * alone (kill, systemd, a batch scheduler) is passed on. */
        if (pid > 0 && si->si_code != SI_KERNEL)
                kill(pid, sig);
        errno = saved;
}

static struct sigaction saved_actions[ELEMENTSOF(forwarded_signals)];

static void set_forwarding(bool on) {
        struct sigaction sa = {
                .sa_sigaction = forward_signal,
                .sa_flags = SA_SIGINFO | SA_RESTART,
        };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(forwarded_signals); i++) {
                int sig = forwarded_signals[i];
                if (!on) {
                        sigaction(sig, &saved_actions[i], NULL);
                        continue;
                }
                /* A signal ignored on entry (nohup, a background job of a
                 * non-interactive shell) stays ignored, as shells do: the
                 * job inherited that too. */
                if (sigaction(sig, NULL, &saved_actions[i]) == 0 && saved_actions[i].sa_handler == SIG_IGN)
                        continue;
                sigaction(sig, &sa, NULL);
        }
}

/* The go message: 'g', then the run id in decimal ("" when the job runs
 * unmonitored), NUL-padded to a fixed size. */
#define GO_SIZE 32

/* What the job learns of its run: MLMON_RUN_ID (unset when unmonitored),
 * and where the daemon is, so that mlmonctl and StatsD clients in the job
 * find it (the StatsD socket: as given, else statsd.sock next to the API
 * socket, as in the default layout).
 *
 * With --ranks the launcher's id is MLMON_LAUNCHER_RUN_ID instead: every
 * rank would inherit MLMON_RUN_ID as if it named its run, and send its
 * timings there. The other name tells a rank (mlmon.attach()) that a run
 * of its own is coming, registered by ranks_watch(). */
static void job_environment(const char *id, bool ranks) {
        unsetenv("MLMON_RUN_ID");
        unsetenv("MLMON_LAUNCHER_RUN_ID");
        if (*id)
                setenv(ranks ? "MLMON_LAUNCHER_RUN_ID" : "MLMON_RUN_ID", id, 1);
        if (arg_url) {
                setenv("MLMON_URL", arg_url, 1);
                return;
        }
        unsetenv("MLMON_URL"); /* it would win over MLMON_SOCKET */
        setenv("MLMON_SOCKET", arg_socket, 1);
        const char *e = getenv("MLMON_STATSD_SOCKET");
        if (e && *e)
                return;
        const char *slash = strrchr(arg_socket, '/');
        char statsd[PATH_MAX];
        int n = slash ? snprintf(statsd, sizeof statsd, "%.*s/statsd.sock", (int)(slash - arg_socket), arg_socket)
                      : snprintf(statsd, sizeof statsd, "statsd.sock");
        if (n > 0 && (size_t)n < sizeof statsd)
                setenv("MLMON_STATSD_SOCKET", statsd, 1);
}

/* In the child: wait for the go from the parent (sent once the process is
 * registered, so that not a single instruction of CMD runs unobserved), then
 * become CMD. EOF without the whole go message means mlmonctl died or gave
 * up. */
_Noreturn static void child_exec(int fd, char **cmd, bool ranks) {
        char go[GO_SIZE];
        size_t got = 0;
        while (got < sizeof go) {
                ssize_t k = read(fd, go + got, sizeof go - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        _exit(127);
                got += (size_t)k;
        }
        if (go[0] != 'g')
                _exit(127);
        go[GO_SIZE - 1] = 0;
        /* fd stays open until the exec closes it (close-on-exec): the
         * parent's end reads EOF the moment CMD is CMD */
        job_environment(go + 1, ranks);
        execvp(cmd[0], cmd);
        int e = errno;
        fprintf(stderr, "mlmonctl: %s: %m\n", cmd[0]); /* errno is e */
        /* the shell's convention: 127 not found, 126 found but not runnable */
        _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* Lets the child go, with its run id (0: unmonitored). */
static void send_go(int fd, int64_t id) {
        char go[GO_SIZE] = "g";
        if (id > 0)
                snprintf(go + 1, sizeof go - 1, "%" PRId64, id);
        size_t sent = 0;
        while (sent < sizeof go) {
                ssize_t k = send(fd, go + sent, sizeof go - sent, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return; /* the child is gone already (killed meanwhile); waitpid says how */
                sent += (size_t)k;
        }
}

/* Registers the job. When mlmond cannot be reached or does not take it,
 * the job runs unmonitored (*ret_id 0) after one warning, unless
 * --require-daemon: then the error is printed and -1 returned. */
static int register_job(const struct args *a, pid_t pid, int64_t *ret_id) {
        _cleanup_free_ char *err = NULL;
        int unreachable;

        if (register_pid_quiet(a, pid, ret_id, &err, &unreachable) == 0)
                return 0;
        *ret_id = 0;
        if (a->require_daemon) {
                error_line("%s", err ? err : "out of memory");
                return -1;
        }
        if (unreachable && endpoint.detail[0])
                error_line("cannot reach mlmond at %s (%s): running the job unmonitored", daemon_address(),
                           endpoint.detail);
        else if (unreachable)
                error_line_errno(unreachable, "cannot reach mlmond at %s (%m): running the job unmonitored",
                                 daemon_address());
        else
                error_line("mlmond at %s did not register the job (%s): running the job unmonitored", daemon_address(),
                           err ? err : "out of memory");
        return 0;
}

/* Waits for the job to end without reaping it: until reap_child() the pid
 * cannot be reused, so a late forwarded signal cannot hit a stranger, and
 * the daemon can still read the exited job's final CPU time and I/O. */
static int wait_child_exited(pid_t pid) {
        siginfo_t si = {};
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0)
                if (errno != EINTR)
                        return -errno;
        forward_pid = 0;
        set_forwarding(false);
        return 0;
}

static int reap_child(pid_t pid, int *ret_status, struct rusage *ret_rusage) {
        while (wait4(pid, ret_status, 0, ret_rusage) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

/* With --ranks the launcher's run says what it is, with the tag
 * role=launcher (unless one was given): its job then keeps it out of its
 * ranks. NULL: out of memory. */
static json_object *launcher_tags(json_object *given) {
        json_object *t = NULL;
        if (given ? json_object_deep_copy(given, &t, NULL) < 0 : !(t = json_object_new_object()))
                return NULL;
        if (!json_object_object_get_ex(t, "role", NULL))
                json_object_object_add(t, "role", json_object_new_string("launcher"));
        return t;
}

/* Once the child has exec'ed (its end of fd closes on exec), asks the
 * daemon for a sample of it at once: a job shorter than the interval is
 * otherwise sampled only as the stub that waited for the go. Bounded: an
 * exec that takes longer is sampled by the daemon's own schedule. */
static void sample_after_exec(int fd, int64_t id) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char c;
        if (poll(&p, 1, EXEC_WAIT_MS) <= 0 || recv(fd, &c, 1, MSG_DONTWAIT) != 0)
                return; /* not exec'ed yet, or something else than EOF */
        char path[64];
        snprintf(path, sizeof path, "/v1/runs/%" PRId64 "/samples", id);
        json_object *answer = NULL;
        _cleanup_free_ char *err = NULL;
        capture_errors(&err); /* the job is what matters: a refusal is not worth a line */
        (void)api_call("POST", path, NULL, &answer, NULL);
        capture_errors(NULL);
        json_object_put(answer);
}

/* Tells the daemon what wait4() saw of the job: how it ended (kept where
 * mlmond did not read it from the zombie itself), its peak RSS and CPU
 * time, exact even for a job that ended between two samples. */
static void report_exit(int64_t id, int status, const struct rusage *ru) {
        _cleanup_json_ json_object *body = json_object_new_object(), *r = json_object_new_object();
        if (!body || !r)
                return;
        json_object_object_add(r, "max_rss_bytes", json_object_new_int64((int64_t)ru->ru_maxrss * 1024));
        json_object_object_add(r, "user_time_s",
                               json_object_new_double((double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6));
        json_object_object_add(r, "system_time_s",
                               json_object_new_double((double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6));
        json_object_object_add(body, "rusage", json_object_get(r));
        if (WIFEXITED(status) || WIFSIGNALED(status))
                json_object_object_add(
                        body, WIFSIGNALED(status) ? "exit_signal" : "exit_code",
                        json_object_new_int(WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)));
        char path[64];
        snprintf(path, sizeof path, "/v1/runs/%" PRId64 "/exit", id);
        json_object *answer = NULL;
        (void)api_call("POST", path, body, &answer, NULL);
        json_object_put(answer);
}

/* Waits until the daemon has seen the job end (state no longer "running"),
 * for up to EXIT_WAIT_USEC; returns the last run object it got (NULL if
 * none; the error is printed). */
static json_object *fetch_final_run(int64_t id) {
        char path[64];
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + EXIT_WAIT_USEC;
        json_object *run = NULL;
        int r;

        snprintf(path, sizeof path, "/v1/runs/%" PRId64, id);
        for (;;) {
                _cleanup_free_ char *err = NULL;
                json_object_put(run);
                run = NULL;
                capture_errors(&err);
                r = api_call("GET", path, NULL, &run, NULL);
                capture_errors(NULL);
                if (r < 0) {
                        /* mlmond went away (or broke) while the job ran: the
                         * job's status still stands */
                        error_line("lost mlmond at %s (%s): no figures for run %" PRId64, daemon_address(),
                                   err ? err : "out of memory", id);
                        break;
                }
                const char *state = json_get_str(run, "state");
                if (!streq(state, "running") || now_usec(CLOCK_MONOTONIC) >= deadline)
                        break;
                nanosleep(&(struct timespec){ .tv_nsec = EXIT_POLL_USEC * 1000 }, NULL);
        }
        return run;
}

static int write_report(const char *file, json_object *run, json_object *latency, json_object *window, char **cmd,
                        int exit_status, int sig) {
        _cleanup_json_ json_object *doc = report_document(run, latency, window), *command = json_object_new_array();
        if (!doc || !command)
                return -ENOMEM;
        for (char **c = cmd; *c; c++)
                json_object_array_add(command, json_string_sanitized(*c, strlen(*c)));
        json_object_object_add(doc, "command", json_object_get(command));
        json_object_object_add(doc, "exit_status", json_object_new_int(exit_status));
        json_object_object_add(doc, "signal", sig > 0 ? json_object_new_int(sig) : NULL);

        const char *s = json_pretty(doc);
        if (!s)
                return -ENOMEM;
        if (!file)
                return fprintf(stderr, "%s\n", s) < 0 ? -EIO : 0;
        _cleanup_fclose_ FILE *f = fopen(file, "we");
        if (!f)
                return -errno;
        if (fprintf(f, "%s\n", s) < 0 || fflush(f) != 0)
                return errno > 0 ? -errno : -EIO;
        int r = fclose(TAKE_PTR(f));
        return r != 0 ? -errno : 0;
}

static void print_run_report(FILE *f, int64_t id, const char *name, char **cmd, int exit_status, int sig, double wall_s,
                             json_object *run, json_object *latency, json_object *window) {
        _cleanup_free_ char *pname = name ? text_printable(name) : NULL;
        _cleanup_free_ char *pcmd = text_printable(cmd[0]);
        char what[64];

        if (sig > 0)
                snprintf(what, sizeof what, "was killed by signal %d (SIG%s)", sig,
                         sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        else
                snprintf(what, sizeof what, "exited with status %d", exit_status);
        char run_name[40] = "unmonitored run";
        if (id > 0)
                snprintf(run_name, sizeof run_name, "run %" PRId64, id);
        fprintf(f, "mlmonctl: %s%s%s%s %s %s after %.2f s\n", run_name, pname ? " (" : "", pname ? pname : "",
                pname ? ")" : "", pcmd ? pcmd : cmd[0], what, wall_s);
        if (run)
                print_summary(f, json_get_object(run, "summary"));
        if (has_ops(latency, window)) {
                fputc('\n', f);
                print_op_tables(f, latency, window);
                fputc('\n', f);
                print_throughput(f, window, latency);
        }
}

/* Can cmd be run, as execvp() would find it? Returns 0, or the shell's
 * status (printed): 127 not found, 126 found but not runnable. Checked
 * before anything is registered, so that a typo leaves no empty run. */
static int check_command(const char *cmd) {
        struct stat st;
        int denied = 0;

        if (strchr(cmd, '/')) {
                if (stat(cmd, &st) < 0 && (errno == ENOENT || errno == ENOTDIR))
                        goto not_found;
                if (access(cmd, X_OK) < 0)
                        denied = errno;
                else if (S_ISDIR(st.st_mode))
                        denied = EISDIR;
        } else if (*cmd) {
                const char *path = getenv("PATH");
                _cleanup_free_ char *dirs = strdup(path ? path : "/bin:/usr/bin");
                if (!dirs)
                        return oom();
                for (char *rest = dirs, *dir; (dir = strsep(&rest, ":"));) {
                        char full[PATH_MAX];
                        /* an empty entry is the current directory, as for execvp() */
                        if (snprintf(full, sizeof full, "%s/%s", *dir ? dir : ".", cmd) >= (int)sizeof full ||
                            stat(full, &st) < 0 || S_ISDIR(st.st_mode))
                                continue;
                        if (access(full, X_OK) == 0)
                                return 0;
                        denied = errno;
                }
                if (!denied)
                        goto not_found;
        } else
                goto not_found;
        if (denied)
                error_line_errno(denied, "%s: %m", cmd);
        return denied ? 126 : 0;
not_found:
        error_line("%s: command not found", cmd);
        return 127;
}

int verb_run(struct args *a) {
        _cleanup_json_ json_object *run = NULL, *latency = NULL, *window = NULL;
        char **cmd = a->operands;
        int sv[2], r, status;
        int64_t id = 0;
        _cleanup_free_ struct rank_run *rank_v = NULL;
        struct rank_runs ranks = {};

        /* Inherited SIGCHLD=SIG_IGN would have the kernel reap the job and
         * take its exit status with it. */
        signal(SIGCHLD, SIG_DFL);
        if ((r = check_command(cmd[0])) != 0)
                return r;
        /* a socketpair rather than a pipe: send(MSG_NOSIGNAL) cannot raise
         * SIGPIPE if the child is already gone */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                error_line_errno(errno, "socketpair: %m");
                return EXIT_FAILED;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
                error_line_errno(errno, "fork: %m");
                close(sv[0]);
                close(sv[1]);
                return EXIT_FAILED;
        }
        if (pid == 0) {
                close(sv[0]);
                child_exec(sv[1], cmd, a->ranks);
        }
        close(sv[1]);
        _cleanup_close_ int go_fd = sv[0];

        forward_pid = pid;
        set_forwarding(true);

        struct args la = *a;
        la.tags = a->ranks ? launcher_tags(a->tags) : a->tags;
        r = a->ranks && !la.tags ? -ENOMEM : register_job(&la, pid, &id);
        if (la.tags != a->tags)
                json_object_put(la.tags);
        if (r < 0) {
                forward_pid = 0;
                kill(pid, SIGKILL);
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return EXIT_FAILED;
        }

        usec_t start = now_usec(CLOCK_MONOTONIC);
        send_go(go_fd, id);
        if (id > 0)
                sample_after_exec(go_fd, id);
        go_fd = safe_close(go_fd);

        r = a->ranks && id > 0 ? ranks_watch(a, pid, &ranks) : 0;
        rank_v = ranks.v;
        if (r == 0)
                r = wait_child_exited(pid);
        double wall_s = (double)(now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_SEC;
        /* the daemon takes its last sample of the exited (unreaped) job */
        if (r == 0 && id > 0)
                run = fetch_final_run(id);
        struct rusage ru = {};
        if (r == 0)
                r = reap_child(pid, &status, &ru);
        if (r == 0 && run) {
                /* the summary again, with what wait4() saw */
                report_exit(id, status, &ru);
                json_object *again = fetch_final_run(id);
                if (again) {
                        json_object_put(run);
                        run = again;
                }
        }
        if (r < 0) {
                error_line_errno(r, "waiting for %s: %m", cmd[0]);
                return EXIT_FAILED;
        }
        /* From here on the exit code is the job's: a closed stderr (`2>&1 |
         * head`) must not turn it into 141. */
        signal(SIGPIPE, SIG_IGN);
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        int exit_status = sig > 0 ? 128 + sig : WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_FAILED;

        /* the ops of the whole run; what did not come is left out (and said) */
        if (run)
                (void)fetch_run_op_figures(id, run, &latency, &window);

        if (arg_json) {
                /* stdout is the job's; the JSON report goes where the text
                 * one would */
                (void)write_report(NULL, run, latency, window, cmd, exit_status, sig);
        } else {
                print_run_report(stderr, id, a->name, cmd, exit_status, sig, wall_s, run, latency, window);
                ranks_print(stderr, &ranks);
        }

        if (a->report) {
                r = write_report(a->report, run, latency, window, cmd, exit_status, sig);
                if (r < 0) {
                        error_line_errno(r, "cannot write report to %s: %m", a->report);
                        /* the job's own failure says enough; its success must not hide ours */
                        if (exit_status == 0)
                                exit_status = EXIT_FAILED;
                }
        }
        return exit_status;
}
