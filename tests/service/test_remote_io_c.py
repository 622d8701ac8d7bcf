"""Remote I/O for a C program: its file calls on PREFIX paths run in the server's root."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from remote_io_jobs import PREFIX, compile_c, run_job

PROGRAM = r"""
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define P(rel) (snprintf(path, sizeof path, "%s/%s", root, rel), path)
int main(int argc, char **argv) {
    const char *root = argv[1];
    char path[512], buf[256];
    struct stat st;
    int rc = stat(P("in.txt"), &st);
    printf("stat %d %lld\n", rc, (long long)st.st_size);
    int fd = open(P("in.txt"), O_RDONLY);
    ssize_t n = read(fd, buf, 5); buf[n] = 0;
    printf("read %s\n", buf);
    printf("lseek %lld\n", (long long)lseek(fd, 6, SEEK_SET));
    n = read(fd, buf, sizeof buf); buf[n] = 0;
    printf("read %s\n", buf);
    rc = fstat(fd, &st);
    printf("fstat %d %lld %d\n", rc, (long long)st.st_size, S_ISREG(st.st_mode));
    printf("close %d\n", close(fd));
    FILE *f = fopen(P("out.txt"), "w"); fprintf(f, "line1\n"); fclose(f);
    f = fopen(P("out.txt"), "a"); fprintf(f, "line2\n"); fclose(f);
    fd = open(P("out.txt"), O_WRONLY | O_APPEND); write(fd, "line3\n", 6); close(fd);
    f = fopen(P("out.txt"), "r");
    while (fgets(buf, sizeof buf, f)) printf("got %s", buf);
    printf("fileno>2 %d\n", fileno(f) > 2);
    fclose(f);
    printf("mkdir %d\n", mkdir(P("sub"), 0755));
    char to[512]; snprintf(to, sizeof to, "%s/sub/moved.txt", root);
    printf("rename %d\n", rename(P("out.txt"), to));
    DIR *d = opendir(root);
    struct dirent *e;
    while ((e = readdir(d))) if (e->d_name[0] != '.') printf("entry %s\n", e->d_name);
    closedir(d);
    printf("unlink %d\n", unlink(P("gone.txt")));
    rc = access(P("gone.txt"), F_OK);
    printf("access-gone %d %d\n", rc, errno);
    printf("rmdir-nonempty %d\n", rmdir(P("sub")));
    return 0;
}
"""

ESCAPES = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        int e = errno;
        printf("%s %s\n", argv[i], fd >= 0 ? "opened" : strerrorname_np(e));
    }
    return 0;
}
"""


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "in.txt").write_text("hello world")
    (root / "gone.txt").write_text("x")
    return root


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "unpipelined"])
def test_c_program_works_on_files_that_exist_only_on_the_server(tmp_path, root, pipeline):
    exe = compile_c(tmp_path, "prog", PROGRAM)
    assert not os.path.exists(PREFIX)
    run = run_job([str(exe), PREFIX], root, pipeline=pipeline)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line for line in lines if not line.startswith("entry ")] == [
        "stat 0 11", "read hello", "lseek 6", "read world", "fstat 0 11 1", "close 0",
        "got line1", "got line2", "got line3", "fileno>2 1", "mkdir 0", "rename 0",
        "unlink 0", "access-gone -1 2", "rmdir-nonempty -1",
    ]
    # (listing order is the directory's)
    assert sorted(line for line in lines if line.startswith("entry ")) == [
        "entry gone.txt", "entry in.txt", "entry sub"]
    assert (root / "sub" / "moved.txt").read_text() == "line1\nline2\nline3\n"
    assert not (root / "gone.txt").exists()
    assert run.server_rc == 0


def test_paths_escaping_the_root_are_refused_and_local_paths_stay_local(tmp_path, root):
    (tmp_path / "secret").write_text("outside")
    os.symlink(tmp_path / "secret", root / "link-out")
    os.symlink("/etc", root / "etc-link")
    exe = compile_c(tmp_path, "esc", ESCAPES)
    local = tmp_path / "local.txt"
    local.write_text("local")
    run = run_job([str(exe), f"{PREFIX}/../secret", f"{PREFIX}/link-out", f"{PREFIX}/etc-link/hostname",
                   f"{PREFIX}/in.txt", str(local), f"{PREFIX}x/in.txt"], root)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"{PREFIX}/../secret EACCES", f"{PREFIX}/link-out EACCES", f"{PREFIX}/etc-link/hostname EACCES",
        f"{PREFIX}/in.txt opened", f"{local} opened", f"{PREFIX}x/in.txt ENOENT",
    ]


def test_a_raw_client_cannot_reach_outside_either(tmp_path, root):
    # The shim is not trusted: a job that speaks the protocol itself gets the same refusals.
    from htc.runtime import protocol as P
    server_end, job_end = socket.socketpair()
    server = subprocess.Popen([sys.executable, "-m", "htc.runtime.remote_io", "--fd",
                               str(server_end.fileno()), "--root", str(root)], pass_fds=[server_end.fileno()])
    server_end.close()
    with job_end:
        for path in (b"/etc/passwd", b"../../etc/passwd"):
            job_end.sendall(P.encode_request(P.Op.OPEN, a1=os.O_RDONLY, path=path))
            ret, err, *_ = P.decode_reply(job_end.recv(4096))
            assert (ret, err) == (-1, 13)
    assert server.wait(timeout=60) == 0


def test_a_malformed_stream_closes_the_connection(tmp_path, root):
    server_end, job_end = socket.socketpair()
    server = subprocess.Popen([sys.executable, "-m", "htc.runtime.remote_io", "--fd",
                               str(server_end.fileno()), "--root", str(root)],
                              pass_fds=[server_end.fileno()], stderr=subprocess.PIPE, text=True)
    server_end.close()
    with job_end:
        job_end.sendall(b"GET / HTTP/1.0\r\n" * 4)
        assert job_end.recv(100) == b""   # the server hung up
    _, err = server.communicate(timeout=60)
    assert server.returncode == 1 and "malformed request header" in err
