/* jobrt_ckpt_proc.h - what a checkpoint learns from /proc/PID, shared by the in-process
 * handler (procdir "/proc/self") and the ptrace dumper ("/proc/<pid>").  Raw system calls
 * and caller-provided buffers only, so the handler stays async-signal-safe.
 *
 * Each collector returns a count, or -1 after writing a one-line reason into err: that is how
 * a program the runtime cannot handle (threads, sockets, pipes, shared memory, children,
 * deleted files) is refused.
 */
#ifndef JOBRT_CKPT_PROC_H
#define JOBRT_CKPT_PROC_H

#include "jobrt_ckpt_fmt.h"
#include <asm/unistd.h>
#include <linux/fcntl.h>

struct jr_linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* the kernel's struct stat on x86-64 */
struct jr_kstat {
    uint64_t st_dev, st_ino, st_nlink;
    uint32_t st_mode, st_uid, st_gid, pad0;
    uint64_t st_rdev;
    int64_t st_size, st_blksize, st_blocks;
    uint64_t st_atime, st_atime_nsec, st_mtime, st_mtime_nsec, st_ctime, st_ctime_nsec;
    int64_t unused[3];
};

/* append up to four strings to dst (capacity cap) */
static inline void jr_cat(char *dst, size_t cap, const char *a, const char *b, const char *c,
                          const char *d)
{
    const char *parts[4] = {a, b, c, d};
    size_t n = jr_strlen(dst);
    for (int i = 0; i < 4; i++)
        for (const char *s = parts[i]; s && *s && n + 1 < cap; s++)
            dst[n++] = *s;
    dst[n] = 0;
}

static inline long jr_read_file(const char *path, char *buf, long cap)
{
    long fd = jr_sys4(__NR_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fd;
    long n = 0;
    while (n < cap - 1) {
        long r = jr_sys3(__NR_read, fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += r;
    }
    jr_sys1(__NR_close, fd);
    buf[n] = 0;
    return n;
}

static inline void jr_path2(char *out, const char *procdir, const char *leaf)
{
    out[0] = 0;
    jr_cat(out, 256, procdir, "/", leaf, 0);
}

/* number of threads of the process */
static inline int jr_count_threads(const char *procdir, char *buf, long cap)
{
    char path[256];
    jr_path2(path, procdir, "status");
    if (jr_read_file(path, buf, cap) <= 0)
        return -1;
    for (char *p = buf; *p; p++)
        if ((p == buf || p[-1] == '\n') && jr_startswith(p, "Threads:")) {
            p += 8;
            while (*p == ' ' || *p == '\t')
                p++;
            int n = 0;
            while (*p >= '0' && *p <= '9')
                n = n * 10 + (*p++ - '0');
            return n;
        }
    return -1;
}

/* 1 if the process has live children (fork without exec-and-wait is not restorable) */
static inline int jr_has_children(const char *procdir, long pid, char *buf, long cap)
{
    char path[256], num[24];
    jr_utoa(num, (uint64_t)pid);
    path[0] = 0;
    jr_cat(path, sizeof path, procdir, "/task/", num, "/children");
    if (jr_read_file(path, buf, cap) <= 0)
        return 0;
    return buf[0] >= '0' && buf[0] <= '9';
}

/* Parse PROCDIR/maps into regions.  Skips [vsyscall] and the restarter span. */
static inline int jr_collect_maps(const char *procdir, char *buf, long cap, struct jr_region *out,
                                  int max, char *err, size_t errcap)
{
    char path[256];
    jr_path2(path, procdir, "maps");
    long len = jr_read_file(path, buf, cap);
    if (len <= 0) {
        jr_cat(err, errcap, "cannot read ", path, 0, 0);
        return -1;
    }
    if (len >= cap - 1) {
        jr_cat(err, errcap, "too many memory mappings to record (", path, " is too long)", 0);
        return -1;
    }
    int n = 0;
    for (const char *p = buf; *p;) {
        const char *line = p;
        while (*p && *p != '\n')
            p++;
        const char *eol = p;
        if (*p)
            p++;
        const char *q = line;
        uint64_t start = jr_hex(&q);
        q++;
        uint64_t end = jr_hex(&q);
        q++;
        char perms[4] = {q[0], q[1], q[2], q[3]};
        /* skip offset, dev, inode to the name */
        for (int field = 0; field < 4 && q < eol; field++) {
            while (q < eol && *q != ' ')
                q++;
            while (q < eol && *q == ' ')
                q++;
        }
        char name[256];
        size_t nl = 0;
        while (q + nl < eol && nl < sizeof name - 1) {
            name[nl] = q[nl];
            nl++;
        }
        name[nl] = 0;
        if (jr_streq(name, "[vsyscall]"))
            continue;
        if (start >= JR_RESTARTER_BASE && end <= JR_RESTARTER_BASE + JR_RESTARTER_SPAN)
            continue;
        /* a read-only shared file mapping (glibc's gconv cache, locale files) comes back as a
         * private copy with the same contents; writable shared memory cannot be restored */
        if (perms[3] == 's' && perms[1] == 'w') {
            jr_cat(err, errcap, "the program uses writable shared memory (", nl ? name : "anonymous",
                   "); shared mappings cannot be checkpointed", 0);
            return -1;
        }
        if (n >= max) {
            jr_cat(err, errcap, "too many memory mappings to record", 0, 0, 0);
            return -1;
        }
        struct jr_region *r = &out[n++];
        r->start = start;
        r->end = end;
        r->prot = (perms[0] == 'r' ? 1 : 0) | (perms[1] == 'w' ? 2 : 0) | (perms[2] == 'x' ? 4 : 0);
        r->flags = 0;
        r->data_off = 0;
        jr_strlcpy(r->name, name, sizeof r->name);
        if (jr_streq(name, "[vvar]"))
            r->flags = JR_R_VVAR;
        else if (jr_streq(name, "[vvar_vclock]"))
            r->flags = JR_R_VCLOCK;
        else if (jr_streq(name, "[vdso]"))
            r->flags = JR_R_VDSO;
        else {
            if (jr_streq(name, "[stack]"))
                r->flags |= JR_R_STACK;
            if (r->prot)
                r->flags |= JR_R_DATA;
        }
    }
    return n;
}

/* value of "key:\t<octal or decimal>" in an fdinfo text */
static inline int64_t jr_fdinfo_field(const char *text, const char *key, int base)
{
    for (const char *p = text; *p; p++)
        if ((p == text || p[-1] == '\n') && jr_startswith(p, key)) {
            p += jr_strlen(key);
            while (*p == ' ' || *p == '\t')
                p++;
            int64_t v = 0;
            while (*p >= '0' && *p <= '9')
                v = v * base + (*p++ - '0');
            return v;
        }
    return -1;
}

static inline int jr_fd_in(int fd, const int *list, int nlist)
{
    for (int i = 0; i < nlist; i++)
        if (list[i] == fd)
            return 1;
    return 0;
}

/* The file table from PROCDIR/fd and PROCDIR/fdinfo.  fds in skip[] (the remote-I/O shim's own
 * descriptors, the handler's scratch fd) are left out.  fds 0-2 may be anything: the restarter
 * inherits them; the others must be regular files, directories or character devices. */
static inline int jr_collect_files(const char *procdir, char *buf, long cap, struct jr_file *out,
                                   int max, const int *skip, int nskip, char *err, size_t errcap)
{
    char path[256], num[24];
    jr_path2(path, procdir, "fd");
    long dfd = jr_sys4(__NR_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dfd < 0) {
        jr_cat(err, errcap, "cannot list ", path, 0, 0);
        return -1;
    }
    int n = 0;
    char dents[2048];
    for (;;) {
        long got = jr_sys3(__NR_getdents64, dfd, dents, sizeof dents);
        if (got <= 0)
            break;
        for (long off = 0; off < got;) {
            struct jr_linux_dirent64 *d = (struct jr_linux_dirent64 *)(dents + off);
            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9')
                continue;
            int fd = 0;
            for (const char *c = d->d_name; *c; c++)
                fd = fd * 10 + (*c - '0');
            if (fd == dfd && procdir[6] == 's')
                continue; /* our own listing fd */
            if (jr_fd_in(fd, skip, nskip))
                continue;
            if (n >= max) {
                jr_cat(err, errcap, "too many open files to record", 0, 0, 0);
                jr_sys1(__NR_close, dfd);
                return -1;
            }
            struct jr_file *f = &out[n];
            char link[256];
            link[0] = 0;
            jr_cat(link, sizeof link, procdir, "/fd/", d->d_name, 0);
            long pl = jr_sys4(__NR_readlinkat, AT_FDCWD, link, f->path, JR_PATH - 1);
            f->path[pl > 0 ? pl : 0] = 0;
            struct jr_kstat st;
            if (jr_sys4(__NR_newfstatat, AT_FDCWD, link, &st, 0) < 0) {
                if (fd <= 2)
                    continue; /* a vanished std stream is inherited anyway */
                jr_cat(err, errcap, "descriptor ", d->d_name, " refers to ", f->path);
                jr_cat(err, errcap, ", which cannot be opened any more (deleted?)", 0, 0, 0);
                jr_sys1(__NR_close, dfd);
                return -1;
            }
            uint32_t type = st.st_mode & JR_S_IFMT;
            int ok = type == JR_S_IFREG || type == JR_S_IFDIR || type == JR_S_IFCHR;
            if (fd > 2 && !ok) {
                const char *what = type == JR_S_IFSOCK ? "a socket" : type == JR_S_IFIFO ? "a pipe"
                                                                                   : "a special file";
                jr_utoa(num, (uint64_t)fd);
                jr_cat(err, errcap, "descriptor ", num, " is ", what);
                jr_cat(err, errcap, " (", f->path, "); sockets, pipes and IPC cannot be checkpointed", 0);
                jr_sys1(__NR_close, dfd);
                return -1;
            }
            if (fd > 2 && type == JR_S_IFREG && jr_startswith(f->path, "/memfd:")) {
                jr_cat(err, errcap, "the program uses a memfd (", f->path, "); shared memory cannot be checkpointed", 0);
                jr_sys1(__NR_close, dfd);
                return -1;
            }
            if (fd > 2 && pl > 10 && jr_streq(f->path + pl - 10, " (deleted)")) {
                jr_cat(err, errcap, "open file ", f->path, " has been deleted and cannot be reopened", 0);
                jr_sys1(__NR_close, dfd);
                return -1;
            }
            char info[256];
            info[0] = 0;
            jr_cat(info, sizeof info, procdir, "/fdinfo/", d->d_name, 0);
            if (jr_read_file(info, buf, cap) <= 0)
                continue; /* closed meanwhile */
            int64_t flags = jr_fdinfo_field(buf, "flags:", 8);
            f->fd = fd;
            f->flags = (int32_t)(flags & ~(int64_t)O_CLOEXEC);
            f->fdflags = (flags & O_CLOEXEC) ? 1 : 0;
            f->offset = jr_fdinfo_field(buf, "pos:", 10);
            f->mode = st.st_mode;
            f->size = st.st_size;
            f->dev = st.st_dev;
            f->ino = st.st_ino;
            f->mtime_sec = (int64_t)st.st_mtime;
            f->mtime_nsec = (int64_t)st.st_mtime_nsec;
            n++;
        }
    }
    jr_sys1(__NR_close, dfd);
    return n;
}

/* /proc/PID/stat fields for PR_SET_MM_MAP; brk is filled in by the caller */
static inline int jr_collect_stat(const char *procdir, char *buf, long cap, struct jr_state *s)
{
    char path[256];
    jr_path2(path, procdir, "stat");
    if (jr_read_file(path, buf, cap) <= 0)
        return -1;
    const char *p = buf;
    for (const char *q = buf; *q; q++)
        if (*q == ')')
            p = q; /* comm may contain spaces and parens: fields start after the last ')' */
    uint64_t field[64];
    int k = 2; /* *p is the end of field 2 */
    for (; *p && k < 60;) {
        while (*p == ' ' || *p == ')')
            p++;
        k++;
        uint64_t v = 0;
        int neg = *p == '-';
        if (neg)
            p++;
        while (*p >= '0' && *p <= '9')
            v = v * 10 + (uint64_t)(*p++ - '0');
        field[k] = v;
        while (*p && *p != ' ')
            p++;
    }
    if (k < 51)
        return -1;
    s->start_code = field[26];
    s->end_code = field[27];
    s->start_stack = field[28];
    s->start_data = field[45];
    s->end_data = field[46];
    s->start_brk = field[47];
    s->arg_start = field[48];
    s->arg_end = field[49];
    s->env_start = field[50];
    s->env_end = field[51];
    return 0;
}

static inline void jr_collect_misc(const char *procdir, struct jr_state *s, char *exe, size_t execap)
{
    char path[256];
    jr_path2(path, procdir, "auxv");
    long n = jr_read_file(path, (char *)s->auxv, sizeof s->auxv);
    s->auxv_size = n > 0 ? (uint32_t)n : 0;
    jr_path2(path, procdir, "cwd");
    long pl = jr_sys4(__NR_readlinkat, AT_FDCWD, path, s->cwd, JR_PATH - 1);
    s->cwd[pl > 0 ? pl : 0] = 0;
    jr_path2(path, procdir, "exe");
    pl = jr_sys4(__NR_readlinkat, AT_FDCWD, path, exe, execap - 1);
    exe[pl > 0 ? pl : 0] = 0;
}

#endif
