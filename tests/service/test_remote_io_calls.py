"""The rest of the forwarded calls, from C: p/v I/O, truncation, fsync, statx, *at() on remote
directory fds, chdir/getcwd and relative paths, lstat of a link, access modes."""

from __future__ import annotations

import os

from remote_io_jobs import PREFIX, compile_c, run_job

PROGRAM = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
int main(void) {
    char a[8] = {0}, b[8] = {0}, cwd[512];
    ssize_t n;
    int rc;
    int fd = open(PREFIX "/data", O_RDWR | O_CREAT | O_TRUNC, 0640);
    printf("pwrite %zd\n", pwrite(fd, "0123456789", 10, 0));
    n = pread(fd, a, 4, 3);
    printf("pread %zd %s\n", n, a);
    struct iovec w[2] = {{"AB", 2}, {"CD", 2}};
    lseek(fd, 0, SEEK_END);
    printf("writev %zd\n", writev(fd, w, 2));
    lseek(fd, 8, SEEK_SET);
    memset(a, 0, sizeof a);
    struct iovec r[2] = {{a, 3}, {b, 3}};
    n = readv(fd, r, 2);
    printf("readv %zd %s %s\n", n, a, b);
    printf("ftruncate %d fsync %d\n", ftruncate(fd, 5), fsync(fd));
    struct stat st;
    fstat(fd, &st);
    printf("size %lld mode %o\n", (long long)st.st_size, st.st_mode & 0777);
    close(fd);
    printf("truncate %d\n", truncate(PREFIX "/data", 2));
    struct statx sx;
    rc = statx(AT_FDCWD, PREFIX "/data", 0, STATX_BASIC_STATS, &sx);
    printf("statx %d %llu\n", rc, (unsigned long long)sx.stx_size);
    rc = lstat(PREFIX "/link", &st);
    printf("lstat-link %d %d\n", rc, S_ISLNK(st.st_mode));
    rc = stat(PREFIX "/link", &st);
    printf("stat-link %d %lld\n", rc, (long long)st.st_size);
    int dir = open(PREFIX "/dir", O_RDONLY | O_DIRECTORY);
    int in = openat(dir, "inner", O_RDONLY);
    memset(a, 0, sizeof a);
    n = read(in, a, 5);
    printf("openat %zd %s\n", n, a);
    rc = fstatat(dir, "inner", &st, 0);
    printf("fstatat %d %lld\n", rc, (long long)st.st_size);
    close(in); close(dir);
    rc = access(PREFIX "/data", R_OK | W_OK);
    int gone = access(PREFIX "/nope", F_OK) < 0 && errno == ENOENT;
    printf("access %d %d\n", rc, gone);
    printf("chdir %d\n", chdir(PREFIX "/dir"));
    printf("getcwd %s\n", getcwd(cwd, sizeof cwd));
    FILE *f = fopen("made-here", "w"); fputs("rel\n", f); fclose(f);
    rc = chdir("..");
    printf("chdir-up %d %s\n", rc, getcwd(cwd, sizeof cwd));
    rc = chdir("..");
    printf("chdir-out %d %d\n", rc, errno);
    rc = chdir("/");
    printf("chdir-local %d %s\n", rc, getcwd(cwd, sizeof cwd));
    printf("local-now %d\n", access("made-here", F_OK));
    return 0;
}
"""


def test_the_other_forwarded_calls(tmp_path):
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "inner").write_text("inner")
    os.symlink("dir/inner", root / "link")
    exe = compile_c(tmp_path, "calls", PROGRAM.replace("PREFIX", f'"{PREFIX}"'))
    run = run_job([str(exe)], root, pipeline=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "pwrite 10", "pread 4 3456", "writev 4", "readv 6 89A BCD", "ftruncate 0 fsync 0",
        "size 5 mode 640", "truncate 0", "statx 0 2", "lstat-link 0 1", "stat-link 0 5",
        "openat 5 inner", "fstatat 0 5", "access 0 1", "chdir 0", f"getcwd {PREFIX}/dir",
        f"chdir-up 0 {PREFIX}", "chdir-out -1 13", "chdir-local 0 /", "local-now -1",
    ]
    assert (root / "dir" / "made-here").read_text() == "rel\n"
    assert (root / "data").read_bytes() == b"01"
