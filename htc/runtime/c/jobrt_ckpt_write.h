/* jobrt_ckpt_write.h - lay out and write an image (header, tables, region data) with its
 * checksum, to a temporary name renamed into place at the end.  Shared by the in-process handler
 * (memfd < 0: contents are read from this process's own memory) and the ptrace dumper (memfd is
 * /proc/PID/mem).  Every chunk is copied into a scratch buffer, checksummed and written from
 * there, so what is checksummed is exactly what is written even while memory changes.
 */
#ifndef JOBRT_CKPT_WRITE_H
#define JOBRT_CKPT_WRITE_H

#include "jobrt_ckpt_proc.h"

#define JR_SCRATCH (1UL << 20)

static inline long jr_write_all(long fd, const void *buf, uint64_t len)
{
    const char *p = (const char *)buf;
    while (len) {
        long w = jr_sys3(__NR_write, fd, p, len > (1UL << 30) ? (1UL << 30) : len);
        if (w == -4 /* EINTR */)
            continue;
        if (w <= 0)
            return w < 0 ? w : -5;
        p += w;
        len -= (uint64_t)w;
    }
    return 0;
}

static inline void jr_copy(void *dst, const void *src, uint64_t n)
{
    __builtin_memcpy(dst, src, n);
}

/* Fill in the header's layout fields from the tables' sizes. */
static inline void jr_layout(struct jr_header *h, struct jr_region *reg, int nreg)
{
    h->state_off = JR_HEADER_SIZE;
    h->sig_off = h->state_off + sizeof(struct jr_state);
    h->files_off = h->sig_off + JR_NSIG * sizeof(struct jr_ksigaction);
    h->rfiles_off = h->files_off + h->nfiles * sizeof(struct jr_file);
    h->regions_off = h->rfiles_off + h->nrfiles * sizeof(struct jr_rfile);
    uint64_t end = h->regions_off + (uint64_t)nreg * sizeof(struct jr_region);
    h->data_off = (end + JR_PAGE - 1) & ~(JR_PAGE - 1);
    uint64_t off = h->data_off;
    for (int i = 0; i < nreg; i++)
        if (reg[i].flags & JR_R_DATA) {
            reg[i].data_off = off;
            off += reg[i].end - reg[i].start;
        }
    h->data_bytes = off - h->data_off;
    h->total_size = off;
    h->nregions = (uint32_t)nreg;
    h->nsig = JR_NSIG;
    h->version = JR_VERSION;
    h->header_size = JR_HEADER_SIZE;
    jr_copy(h->magic, JR_MAGIC, 8);
    jr_copy(h->arch, "x86_64", 7);
}

struct jr_out {
    long fd;
    uint32_t crc;
    uint64_t written;
    char *scratch;
};

static inline long jr_emit(struct jr_out *o, const void *p, uint64_t n)
{
    o->crc = jr_crc(o->crc, p, n);
    o->written += n;
    return jr_write_all(o->fd, p, n);
}

/* Write the whole image to tmp, fsync it if asked, rename it to path.  Returns 0 or -errno;
 * on failure the temporary file is removed. */
static inline long jr_write_image(const char *path, const char *tmp, struct jr_header *h,
                                  const struct jr_state *st, const struct jr_ksigaction *sigs,
                                  const struct jr_file *files, const struct jr_rfile *rfiles,
                                  const struct jr_region *reg, long memfd, int do_fsync)
{
    struct jr_out o = {0, 0, 0, 0};
    o.scratch = (char *)jr_sys6(__NR_mmap, 0, JR_SCRATCH, JR_PROT_READ | JR_PROT_WRITE,
                                JR_MAP_PRIVATE | JR_MAP_ANONYMOUS, -1, 0);
    if ((long)o.scratch < 0 && (long)o.scratch > -4096)
        return (long)o.scratch;
    o.fd = jr_sys4(__NR_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    long rc = o.fd;
    if (o.fd < 0)
        goto out;
    h->checksum = 0;
    static const char zeros[JR_PAGE];
    char *hb = o.scratch;
    __builtin_memset(hb, 0, JR_HEADER_SIZE);
    jr_copy(hb, h, sizeof *h);
    o.crc = jr_crc(0, hb, JR_HEADER_SIZE);
    rc = jr_write_all(o.fd, hb, JR_HEADER_SIZE);
    o.written = JR_HEADER_SIZE;
    if (!rc)
        rc = jr_emit(&o, st, sizeof *st);
    if (!rc)
        rc = jr_emit(&o, sigs, JR_NSIG * sizeof *sigs);
    if (!rc)
        rc = jr_emit(&o, files, h->nfiles * sizeof *files);
    if (!rc)
        rc = jr_emit(&o, rfiles, h->nrfiles * sizeof *rfiles);
    if (!rc)
        rc = jr_emit(&o, reg, h->nregions * sizeof *reg);
    if (!rc && h->data_off > o.written)
        rc = jr_emit(&o, zeros, h->data_off - o.written);
    for (uint32_t i = 0; !rc && i < h->nregions; i++) {
        if (!(reg[i].flags & JR_R_DATA))
            continue;
        int unreadable = memfd < 0 && !(reg[i].prot & 1);
        if (unreadable)
            jr_sys3(__NR_mprotect, reg[i].start, reg[i].end - reg[i].start, reg[i].prot | 1);
        for (uint64_t a = reg[i].start; !rc && a < reg[i].end; a += JR_SCRATCH) {
            uint64_t n = reg[i].end - a < JR_SCRATCH ? reg[i].end - a : JR_SCRATCH;
            if (memfd < 0)
                jr_copy(o.scratch, (const void *)a, n);
            else {
                long r = jr_sys4(__NR_pread64, memfd, o.scratch, n, a);
                if (r != (long)n)
                    rc = r < 0 ? r : -5;
            }
            if (!rc)
                rc = jr_emit(&o, o.scratch, n);
        }
        if (unreadable)
            jr_sys3(__NR_mprotect, reg[i].start, reg[i].end - reg[i].start, reg[i].prot);
    }
    if (!rc) {
        h->checksum = o.crc;
        /* the checksum field sits inside the first page: rewrite the header */
        jr_copy(hb, h, sizeof *h);
        long w = jr_sys4(__NR_pwrite64, o.fd, hb, JR_HEADER_SIZE, 0);
        rc = w == JR_HEADER_SIZE ? 0 : (w < 0 ? w : -5);
    }
    if (!rc && do_fsync)
        rc = jr_sys1(__NR_fsync, o.fd);
    jr_sys1(__NR_close, o.fd);
    if (!rc)
        rc = jr_sys4(__NR_renameat, AT_FDCWD, tmp, AT_FDCWD, path);
    if (rc)
        jr_sys3(__NR_unlinkat, AT_FDCWD, tmp, 0);
out:
    jr_sys2(__NR_munmap, o.scratch, JR_SCRATCH);
    return rc;
}

#endif
