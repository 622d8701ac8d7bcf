/* jobrt_io.h -- internals shared by the remote-I/O shim's files (jobrt_io*.c).
 *
 * The wire format is documented once, in htc/runtime/protocol.py; the structs below are its
 * C spelling (little-endian, naturally aligned, no padding on x86-64).
 */
#ifndef JOBRT_IO_H
#define JOBRT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "jobrt.h"

enum jobrt_op {
    OP_OPEN = 1, OP_CLOSE, OP_READ, OP_PREAD, OP_WRITE, OP_PWRITE, OP_LSEEK, OP_FSTAT,
    OP_STAT, OP_LSTAT, OP_ACCESS, OP_UNLINK, OP_RMDIR, OP_MKDIR, OP_RENAME, OP_LISTDIR,
    OP_TRUNCATE, OP_FTRUNCATE, OP_FSYNC, OP_DUP,
};

#define REQ_NOREPLY 1      /* no reply is sent; an error is kept and returned by the fd's close/fsync */

struct jobrt_req {         /* "<IHHqqqII": 40 bytes, then path (plen bytes), then data (dlen) */
    uint32_t magic;        /* JOBRT_MAGIC: catches a desynchronised stream */
    uint16_t op;
    uint16_t flags;
    int64_t h;             /* server handle, or -1 */
    int64_t a1, a2;        /* op arguments (flags/mode, offset/whence, length ...) */
    uint32_t plen, dlen;
};

struct jobrt_rep {         /* "<qqiI": 24 bytes, then data (dlen) */
    int64_t ret;           /* the call's result (-1 on error) */
    int64_t aux;           /* file offset after the call, for fd calls */
    int32_t err;           /* errno (Linux x86-64 numbering) */
    uint32_t dlen;
};

struct jobrt_wstat {       /* "<QQQIIIIQqqqqqqqqq": 120 bytes */
    uint64_t dev, ino, nlink;
    uint32_t mode, uid, gid, pad;
    uint64_t rdev;
    int64_t size, blksize, blocks;
    int64_t atime, atime_ns, mtime, mtime_ns, ctime, ctime_ns;
};

#define JOBRT_MAGIC 0x4a525431u  /* "1TRJ" */
#define JOBRT_MAX_FDS 4096
#define JOBRT_MAX_XFER (16 << 20)

/* One remote fd. */
struct rfd {
    struct jobrt_rfile f;  /* fd, flags, offset, path (what a checkpoint records) */
    int64_t h;             /* the server's handle */
    int deferred;          /* writes were sent without waiting for their result */
    long long ckpt_size;   /* size at the last jobrt_io_quiesce (-1: none), restored on reconnect */
};

extern int jobrt_io_on;            /* forwarding configured and the connection usable */
extern int jobrt_io_pipeline;      /* send small writes without waiting for the reply */
extern struct rfd *jobrt_io_fds[JOBRT_MAX_FDS];

/* Resolve (dirfd, path) to a server path: 1 if remote (out filled), 0 if local, -1 if too long. */
int jobrt_io_map(int dirfd, const char *path, char *out, size_t cap);
static inline struct rfd *jobrt_io_rfd(int fd) {
    return (fd >= 0 && fd < JOBRT_MAX_FDS) ? jobrt_io_fds[fd] : NULL;
}

/* One request/reply. path may be NULL; rbuf receives up to rcap bytes of reply data.
 * Returns rep.ret, or -1 with errno set (to the remote errno, or EIO if the link broke). */
int64_t jobrt_io_call(int op, int64_t h, int64_t a1, int64_t a2, const char *path,
                      const void *data, size_t dlen, void *rbuf, size_t rcap,
                      struct jobrt_rep *rep);
/* Queue a request that needs no reply (sent with the next call, or when the buffer fills). */
int jobrt_io_send_noreply(int op, int64_t h, int64_t a1, int64_t a2, const void *data, size_t dlen);
int jobrt_io_flush(void);

/* Core operations, called by the wrappers and by the stdio streams. */
int jobrt_io_open(const char *rpath, int flags, mode_t mode);
ssize_t jobrt_io_read(struct rfd *r, void *buf, size_t n);
ssize_t jobrt_io_write(struct rfd *r, const void *buf, size_t n);
off_t jobrt_io_lseek(struct rfd *r, off_t off, int whence);
int jobrt_io_close(int fd);
int jobrt_io_stat_path(int op, const char *rpath, struct stat *st);
int jobrt_io_fstat(struct rfd *r, struct stat *st);

/* The real libc function behind an interposed name. */
void *jobrt_io_real(const char *name);
#define REAL(fn) ({ static __typeof__(fn) *p_; if (!p_) p_ = (__typeof__(fn) *)jobrt_io_real(#fn); p_; })

#endif
