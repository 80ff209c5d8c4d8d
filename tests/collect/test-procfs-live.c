/* SPDX-License-Identifier: MIT */
/* The procfs readers (daemon/collect/procfs*.c) against the live /proc: our
 * own files, a UDP socket of ours found by port and by inode, a process
 * vanishing mid-read. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collect/procfs-host.h"
#include "collect/procfs.h"
#include "tap.h"

static void test_live_self(void) {
        _cleanup_close_ int fd = proc_open_pid_dir("/proc", getpid());
        CHECK(fd >= 0);

        struct proc_stat st;
        CHECK_R(proc_read_stat(fd, &st), 0);
        CHECK(st.pid == getpid() && st.ppid == getppid());
        CHECK(st.state == 'R' && st.num_threads >= 1 && !(st.flags & PROC_PF_KTHREAD));

        _cleanup_free_ char *comm = NULL;
        CHECK_R(read_file_at(AT_FDCWD, "/proc/self/comm", 64, &comm, NULL), 0);
        if (comm) {
                comm[strcspn(comm, "\n")] = 0;
                CHECK(streq(st.comm, comm));
        }

        struct proc_status s;
        CHECK_R(proc_read_status(fd, &s), 0);
        CHECK(s.has_tgid && s.tgid == getpid() && s.has_uids && s.uid_real == getuid() && s.uid_effective == geteuid());
        CHECK(s.has_vmrss && s.vmrss_bytes > 0);

        struct proc_statm sm;
        CHECK_R(proc_read_statm(fd, &sm), 0);
        CHECK(sm.resident_pages > 0);

        struct proc_netdev nd;
        CHECK_R(proc_read_netdev(fd, &nd), 0);

        struct stat nsst;
        uint64_t ino;
        CHECK(stat("/proc/self/ns/net", &nsst) == 0);
        CHECK_R(proc_read_netns_inode(fd, &ino), 0);
        CHECK(ino == (uint64_t)nsst.st_ino);

        char boot_id[64];
        CHECK_R(proc_read_boot_id("/proc", boot_id), 0);
        CHECK(strlen(boot_id) == 36);

        struct proc_cpu_total c;
        CHECK_R(proc_read_host_cpu("/proc", &c), 0);
        CHECK(c.ncpus >= 1);
        struct proc_meminfo m;
        CHECK_R(proc_read_meminfo("/proc", &m), 0);
        CHECK(m.total_bytes > 0);
        struct proc_loadavg l;
        CHECK_R(proc_read_loadavg("/proc", &l), 0);
        CHECK(l.total >= 1);
}

/* A UDP socket of ours, as StatsD attribution finds its sender: in
 * /proc/net/udp by port, and its inode among our fds. */
static void test_live_udp_socket(void) {
        _cleanup_close_ int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        _cleanup_close_ int piddir = proc_open_pid_dir("/proc", getpid());
        struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sin;
        struct stat st;
        uint64_t inode = 0;

        CHECK(sock >= 0 && piddir >= 0);
        CHECK(bind(sock, (struct sockaddr *)&sin, sizeof sin) == 0);
        CHECK(getsockname(sock, (struct sockaddr *)&sin, &len) == 0);
        CHECK(fstat(sock, &st) == 0);

        _cleanup_free_ struct proc_udp_socket *socks = NULL;
        size_t n = 0;
        CHECK_R(proc_read_udp_sockets("/proc", &socks, &n), 0);
        for (size_t i = 0; i < n; i++)
                if (socks[i].local_port == ntohs(sin.sin_port) && !socks[i].v6)
                        inode = socks[i].inode;
        CHECK(inode == (uint64_t)st.st_ino);
        _cleanup_free_ uint64_t *mine = NULL;
        size_t m = 0;
        bool found = false;
        CHECK_R(proc_read_socket_inodes(piddir, 1024, &mine, &m), 0);
        for (size_t i = 0; i < m; i++)
                found = found || mine[i] == inode;
        CHECK(found);
        CHECK(proc_read_udp_sockets("/nonexistent", &socks, &n) < 0);
}

/* A process that dies (and is reaped) between opening its dir and reading. */
static void test_vanish(void) {
        pid_t parent = getpid(), pid = fork();
        CHECK(pid >= 0);
        if (pid < 0)
                return;
        if (pid == 0) {
                /* never outlive the test, nor hold its output pipes open */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(0);
                (void)close(STDOUT_FILENO);
                (void)close(STDERR_FILENO);
                for (;;)
                        pause();
        }

        _cleanup_close_ int self = proc_open_pid_dir("/proc", getpid());
        _cleanup_close_ int fd = proc_open_pid_dir("/proc", pid);
        CHECK(fd >= 0);

        struct proc_stat st;
        CHECK_R(proc_read_stat(fd, &st), 0);
        CHECK(st.pid == pid && st.ppid == getpid());

        _cleanup_free_ int *kids = NULL;
        size_t nkids = 0;
        CHECK_R(proc_read_children(self, &kids, &nkids), 0);
        bool found = false;
        for (size_t i = 0; i < nkids; i++)
                found = found || kids[i] == pid;
        CHECK(found);
        /* the test is single-threaded: its own thread's list has the child */
        _cleanup_free_ int *own = NULL;
        size_t nown = 0;
        CHECK_R(proc_read_thread_children(self, getpid(), &own, &nown), 0);
        CHECK(nown == nkids && memcmp(own, kids, nown * sizeof *own) == 0);

        CHECK(kill(pid, SIGKILL) == 0);
        CHECK(waitpid(pid, NULL, 0) == pid);

        memset(&st, 0xaa, sizeof st);
        int r = proc_read_stat(fd, &st);
        CHECK(r == -ESRCH || r == -ENOENT);
        CHECK(proc_errno_is_gone(r));
        CHECK(st.pid == (int)0xaaaaaaaa);

        struct proc_status s;
        r = proc_read_status(fd, &s);
        CHECK(proc_errno_is_gone(r));
        struct proc_io io;
        r = proc_read_io(fd, &io);
        CHECK(proc_errno_is_gone(r));
        _cleanup_free_ int *gone_kids = NULL;
        r = proc_read_children(fd, &gone_kids, &nkids);
        CHECK(proc_errno_is_gone(r));
        r = proc_read_thread_children(fd, pid, &gone_kids, &nkids);
        CHECK(proc_errno_is_gone(r));
}

int main(void) {
        test_live_self();
        test_live_udp_socket();
        test_vanish();
        TEST_DONE();
}
