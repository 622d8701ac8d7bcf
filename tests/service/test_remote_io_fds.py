"""Remote fds under the shim: numbering, dup*, fcntl, the table a checkpoint saves, reconnection."""

from __future__ import annotations

import subprocess
import sys

from htc.runtime import remote_io
from remote_io_jobs import PREFIX, compile_c, run_job

PROGRAM = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "jobrt.h"
int main(int argc, char **argv) {
    char buf[64] = {0};
    int fd = open(PREFIX "/in.txt", O_RDONLY);
    int local = open(argv[1], O_RDONLY);
    printf("distinct %d\n", fd >= 0 && local >= 0 && fd != local);
    int d = dup(fd);
    read(fd, buf, 5);
    memset(buf, 0, sizeof buf);
    read(d, buf, 6);                        /* dup shares the offset */
    printf("dup %s|\n", buf);
    printf("dup2 %d\n", dup2(fd, 50));
    lseek(50, 0, SEEK_SET);
    memset(buf, 0, sizeof buf);
    read(50, buf, 5);
    printf("via50 %s\n", buf);
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 100);
    printf("dupfd %d cloexec %d\n", hi >= 100, (fcntl(hi, F_GETFD) & FD_CLOEXEC) != 0);
    printf("getfl %d\n", (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
    close(d); close(50); close(hi);
    printf("closed %d\n", read(50, buf, 1) < 0 && errno == EBADF);
    int out = open(PREFIX "/out.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(out, "abc", 3);
    lseek(fd, 3, SEEK_SET);
    struct jobrt_rfile files[8];
    int n = jobrt_io_remote_files(files, 8);
    for (int i = 0; i < n; i++)
        printf("rfile %s %lld %d\n", files[i].path, files[i].offset, files[i].fd == fd || files[i].fd == out);
    /* a checkpoint: quiesce records out.txt's size; what is written after it (here straight into
     * the server's directory, as the lost incarnation would have) is rolled back on reconnect */
    printf("quiesce %d\n", jobrt_io_quiesce());
    int direct = open(argv[3], O_WRONLY | O_APPEND);
    write(direct, "XYZ", 3);
    close(direct);
    /* a "restart": the connection is replaced by one to another server on the same root */
    int next = atoi(argv[2]), mine = atoi(getenv("JOBRT_IO_FD"));
    dup2(next, mine);
    close(next);
    printf("reconnect %d\n", jobrt_io_reconnect());
    memset(buf, 0, sizeof buf);
    read(fd, buf, 4);
    printf("after %s\n", buf);
    write(out, "d", 1);
    close(out);
    close(fd);
    return 0;
}
"""


def test_remote_fds_dup_table_quiesce_rollback_and_reconnect(tmp_path):
    from htc.runtime import build
    root = tmp_path / "root"
    root.mkdir()
    (root / "in.txt").write_text("hello world")
    local = tmp_path / "local.txt"
    local.write_text("L")
    src = PROGRAM.replace("PREFIX", f'"{PREFIX}"')
    (tmp_path / "prog.c").write_text(src)
    exe = tmp_path / "prog"
    subprocess.run(["cc", "-O2", "-I", str(build.SOURCE_DIR), "-o", str(exe), str(tmp_path / "prog.c"),
                    str(build.library())], check=True)
    # the second server, which the job switches to half way
    second_server, second_job = remote_io.socket_pair()
    server = subprocess.Popen([sys.executable, "-m", "htc.runtime.remote_io", "--fd",
                               str(second_server.fileno()), "--root", str(root)],
                              pass_fds=[second_server.fileno()])
    second_server.close()
    try:
        run = run_job([str(exe), str(local), str(second_job.fileno()), str(root / "out.txt")], root,
                      extra_fds=(second_job.fileno(),))
    finally:
        second_job.close()
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "distinct 1", "dup  world|", "dup2 50", "via50 hello", "dupfd 1 cloexec 1", "getfl 1",
        "closed 1", "rfile in.txt 3 1", "rfile out.txt 3 1", "quiesce 0", "reconnect 0", "after lo w",
    ]
    assert (root / "out.txt").read_text() == "abcd"   # not "abcdYZ": rolled back to the checkpoint
    assert run.server_rc == 0 and server.wait(timeout=60) == 0


DEFERRED = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    int fd = open(PREFIX "/in.txt", O_RDONLY);
    ssize_t n = write(fd, "x", 1);          /* the file is read-only: EBADF on the server */
    int e = errno;
    printf("write %zd %d\n", n, n < 0 ? e : 0);
    int rc = close(fd);
    e = errno;
    printf("close %d %d\n", rc, rc < 0 ? e : 0);
    return 0;
}
"""


def test_a_pipelined_write_error_is_reported_by_close(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "in.txt").write_text("hello")
    exe = compile_c(tmp_path, "deferred", DEFERRED.replace("PREFIX", f'"{PREFIX}"'))
    piped = run_job([str(exe)], root, pipeline=True)
    assert piped.stdout.splitlines() == ["write 1 0", "close -1 9"], piped.stderr
    direct = run_job([str(exe)], root, pipeline=False)
    assert direct.stdout.splitlines() == ["write -1 9", "close 0 0"], direct.stderr
    assert (root / "in.txt").read_text() == "hello"


FORK = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    int fd = open(PREFIX "/in.txt", O_RDONLY);
    fflush(stdout);
    if (fork() == 0) {   /* the child must not use the parent's connection */
        char c;
        int a = open(PREFIX "/in.txt", O_RDONLY), ea = errno;
        ssize_t r = read(fd, &c, 1);
        int er = errno;
        printf("child open %d %d read %zd %d\n", a, ea, r, er);
        fflush(stdout);
        _exit(0);
    }
    wait(NULL);
    char buf[6] = {0};
    printf("parent read %zd %s\n", read(fd, buf, 5), buf);
    return 0;
}
"""


def test_a_forked_child_gets_eio_and_the_parent_keeps_working(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "in.txt").write_text("hello")
    exe = compile_c(tmp_path, "fork", FORK.replace("PREFIX", f'"{PREFIX}"'))
    run = run_job([str(exe)], root)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["child open -1 5 read -1 5", "parent read 5 hello"]


DEFER = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "jobrt.h"
static void handler(int sig) {
    char msg[64];
    int n = snprintf(msg, sizeof msg, "handler busy=%d\n", jobrt_io_busy);
    write(1, msg, n);
}
int main(void) {
    struct stat st;
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGUSR1, handler);
    printf("idle busy=%d\n", jobrt_io_busy);
    jobrt_io_deferred_signal = SIGUSR1;   /* what a checkpoint handler does when it finds busy */
    printf("stat %d\n", stat(PREFIX "/in.txt", &st));
    printf("pending %d\n", jobrt_io_deferred_signal);
    return 0;
}
"""


def test_a_deferred_checkpoint_signal_is_raised_when_the_call_ends(tmp_path):
    from htc.runtime import build
    root = tmp_path / "root"
    root.mkdir()
    (root / "in.txt").write_text("x")
    (tmp_path / "defer.c").write_text(DEFER.replace("PREFIX", f'"{PREFIX}"'))
    subprocess.run(["cc", "-O2", "-I", str(build.SOURCE_DIR), "-o", str(tmp_path / "defer"),
                    str(tmp_path / "defer.c"), str(build.library())], check=True)
    run = run_job([str(tmp_path / "defer")], root)
    assert run.returncode == 0, run.stderr
    # the signal is delivered inside stat(), right after its remote call, before stat returns
    assert run.stdout.splitlines() == ["idle busy=0", "handler busy=0", "stat 0", "pending 0"]
