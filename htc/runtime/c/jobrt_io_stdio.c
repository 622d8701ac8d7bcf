/* jobrt_io_stdio.c -- stdio streams, directory streams and the working directory, for remote
 * paths.
 *
 * glibc's fopen/opendir call its hidden internal open/getdents, which no preload can reach, so
 * these are wrapped whole:
 *  - fopen/fopen64/fdopen/freopen on a remote path or fd return a fopencookie() stream whose
 *    cookie is the remote fd; its _fileno is set to that placeholder fd, because programs
 *    (CPython among them) call fileno()/fstat() on their FILEs.
 *  - opendir/fdopendir on a remote directory fetch the whole listing in one call and return a
 *    shim-owned DIR (registered in dirs[], so readdir/closedir tell it from a real DIR).
 *  - chdir into a remote directory sets a virtual cwd (it does not exist locally); relative paths
 *    are then remote, and getcwd reports the job-side spelling of it.
 *  - exec* flushes queued (pipelined) writes first: exec discards the process's memory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "jobrt_io.h"

extern char jobrt_io_vcwd[JOBRT_PATH_MAX];
int jobrt_io_jobpath(const char *rpath, char *out, size_t cap);

/* ---- stdio ---- */

static ssize_t ck_read(void *c, char *buf, size_t n) {
    struct rfd *r = jobrt_io_rfd((int)(intptr_t)c);
    if (!r) { errno = EBADF; return -1; }
    return jobrt_io_read(r, buf, n);
}
static ssize_t ck_write(void *c, const char *buf, size_t n) {
    struct rfd *r = jobrt_io_rfd((int)(intptr_t)c);
    if (!r) { errno = EBADF; return 0; }
    ssize_t k = jobrt_io_write(r, buf, n);
    return k < 0 ? 0 : k;   /* a cookie write reports an error as 0 bytes */
}
static int ck_seek(void *c, off64_t *pos, int whence) {
    struct rfd *r = jobrt_io_rfd((int)(intptr_t)c);
    if (!r) { errno = EBADF; return -1; }
    off_t k = jobrt_io_lseek(r, *pos, whence);
    if (k < 0) return -1;
    *pos = k;
    return 0;
}
static int ck_close(void *c) {
    int fd = (int)(intptr_t)c;
    return jobrt_io_rfd(fd) ? jobrt_io_close(fd) : 0;
}

static int mode_flags(const char *mode) {
    int f;
    switch (mode[0]) {
    case 'r': f = 0; break;
    case 'w': f = O_CREAT | O_TRUNC; break;
    case 'a': f = O_CREAT | O_APPEND; break;
    default: return -1;
    }
    int plus = strchr(mode, '+') != NULL;
    f |= plus ? O_RDWR : (mode[0] == 'r' ? O_RDONLY : O_WRONLY);
    if (strchr(mode, 'x')) f |= O_EXCL;
    if (strchr(mode, 'e')) f |= O_CLOEXEC;
    return f;
}

static FILE *cookie_stream(int fd, const char *mode) {
    cookie_io_functions_t fns = {ck_read, ck_write, ck_seek, ck_close};
    char m[8];
    size_t k = 0;   /* fopencookie understands r/w/a/+ only */
    for (const char *p = mode; *p && k < sizeof m - 1; p++)
        if (strchr("rwa+", *p)) m[k++] = *p;
    m[k] = 0;
    FILE *fp = fopencookie((void *)(intptr_t)fd, m, fns);
    if (fp) fp->_fileno = fd;
    return fp;
}

static FILE *fopen_common(const char *path, const char *mode, FILE *(*real)(const char *, const char *)) {
    char rp[JOBRT_PATH_MAX];
    int m = jobrt_io_map(AT_FDCWD, path, rp, sizeof rp);
    if (m < 0) { errno = ENAMETOOLONG; return NULL; }
    if (!m) return real(path, mode);
    int flags = mode_flags(mode);
    if (flags < 0) { errno = EINVAL; return NULL; }
    int fd = jobrt_io_open(rp, flags, 0666);
    if (fd < 0) return NULL;
    FILE *fp = cookie_stream(fd, mode);
    if (!fp) { int e = errno; jobrt_io_close(fd); errno = e; }
    return fp;
}
FILE *fopen(const char *path, const char *mode) { return fopen_common(path, mode, REAL(fopen)); }
FILE *fopen64(const char *path, const char *mode) { return fopen_common(path, mode, REAL(fopen64)); }

FILE *fdopen(int fd, const char *mode) {
    return jobrt_io_rfd(fd) ? cookie_stream(fd, mode) : REAL(fdopen)(fd, mode);
}

FILE *freopen(const char *path, const char *mode, FILE *fp) {
    char rp[JOBRT_PATH_MAX];
    if (!path || jobrt_io_map(AT_FDCWD, path, rp, sizeof rp) == 0) return REAL(freopen)(path, mode, fp);
    errno = ENOTSUP;   /* a remote freopen would have to swap the FILE's guts: not supported */
    return NULL;
}

/* ---- directory streams ---- */

struct rdir {
    char *buf;              /* listing: records "<QBH" ino, d_type, name length, then the name */
    size_t len, off;
    struct dirent64 ent;
};

#define MAX_DIRS 256
static struct rdir *dirs[MAX_DIRS];

static struct rdir *as_rdir(void *d) {
    for (int i = 0; i < MAX_DIRS; i++)
        if (dirs[i] && (void *)dirs[i] == d) return dirs[i];
    return NULL;
}

static DIR *open_listing(const char *rp) {
    size_t cap = 1 << 16;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf) return NULL;
        struct jobrt_rep rep;
        if (jobrt_io_call(OP_LISTDIR, -1, 0, 0, rp, NULL, 0, buf, cap, &rep) < 0) { free(buf); return NULL; }
        if (rep.dlen > cap) { free(buf); cap = rep.dlen; continue; }   /* retry with room */
        struct rdir *d = calloc(1, sizeof *d);
        int slot = -1;
        for (int i = 0; i < MAX_DIRS && slot < 0; i++) if (!dirs[i]) slot = i;
        if (!d || slot < 0) { free(buf); free(d); errno = EMFILE; return NULL; }
        d->buf = buf;
        d->len = rep.dlen;
        dirs[slot] = d;
        return (DIR *)d;
    }
}

DIR *opendir(const char *path) {
    char rp[JOBRT_PATH_MAX];
    int m = jobrt_io_map(AT_FDCWD, path, rp, sizeof rp);
    if (m < 0) { errno = ENAMETOOLONG; return NULL; }
    return m ? open_listing(rp) : REAL(opendir)(path);
}

DIR *fdopendir(int fd) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (!r) return REAL(fdopendir)(fd);
    DIR *d = open_listing(r->f.path);
    if (d) jobrt_io_close(fd);   /* fdopendir takes ownership of the fd */
    return d;
}

struct dirent64 *readdir64(DIR *dp) {
    struct rdir *d = as_rdir(dp);
    if (!d) return REAL(readdir64)(dp);
    if (d->off + 11 > d->len) return NULL;
    const unsigned char *p = (const unsigned char *)d->buf + d->off;
    uint64_t ino;
    uint16_t nlen;
    memcpy(&ino, p, 8);
    memcpy(&nlen, p + 9, 2);
    if (nlen >= sizeof d->ent.d_name || d->off + 11 + nlen > d->len) return NULL;
    d->ent.d_ino = ino;
    d->ent.d_type = p[8];
    d->ent.d_off = (off64_t)(d->off + 11 + nlen);
    d->ent.d_reclen = sizeof d->ent;
    memcpy(d->ent.d_name, p + 11, nlen);
    d->ent.d_name[nlen] = 0;
    d->off += 11 + nlen;
    return &d->ent;
}
struct dirent *readdir(DIR *dp) {
    /* struct dirent and struct dirent64 have one layout on 64-bit Linux */
    return as_rdir(dp) ? (struct dirent *)readdir64(dp) : REAL(readdir)(dp);
}
int closedir(DIR *dp) {
    struct rdir *d = as_rdir(dp);
    if (!d) return REAL(closedir)(dp);
    for (int i = 0; i < MAX_DIRS; i++) if (dirs[i] == d) dirs[i] = NULL;
    free(d->buf);
    free(d);
    return 0;
}
void rewinddir(DIR *dp) {
    struct rdir *d = as_rdir(dp);
    if (d) d->off = 0; else REAL(rewinddir)(dp);
}
int dirfd(DIR *dp) {
    if (!as_rdir(dp)) return REAL(dirfd)(dp);
    errno = ENOTSUP;   /* a remote listing holds no fd */
    return -1;
}

/* ---- working directory ---- */

static void normalise(char *p) {
    /* lexical cleanup of a relative server path: drop "." parts, fold "x/.." (keep leading ".."s;
     * the server refuses them) */
    char out[JOBRT_PATH_MAX] = "";
    size_t n = 0;
    for (char *s = strtok(p, "/"); s; s = strtok(NULL, "/")) {
        if (!strcmp(s, ".")) continue;
        char *last = n ? strrchr(out, '/') : NULL;
        const char *lastpart = last ? last + 1 : out;
        if (!strcmp(s, "..") && n && strcmp(lastpart, "..")) {
            n = last ? (size_t)(last - out) : 0;
            out[n] = 0;
            continue;
        }
        n += (size_t)snprintf(out + n, sizeof out - n, n ? "/%s" : "%s", s);
    }
    strcpy(p, n ? out : ".");
}

int chdir(const char *path) {
    char rp[JOBRT_PATH_MAX];
    int m = jobrt_io_map(AT_FDCWD, path, rp, sizeof rp);
    if (m < 0) { errno = ENAMETOOLONG; return -1; }
    if (!m) {
        int rc = REAL(chdir)(path);
        if (rc == 0) jobrt_io_vcwd[0] = 0;
        return rc;
    }
    struct stat st;
    if (jobrt_io_stat_path(OP_STAT, rp, &st) < 0) return -1;
    if (!S_ISDIR(st.st_mode)) { errno = ENOTDIR; return -1; }
    normalise(rp);
    strcpy(jobrt_io_vcwd, rp);
    return 0;
}

int fchdir(int fd) {
    struct rfd *r = jobrt_io_rfd(fd);
    if (!r) {
        int rc = REAL(fchdir)(fd);
        if (rc == 0) jobrt_io_vcwd[0] = 0;
        return rc;
    }
    char rp[JOBRT_PATH_MAX];
    strcpy(rp, r->f.path);
    normalise(rp);
    strcpy(jobrt_io_vcwd, rp);
    return 0;
}

char *getcwd(char *buf, size_t size) {
    if (!jobrt_io_on || !jobrt_io_vcwd[0]) return REAL(getcwd)(buf, size);
    char path[JOBRT_PATH_MAX];
    if (jobrt_io_jobpath(jobrt_io_vcwd, path, sizeof path) < 0) { errno = ENAMETOOLONG; return NULL; }
    size_t need = strlen(path) + 1;
    if (!buf) {
        buf = malloc(size > need ? size : need);
        if (!buf) return NULL;
    } else if (size < need) {
        errno = ERANGE;
        return NULL;
    }
    return strcpy(buf, path);
}

/* ---- exec ---- */

int execve(const char *path, char *const argv[], char *const envp[]) {
    if (jobrt_io_on) jobrt_io_flush();
    return REAL(execve)(path, argv, envp);
}
int execv(const char *path, char *const argv[]) {
    if (jobrt_io_on) jobrt_io_flush();
    return REAL(execv)(path, argv);
}
int execvp(const char *file, char *const argv[]) {
    if (jobrt_io_on) jobrt_io_flush();
    return REAL(execvp)(file, argv);
}
int execvpe(const char *file, char *const argv[], char *const envp[]) {
    if (jobrt_io_on) jobrt_io_flush();
    return REAL(execvpe)(file, argv, envp);
}
