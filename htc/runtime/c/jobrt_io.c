/* jobrt_io.c -- the remote-I/O shim's core: configuration, the remote-fd table, the transport,
 * path mapping, and the core file operations.
 *
 * Theory of operation. The starter runs the job with LD_PRELOAD=libjobrt.so and
 *   JOBRT_IO_FD=N           an inherited, connected stream socket to the file server;
 *   JOBRT_IO_PREFIX=/P      absolute paths at or below /P are remote: /P/x is "x" on the server;
 *   JOBRT_IO_CWD=rel        (optional) the job starts in the remote directory "rel" (e.g. "."),
 *                           so relative paths are remote until it chdir()s to a local directory;
 *   JOBRT_IO_PIPELINE=1     (optional) small writes are sent without waiting for their result.
 * A remote open gets a placeholder fd: a real epoll fd, so the number is the kernel's to give
 * and never clashes with a local fd, fcntl()/ioctl(FIOCLEX) on it work, and a call that slips
 * past the shim fails loudly (EINVAL) instead of touching some other file. The table
 * jobrt_io_fds[] maps the placeholder to the server's handle, the server path, flags and offset.
 * Paths are sent as written (not normalised): the server resolves them beneath its root and
 * refuses any that escape it, so the shim is not trusted with that decision.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "jobrt_io.h"

int jobrt_io_on;
volatile int jobrt_io_busy;
volatile int jobrt_io_deferred_signal;
int jobrt_io_pipeline;
struct rfd *jobrt_io_fds[JOBRT_MAX_FDS];

static int sock = -1;
static char prefix[JOBRT_PATH_MAX];
static size_t prefix_len;
char jobrt_io_vcwd[JOBRT_PATH_MAX];   /* remote cwd (server path), "" when the cwd is local */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char obuf[1 << 16];            /* queued no-reply requests */
static size_t olen;

void *jobrt_io_real(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) abort();   /* a libc without the symbol we wrap: nothing sane to do */
    return p;
}

static void child_after_fork(void) {
    /* The child shares the parent's connection; interleaved requests would corrupt it. Its
     * remote calls fail with EIO (remote paths stay remote: they must not fall through to
     * whatever the execute side has under the same name). */
    sock = -1;
    olen = 0;   /* the parent sends what it queued */
}

__attribute__((constructor)) static void jobrt_io_init(void) {
    const char *fd = getenv("JOBRT_IO_FD"), *pre = getenv("JOBRT_IO_PREFIX");
    const char *cwd = getenv("JOBRT_IO_CWD"), *pipe = getenv("JOBRT_IO_PIPELINE");
    if (!fd || !pre || pre[0] != '/' || strlen(pre) >= sizeof prefix) return;
    sock = atoi(fd);
    if (fcntl(sock, F_GETFD) < 0) { sock = -1; return; }
    strcpy(prefix, pre);
    prefix_len = strlen(prefix);
    while (prefix_len > 1 && prefix[prefix_len - 1] == '/') prefix[--prefix_len] = 0;
    if (cwd && strlen(cwd) < sizeof jobrt_io_vcwd) strcpy(jobrt_io_vcwd, cwd[0] ? cwd : ".");
    jobrt_io_pipeline = pipe && pipe[0] == '1';
    pthread_atfork(NULL, NULL, child_after_fork);
    jobrt_io_on = 1;
}

__attribute__((destructor)) static void jobrt_io_fini(void) {
    if (jobrt_io_on) jobrt_io_flush();
}

int jobrt_io_active(void) { return jobrt_io_on; }

/* ---- path mapping ---- */

static int join(char *out, size_t cap, const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb + 1 > cap) return -1;
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 1;
}

int jobrt_io_map(int dirfd, const char *path, char *out, size_t cap) {
    if (!jobrt_io_on || !path) return 0;
    if (path[0] == '/') {
        if (strncmp(path, prefix, prefix_len) != 0) return 0;
        const char *rest = path + prefix_len;
        if (prefix_len > 1 && rest[0] != '/' && rest[0] != 0) return 0;  /* /P2 is not /P */
        while (*rest == '/') rest++;
        if (!*rest) rest = ".";
        if (strlen(rest) + 1 > cap) return -1;
        strcpy(out, rest);
        return 1;
    }
    if (dirfd == AT_FDCWD) {
        if (!jobrt_io_vcwd[0]) return 0;
        return join(out, cap, jobrt_io_vcwd, path[0] ? path : ".");
    }
    struct rfd *r = jobrt_io_rfd(dirfd);
    return r ? join(out, cap, r->f.path, path[0] ? path : ".") : 0;
}

/* Build the remote namespace's job-side spelling of a server path (for getcwd). */
int jobrt_io_jobpath(const char *rpath, char *out, size_t cap) {
    const char *p = rpath;
    while (p[0] == '.' && (p[1] == '/' || !p[1])) p += p[1] ? 2 : 1;
    size_t n = prefix_len + 1 + strlen(p) + 1;
    if (n > cap) return -1;
    strcpy(out, prefix);
    if (*p) { if (prefix_len > 1) strcat(out, "/"); strcat(out, p); }
    return 0;
}

/* ---- transport ---- */

static int send_all(struct iovec *iov, int n) {
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = n};
        ssize_t k = sendmsg(sock, &m, MSG_NOSIGNAL);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        while (n > 0 && (size_t)k >= iov->iov_len) { k -= iov->iov_len; iov++; n--; }
        if (n > 0) { iov->iov_base = (char *)iov->iov_base + k; iov->iov_len -= k; }
    }
    return 0;
}

static int recv_all(void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t k = recv(sock, p, n, MSG_WAITALL);
        if (k == 0) { errno = ECONNRESET; return -1; }
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        p += k; n -= k;
    }
    return 0;
}

static void broken(void) {
    /* The server went away: every remote call now fails with EIO (local calls are unaffected)
     * until jobrt_io_reconnect(). */
    sock = -1;
}

static int flush_locked(void) {
    if (!olen) return 0;
    if (sock < 0) { olen = 0; errno = EIO; return -1; }
    struct iovec iov = {obuf, olen};
    olen = 0;
    if (send_all(&iov, 1) < 0) { broken(); errno = EIO; return -1; }
    return 0;
}

static void hold(void);
static void release(void);

static void enter(void) {
    hold();
    pthread_mutex_lock(&lock);
}

/* hold/release: a checkpoint signal that arrives in between waits (jobrt_io_busy > 0) until the
 * outermost release. A wrapper holds across its call AND its bookkeeping (offsets, the fd table),
 * so an image never records a call the server made but the table does not show yet. */
static void hold(void) {
    jobrt_io_busy++;
}

static void release(void) {
    if (--jobrt_io_busy == 0 && jobrt_io_deferred_signal) {
        int sig = jobrt_io_deferred_signal, e = errno;
        jobrt_io_deferred_signal = 0;
        raise(sig);   /* the checkpoint that waited for this call to end */
        errno = e;
    }
}

static void leave(void) {
    pthread_mutex_unlock(&lock);
    release();
}

int jobrt_io_flush(void) {
    enter();
    int rc = flush_locked();
    leave();
    return rc;
}

int jobrt_io_send_noreply(int op, int64_t h, int64_t a1, int64_t a2, const void *data, size_t dlen) {
    struct jobrt_req q = {JOBRT_MAGIC, op, REQ_NOREPLY, h, a1, a2, 0, (uint32_t)dlen};
    enter();
    if (sock < 0) { leave(); errno = EIO; return -1; }
    if (olen + sizeof q + dlen > sizeof obuf && flush_locked() < 0) {
        leave();
        return -1;
    }
    int rc = 0;
    if (sizeof q + dlen > sizeof obuf) {   /* too big to queue: send it now */
        struct iovec iov[2] = {{&q, sizeof q}, {(void *)data, dlen}};
        if (send_all(iov, 2) < 0) { broken(); errno = EIO; rc = -1; }
    } else {
        memcpy(obuf + olen, &q, sizeof q);
        memcpy(obuf + olen + sizeof q, data, dlen);
        olen += sizeof q + dlen;
    }
    leave();
    return rc;
}

int64_t jobrt_io_call(int op, int64_t h, int64_t a1, int64_t a2, const char *path,
                      const void *data, size_t dlen, void *rbuf, size_t rcap,
                      struct jobrt_rep *rep) {
    size_t plen = path ? strlen(path) : 0;
    struct jobrt_req q = {JOBRT_MAGIC, op, 0, h, a1, a2, (uint32_t)plen, (uint32_t)dlen};
    struct jobrt_rep local;
    if (!rep) rep = &local;
    enter();
    if (sock < 0) { leave(); errno = EIO; return -1; }
    struct iovec iov[4] = {{obuf, olen}, {&q, sizeof q}, {(void *)path, plen}, {(void *)data, dlen}};
    olen = 0;
    if (send_all(iov, 4) < 0) goto fail;
    /* One recvmsg takes the header and (usually) the data: only this reply is in flight, so
     * nothing beyond it can arrive. */
    struct iovec riov[2] = {{rep, sizeof *rep}, {rbuf, rcap}};
    struct msghdr m = {.msg_iov = riov, .msg_iovlen = rcap ? 2 : 1};
    ssize_t got;
    do got = recvmsg(sock, &m, 0); while (got < 0 && errno == EINTR);
    if (got <= 0) goto fail;
    size_t have = 0;
    if ((size_t)got < sizeof *rep) {
        if (recv_all((char *)rep + got, sizeof *rep - got) < 0) goto fail;
    } else {
        have = got - sizeof *rep;
    }
    size_t take = rep->dlen < rcap ? rep->dlen : rcap;
    if (take > have && recv_all((char *)rbuf + have, take - have) < 0) goto fail;
    for (size_t left = rep->dlen - take; left > 0;) {   /* drop what does not fit */
        char sink[4096];
        size_t k = left < sizeof sink ? left : sizeof sink;
        if (recv_all(sink, k) < 0) goto fail;
        left -= k;
    }
    leave();
    if (rep->ret < 0) errno = rep->err;
    return rep->ret;
fail:
    broken();
    leave();
    errno = EIO;
    return -1;
}

/* ---- the remote-fd table and core operations ---- */

static int placeholder(int cloexec) {
    return epoll_create1(cloexec ? EPOLL_CLOEXEC : 0);
}

static int install(int fd, int64_t h, int flags, long long offset, const char *rpath) {
    struct rfd *r = calloc(1, sizeof *r);
    if (!r) return -1;
    r->h = h;
    r->f.fd = fd;
    r->f.flags = flags & ~(O_CREAT | O_TRUNC | O_EXCL);
    r->f.offset = offset;
    r->ckpt_size = -1;
    size_t len = strlen(rpath);
    if (len >= sizeof r->f.path) len = sizeof r->f.path - 1;
    memcpy(r->f.path, rpath, len);
    r->f.path[len] = 0;
    jobrt_io_fds[fd] = r;
    return fd;
}

static int open_held(const char *rpath, int flags, mode_t mode) {
    struct jobrt_rep rep;
    int64_t h = jobrt_io_call(OP_OPEN, -1, flags, mode, rpath, NULL, 0, NULL, 0, &rep);
    if (h < 0) return -1;
    int fd = placeholder(flags & O_CLOEXEC);
    if (fd < 0 || fd >= JOBRT_MAX_FDS) {
        int e = fd < 0 ? errno : EMFILE;
        if (fd >= 0) REAL(close)(fd);
        jobrt_io_call(OP_CLOSE, h, 0, 0, NULL, NULL, 0, NULL, 0, NULL);
        errno = e;
        return -1;
    }
    return install(fd, h, flags, rep.aux, rpath);
}

int jobrt_io_open(const char *rpath, int flags, mode_t mode) {
    hold();   /* until the new fd is in the table */
    int fd = open_held(rpath, flags, mode);
    release();
    return fd;
}

ssize_t jobrt_io_read(struct rfd *r, void *buf, size_t n) {
    struct jobrt_rep rep;
    if (n > JOBRT_MAX_XFER) n = JOBRT_MAX_XFER;
    hold();   /* until the offset is recorded */
    int64_t k = jobrt_io_call(OP_READ, r->h, (int64_t)n, 0, NULL, NULL, 0, buf, n, &rep);
    if (k >= 0) r->f.offset = rep.aux;
    release();
    return k;
}

ssize_t jobrt_io_write(struct rfd *r, const void *buf, size_t n) {
    struct jobrt_rep rep;
    if (n > JOBRT_MAX_XFER) n = JOBRT_MAX_XFER;
    hold();   /* until the offset is recorded */
    int64_t k;
    if (jobrt_io_pipeline && n <= sizeof obuf / 2) {
        /* Pipelined: assume success; an error is kept by the server and returned by close/fsync. */
        k = jobrt_io_send_noreply(OP_WRITE, r->h, 0, 0, buf, n) < 0 ? -1 : (int64_t)n;
        if (k >= 0) {
            r->deferred = 1;
            r->f.offset += n;
        }
    } else {
        k = jobrt_io_call(OP_WRITE, r->h, 0, 0, NULL, buf, n, NULL, 0, &rep);
        if (k >= 0) r->f.offset = rep.aux;
    }
    release();
    return k;
}

off_t jobrt_io_lseek(struct rfd *r, off_t off, int whence) {
    struct jobrt_rep rep;
    hold();   /* until the offset is recorded */
    int64_t k = jobrt_io_call(OP_LSEEK, r->h, off, whence, NULL, NULL, 0, NULL, 0, &rep);
    if (k >= 0) r->f.offset = k;
    release();
    return k;
}

int jobrt_io_close(int fd) {
    struct rfd *r = jobrt_io_rfd(fd);
    hold();   /* until the placeholder is closed too: an image taken in between would find an
               * open placeholder the table no longer lists, and be refused */
    jobrt_io_fds[fd] = NULL;
    int rc = 0;
    if (r->deferred || !jobrt_io_pipeline)   /* a deferred write error surfaces here */
        rc = (int)jobrt_io_call(OP_CLOSE, r->h, 0, 0, NULL, NULL, 0, NULL, 0, NULL);
    else
        rc = jobrt_io_send_noreply(OP_CLOSE, r->h, 0, 0, NULL, 0);
    int e = errno;
    free(r);
    REAL(close)(fd);
    release();
    errno = e;
    return rc < 0 ? -1 : 0;
}

static void from_wire(const struct jobrt_wstat *w, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_dev = w->dev; st->st_ino = w->ino; st->st_nlink = w->nlink;
    st->st_mode = w->mode; st->st_uid = w->uid; st->st_gid = w->gid; st->st_rdev = w->rdev;
    st->st_size = w->size; st->st_blksize = w->blksize; st->st_blocks = w->blocks;
    st->st_atim.tv_sec = w->atime; st->st_atim.tv_nsec = w->atime_ns;
    st->st_mtim.tv_sec = w->mtime; st->st_mtim.tv_nsec = w->mtime_ns;
    st->st_ctim.tv_sec = w->ctime; st->st_ctim.tv_nsec = w->ctime_ns;
}

int jobrt_io_stat_path(int op, const char *rpath, struct stat *st) {
    struct jobrt_wstat w;
    struct jobrt_rep rep;
    if (jobrt_io_call(op, -1, 0, 0, rpath, NULL, 0, &w, sizeof w, &rep) < 0) return -1;
    from_wire(&w, st);
    return 0;
}

int jobrt_io_fstat(struct rfd *r, struct stat *st) {
    struct jobrt_wstat w;
    struct jobrt_rep rep;
    if (jobrt_io_call(OP_FSTAT, r->h, 0, 0, NULL, NULL, 0, &w, sizeof w, &rep) < 0) return -1;
    from_wire(&w, st);
    return 0;
}

/* Duplicate remote fd `old` onto a placeholder: onto `target` if >= 0 (dup2), else the lowest
 * free fd >= minfd. */
static int dup_held(struct rfd *r, int target, int minfd, int cloexec);

int jobrt_io_dup(struct rfd *r, int target, int minfd, int cloexec) {
    hold();   /* until the new placeholder is in the table (as for an open) */
    int fd = dup_held(r, target, minfd, cloexec);
    int e = errno;
    release();
    errno = e;
    return fd;
}

static int dup_held(struct rfd *r, int target, int minfd, int cloexec) {
    int64_t h = jobrt_io_call(OP_DUP, r->h, 0, 0, NULL, NULL, 0, NULL, 0, NULL);
    if (h < 0) return -1;
    int fd = placeholder(cloexec);
    if (fd >= 0 && target >= 0 && fd != target) {
        int moved = REAL(dup3)(fd, target, cloexec ? O_CLOEXEC : 0);
        REAL(close)(fd);
        fd = moved;
    } else if (fd >= 0 && fd < minfd) {
        int moved = REAL(fcntl)(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, minfd);
        REAL(close)(fd);
        fd = moved;
    }
    if (fd < 0 || fd >= JOBRT_MAX_FDS) {
        int e = fd < 0 ? errno : EMFILE;
        jobrt_io_call(OP_CLOSE, h, 0, 0, NULL, NULL, 0, NULL, 0, NULL);
        errno = e;
        return -1;
    }
    return install(fd, h, r->f.flags, r->f.offset, r->f.path);
}

/* ---- what the checkpoint code uses ---- */

int jobrt_io_remote_files(struct jobrt_rfile *out, int max) {
    int n = 0;
    for (int fd = 0; fd < JOBRT_MAX_FDS; fd++) {
        struct rfd *r = jobrt_io_fds[fd];
        if (!r) continue;
        if (n < max && out) out[n] = r->f;
        n++;
    }
    return n;
}

int jobrt_io_quiesce(void) {
    if (sock < 0) return 0;
    int rc = 0;
    for (int fd = 0; fd < JOBRT_MAX_FDS; fd++) {
        struct rfd *r = jobrt_io_fds[fd];
        if (!r || (r->f.flags & O_ACCMODE) == O_RDONLY) continue;
        struct stat st;   /* a replied call: the queue goes first, and the server runs in order */
        if (jobrt_io_fstat(r, &st) < 0) { rc = -1; continue; }
        r->ckpt_size = st.st_size;
        r->deferred = 0;
        if (r->f.flags & O_APPEND) r->f.offset = st.st_size;
    }
    if (olen && jobrt_io_flush() < 0) rc = -1;   /* (only if there were no writable files) */
    return rc;
}

int jobrt_io_reconnect(void) {
    const char *fd = getenv("JOBRT_IO_FD");
    if (!fd || !prefix_len) { errno = EINVAL; return -1; }   /* the shim was never configured */
    sock = atoi(fd);
    if (fcntl(sock, F_GETFD) < 0) { sock = -1; errno = EBADF; return -1; }
    olen = 0;
    jobrt_io_on = 1;
    int failed = 0, err = 0;
    for (int i = 0; i < JOBRT_MAX_FDS; i++) {
        struct rfd *r = jobrt_io_fds[i];
        if (!r) continue;
        struct jobrt_rep rep;
        int64_t h = jobrt_io_call(OP_OPEN, -1, r->f.flags, 0, r->f.path, NULL, 0, NULL, 0, &rep);
        if (h >= 0 && r->ckpt_size >= 0 && (r->f.flags & O_ACCMODE) != O_RDONLY)   /* roll back */
            h = jobrt_io_call(OP_FTRUNCATE, h, r->ckpt_size, 0, NULL, NULL, 0, NULL, 0, NULL) < 0 ? -1 : h;
        if (h >= 0 && !(r->f.flags & O_APPEND))
            h = jobrt_io_call(OP_LSEEK, h, r->f.offset, SEEK_SET, NULL, NULL, 0, NULL, 0, &rep) < 0 ? -1 : h;
        if (h < 0) { failed = 1; err = errno; continue; }
        r->h = h;
        r->deferred = 0;
        if (fcntl(i, F_GETFD) < 0) {   /* the restarter did not recreate the placeholder */
            int ph = placeholder(0);
            if (ph >= 0 && ph != i) { REAL(dup2)(ph, i); REAL(close)(ph); }
        }
    }
    if (failed) { errno = err; return -1; }
    return 0;
}
