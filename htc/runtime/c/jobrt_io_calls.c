/* jobrt_io_calls.c -- the interposed system-call wrappers of the remote-I/O shim.
 *
 * Each wrapper asks whether its path (jobrt_io_map) or fd (jobrt_io_rfd) is remote; if not it
 * calls the real libc function unchanged, so local files cost one table lookup. Every spelling a
 * program may link against is wrapped: the 64-bit names, the fortified __*_chk/__open_2 names
 * (used by _FORTIFY_SOURCE builds such as Debian's python3) and, for binaries built against
 * glibc < 2.33, the __xstat family.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>
#include "jobrt_io.h"

int jobrt_io_dup(struct rfd *r, int target, int minfd, int cloexec);

#define RPATH char rp_[JOBRT_PATH_MAX]
#define MAPPED(dirfd, path) map_or_fail((dirfd), (path), rp_)

/* 1: remote (rp_ filled); 0: local; -1: error (errno set). */
static int map_or_fail(int dirfd, const char *path, char *out) {
    int m = jobrt_io_map(dirfd, path, out, JOBRT_PATH_MAX);
    if (m < 0) errno = ENAMETOOLONG;
    return m;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & (O_CREAT | __O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
}

/* ---- open ---- */

static int open_common(int dirfd, const char *path, int flags, mode_t mode, int (*real)(int, const char *, int, ...)) {
    RPATH;
    int m = MAPPED(dirfd, path);
    if (m < 0) return -1;
    if (m) return jobrt_io_open(rp_, flags, mode);
    return real(dirfd, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return open_common(dirfd, path, flags, mode, REAL(openat));
}
int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return open_common(dirfd, path, flags, mode, REAL(openat64));
}
int open(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return open_common(AT_FDCWD, path, flags, mode, REAL(openat));
}
int open64(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return open_common(AT_FDCWD, path, flags, mode, REAL(openat64));
}
int __open_2(const char *path, int flags) { return open_common(AT_FDCWD, path, flags, 0, REAL(openat)); }
int __open64_2(const char *path, int flags) { return open_common(AT_FDCWD, path, flags, 0, REAL(openat64)); }
int __openat_2(int d, const char *path, int flags) { return open_common(d, path, flags, 0, REAL(openat)); }
int __openat64_2(int d, const char *path, int flags) { return open_common(d, path, flags, 0, REAL(openat64)); }
int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

/* ---- fd calls ---- */

ssize_t read(int fd, void *buf, size_t n) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_read(r, buf, n) : REAL(read)(fd, buf, n);
}
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen) {
    if (n > buflen) abort();   /* what the fortified libc does: a buffer overflow */
    return read(fd, buf, n);
}
ssize_t write(int fd, const void *buf, size_t n) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_write(r, buf, n) : REAL(write)(fd, buf, n);
}

static ssize_t pread_remote(struct rfd *r, void *buf, size_t n, off_t off) {
    if (n > JOBRT_MAX_XFER) n = JOBRT_MAX_XFER;
    return jobrt_io_call(OP_PREAD, r->h, (int64_t)n, off, NULL, NULL, 0, buf, n, NULL);
}
static ssize_t pwrite_remote(struct rfd *r, const void *buf, size_t n, off_t off) {
    if (n > JOBRT_MAX_XFER) n = JOBRT_MAX_XFER;
    return jobrt_io_call(OP_PWRITE, r->h, 0, off, NULL, buf, n, NULL, 0, NULL);
}
ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? pread_remote(r, buf, n, off) : REAL(pread)(fd, buf, n, off);
}
ssize_t pread64(int fd, void *buf, size_t n, off_t off) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? pread_remote(r, buf, n, off) : REAL(pread64)(fd, buf, n, off);
}
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen) {
    if (n > buflen) abort();
    return pread(fd, buf, n, off);
}
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen) {
    if (n > buflen) abort();
    return pread64(fd, buf, n, off);
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? pwrite_remote(r, buf, n, off) : REAL(pwrite)(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? pwrite_remote(r, buf, n, off) : REAL(pwrite64)(fd, buf, n, off);
}

ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (!r) return REAL(readv)(fd, iov, cnt);
    ssize_t total = 0;
    for (int i = 0; i < cnt; i++) {
        ssize_t k = jobrt_io_read(r, iov[i].iov_base, iov[i].iov_len);
        if (k < 0) return total ? total : -1;
        total += k;
        if ((size_t)k < iov[i].iov_len) break;
    }
    return total;
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (!r) return REAL(writev)(fd, iov, cnt);
    ssize_t total = 0;
    for (int i = 0; i < cnt; i++) {
        ssize_t k = jobrt_io_write(r, iov[i].iov_base, iov[i].iov_len);
        if (k < 0) return total ? total : -1;
        total += k;
        if ((size_t)k < iov[i].iov_len) break;
    }
    return total;
}

off_t lseek(int fd, off_t off, int whence) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_lseek(r, off, whence) : REAL(lseek)(fd, off, whence);
}
off_t lseek64(int fd, off_t off, int whence) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_lseek(r, off, whence) : REAL(lseek64)(fd, off, whence);
}

int close(int fd) {
    return jobrt_io_rfd(fd) ? jobrt_io_close(fd) : REAL(close)(fd);
}

int fsync(int fd) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (!r) return REAL(fsync)(fd);
    r->deferred = 0;   /* the server reports (and forgets) any deferred write error now */
    return (int)jobrt_io_call(OP_FSYNC, r->h, 0, 0, NULL, NULL, 0, NULL, 0, NULL);
}
int fdatasync(int fd) { return jobrt_io_rfd(fd) ? fsync(fd) : REAL(fdatasync)(fd); }

int ftruncate(int fd, off_t len) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (!r) return REAL(ftruncate)(fd, len);
    return (int)jobrt_io_call(OP_FTRUNCATE, r->h, len, 0, NULL, NULL, 0, NULL, 0, NULL);
}
int ftruncate64(int fd, off_t len) { return jobrt_io_rfd(fd) ? ftruncate(fd, len) : REAL(ftruncate64)(fd, len); }

int dup(int fd) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_dup(r, -1, 0, 0) : REAL(dup)(fd);
}
static int dup_onto(int old, int new, int flags, int three) {
    struct rfd *r = jobrt_io_rfd(old);
    if (old == new) {
        if (three) { errno = EINVAL; return -1; }
        return r || fcntl(old, F_GETFD) >= 0 ? new : -1;
    }
    if (jobrt_io_rfd(new)) jobrt_io_close(new);   /* dup2 closes the target first */
    if (r) return jobrt_io_dup(r, new, 0, flags & O_CLOEXEC);
    return three ? REAL(dup3)(old, new, flags) : REAL(dup2)(old, new);
}
int dup2(int old, int new) { return dup_onto(old, new, 0, 0); }
int dup3(int old, int new, int flags) { return dup_onto(old, new, flags, 1); }

static int fcntl_common(int fd, int cmd, va_list ap, int (*real)(int, int, ...)) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (r && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        return jobrt_io_dup(r, -1, va_arg(ap, int), cmd == F_DUPFD_CLOEXEC);
    if (r && cmd == F_GETFL) return r->f.flags;
    /* F_GETFD/F_SETFD, locks (ignored by epoll: accepted), ...: on the placeholder */
    return real(fd, cmd, va_arg(ap, void *));
}
int fcntl(int fd, int cmd, ...) {
    va_list ap; va_start(ap, cmd); int rc = fcntl_common(fd, cmd, ap, REAL(fcntl)); va_end(ap);
    return rc;
}
int fcntl64(int fd, int cmd, ...) {
    va_list ap; va_start(ap, cmd); int rc = fcntl_common(fd, cmd, ap, REAL(fcntl64)); va_end(ap);
    return rc;
}

/* ---- stat family ---- */

int fstat(int fd, struct stat *st) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_fstat(r, st) : REAL(fstat)(fd, st);
}
int fstat64(int fd, struct stat64 *st) {
    struct rfd *r = jobrt_io_rfd(fd);
    return r ? jobrt_io_fstat(r, (struct stat *)st) : REAL(fstat64)(fd, st);
}

static int stat_at(int dirfd, const char *path, struct stat *st, int flags,
                   int (*real)(int, const char *, struct stat *, int)) {
    RPATH;
    if ((flags & AT_EMPTY_PATH) && path && !path[0] && jobrt_io_rfd(dirfd))
        return jobrt_io_fstat(jobrt_io_rfd(dirfd), st);
    int m = MAPPED(dirfd, path);
    if (m < 0) return -1;
    if (m) return jobrt_io_stat_path((flags & AT_SYMLINK_NOFOLLOW) ? OP_LSTAT : OP_STAT, rp_, st);
    return real(dirfd, path, st, flags);
}
#define STATAT(st) ((int (*)(int, const char *, struct stat *, int))(st))
int fstatat(int d, const char *p, struct stat *st, int fl) { return stat_at(d, p, st, fl, REAL(fstatat)); }
int fstatat64(int d, const char *p, struct stat64 *st, int fl) {
    return stat_at(d, p, (struct stat *)st, fl, STATAT(REAL(fstatat64)));
}
int stat(const char *p, struct stat *st) { return stat_at(AT_FDCWD, p, st, 0, REAL(fstatat)); }
int stat64(const char *p, struct stat64 *st) {
    return stat_at(AT_FDCWD, p, (struct stat *)st, 0, STATAT(REAL(fstatat64)));
}
int lstat(const char *p, struct stat *st) { return stat_at(AT_FDCWD, p, st, AT_SYMLINK_NOFOLLOW, REAL(fstatat)); }
int lstat64(const char *p, struct stat64 *st) {
    return stat_at(AT_FDCWD, p, (struct stat *)st, AT_SYMLINK_NOFOLLOW, STATAT(REAL(fstatat64)));
}

/* glibc < 2.33 binaries call these (version argument first). */
int __xstat(int v, const char *p, struct stat *st);
int __lxstat(int v, const char *p, struct stat *st);
int __fxstat(int v, int fd, struct stat *st);
int __fxstatat(int v, int d, const char *p, struct stat *st, int fl);
int __xstat64(int v, const char *p, struct stat64 *st);
int __lxstat64(int v, const char *p, struct stat64 *st);
int __fxstat64(int v, int fd, struct stat64 *st);
int __fxstatat64(int v, int d, const char *p, struct stat64 *st, int fl);
int __xstat(int v, const char *p, struct stat *st) { (void)v; return stat(p, st); }
int __lxstat(int v, const char *p, struct stat *st) { (void)v; return lstat(p, st); }
int __fxstat(int v, int fd, struct stat *st) { (void)v; return fstat(fd, st); }
int __fxstatat(int v, int d, const char *p, struct stat *st, int fl) { (void)v; return fstatat(d, p, st, fl); }
int __xstat64(int v, const char *p, struct stat64 *st) { (void)v; return stat64(p, st); }
int __lxstat64(int v, const char *p, struct stat64 *st) { (void)v; return lstat64(p, st); }
int __fxstat64(int v, int fd, struct stat64 *st) { (void)v; return fstat64(fd, st); }
int __fxstatat64(int v, int d, const char *p, struct stat64 *st, int fl) { (void)v; return fstatat64(d, p, st, fl); }

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *sx) {
    RPATH;
    struct stat st;
    int m = ((flags & AT_EMPTY_PATH) && !path[0] && jobrt_io_rfd(dirfd)) ? 2 : MAPPED(dirfd, path);
    if (m < 0) return -1;
    if (!m) return REAL(statx)(dirfd, path, flags, mask, sx);
    int rc = m == 2 ? jobrt_io_fstat(jobrt_io_rfd(dirfd), &st)
                    : jobrt_io_stat_path((flags & AT_SYMLINK_NOFOLLOW) ? OP_LSTAT : OP_STAT, rp_, &st);
    if (rc < 0) return -1;
    memset(sx, 0, sizeof *sx);
    sx->stx_mask = STATX_BASIC_STATS;
    sx->stx_blksize = st.st_blksize; sx->stx_nlink = st.st_nlink;
    sx->stx_uid = st.st_uid; sx->stx_gid = st.st_gid; sx->stx_mode = st.st_mode;
    sx->stx_ino = st.st_ino; sx->stx_size = st.st_size; sx->stx_blocks = st.st_blocks;
    sx->stx_atime.tv_sec = st.st_atim.tv_sec; sx->stx_atime.tv_nsec = st.st_atim.tv_nsec;
    sx->stx_mtime.tv_sec = st.st_mtim.tv_sec; sx->stx_mtime.tv_nsec = st.st_mtim.tv_nsec;
    sx->stx_ctime.tv_sec = st.st_ctim.tv_sec; sx->stx_ctime.tv_nsec = st.st_ctim.tv_nsec;
    sx->stx_rdev_major = major(st.st_rdev); sx->stx_rdev_minor = minor(st.st_rdev);
    sx->stx_dev_major = major(st.st_dev); sx->stx_dev_minor = minor(st.st_dev);
    return 0;
}

/* ---- path calls ---- */

static int path_call(int op, int dirfd, const char *path, int64_t a1, int64_t a2, int *local) {
    RPATH;
    int m = MAPPED(dirfd, path);
    *local = m == 0;
    if (m <= 0) return -1;
    return (int)jobrt_io_call(op, -1, a1, a2, rp_, NULL, 0, NULL, 0, NULL);
}

#define PATHCALL(op, d, p, a1, a2, fallback) \
    do { int local_; int rc_ = path_call(op, d, p, a1, a2, &local_); return local_ ? (fallback) : rc_; } while (0)

int access(const char *p, int mode) { PATHCALL(OP_ACCESS, AT_FDCWD, p, mode, 0, REAL(access)(p, mode)); }
int faccessat(int d, const char *p, int mode, int fl) {
    PATHCALL(OP_ACCESS, d, p, mode, 0, REAL(faccessat)(d, p, mode, fl));
}
int unlink(const char *p) { PATHCALL(OP_UNLINK, AT_FDCWD, p, 0, 0, REAL(unlink)(p)); }
int unlinkat(int d, const char *p, int fl) {
    PATHCALL((fl & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, d, p, 0, 0, REAL(unlinkat)(d, p, fl));
}
int rmdir(const char *p) { PATHCALL(OP_RMDIR, AT_FDCWD, p, 0, 0, REAL(rmdir)(p)); }
int mkdir(const char *p, mode_t mode) { PATHCALL(OP_MKDIR, AT_FDCWD, p, mode, 0, REAL(mkdir)(p, mode)); }
int mkdirat(int d, const char *p, mode_t mode) { PATHCALL(OP_MKDIR, d, p, mode, 0, REAL(mkdirat)(d, p, mode)); }
int truncate(const char *p, off_t len) { PATHCALL(OP_TRUNCATE, AT_FDCWD, p, len, 0, REAL(truncate)(p, len)); }
int truncate64(const char *p, off_t len) { PATHCALL(OP_TRUNCATE, AT_FDCWD, p, len, 0, REAL(truncate64)(p, len)); }

static int rename_common(int d1, const char *p1, int d2, const char *p2, unsigned int flags) {
    char a[JOBRT_PATH_MAX], b[JOBRT_PATH_MAX];
    int m1 = map_or_fail(d1, p1, a), m2 = map_or_fail(d2, p2, b);
    if (m1 < 0 || m2 < 0) return -1;
    if (!m1 && !m2) return REAL(renameat2)(d1, p1, d2, p2, flags);
    if (m1 != m2 || flags) { errno = EXDEV; return -1; }   /* across the local/remote line */
    return (int)jobrt_io_call(OP_RENAME, -1, 0, 0, a, b, strlen(b), NULL, 0, NULL);
}
int rename(const char *a, const char *b) { return rename_common(AT_FDCWD, a, AT_FDCWD, b, 0); }
int renameat(int d1, const char *a, int d2, const char *b) { return rename_common(d1, a, d2, b, 0); }
int renameat2(int d1, const char *a, int d2, const char *b, unsigned int fl) { return rename_common(d1, a, d2, b, fl); }
