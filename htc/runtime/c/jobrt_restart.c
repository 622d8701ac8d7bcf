/* jobrt_restart.c - jobrt-restart: rebuild a process from a checkpoint image, in this process.
 *
 * Theory of operation
 * -------------------
 * The restarter is static and freestanding, linked at JR_RESTARTER_BASE and running on a stack in
 * its own .bss, so it can tear down every other mapping of its process and put the checkpointed
 * process's mappings in their place.  It works in two phases:
 *
 * 1. Verify, changing nothing: the header (magic, version, size), the checksum over the whole
 *    image, the host (architecture, kernel release, XSAVE feature mask and size, vDSO/vvar sizes),
 *    and the files: every file the process had open must still be there; inputs (opened
 *    read-only) must be unchanged in size and mtime, outputs must be at least as long as at the
 *    checkpoint.  Any failure exits with a message and a JR_EXIT_* code; nothing was touched.
 *    `--check` stops here.
 * 2. Restore: reopen the files at their numbers and offsets, truncating outputs back to their
 *    checkpoint size (fds 0-2 are inherited; one that is the same regular file as at the
 *    checkpoint is rolled back too); chdir; block all signals; unmap everything but the
 *    restarter; move [vvar], [vvar_vclock] and [vdso] to their saved addresses (through a scratch
 *    spot so they cannot collide); map and fill every region; PR_SET_MM_MAP (brk, arg/env areas,
 *    auxv); sigactions; tid address, robust list, rseq, FS/GS base.  Finally it builds a kernel
 *    signal frame holding the saved registers, signal mask and XSAVE area.  For a handler image
 *    it calls the image's hook (libjobrt's jr_resumed) on that frame, which returns through
 *    rt_sigreturn; for a ptrace image it calls rt_sigreturn directly.  Either way every register
 *    comes back at once and the program continues where it was interrupted, in a new pid.
 *
 * Usage: jobrt-restart [--check] [--image-out PATH] IMAGE | jobrt-restart --host
 */
#include "jobrt_ckpt_proc.h"
#include <linux/prctl.h>

#define ARCH_SET_GS 0x1001
#define ARCH_SET_FS 0x1002
#define MREMAP_MAYMOVE 1
#define MREMAP_FIXED 2
#define MAX_FILES 256
#define MAX_RFILES 64
#define MAX_REGIONS 4096
#define BUF (1 << 20)

void *memcpy(void *d, const void *s, size_t n)
{
    char *a = d;
    const char *b = s;
    while (n--)
        *a++ = *b++;
    return d;
}

void *memset(void *d, int c, size_t n)
{
    char *a = d;
    while (n--)
        *a++ = (char)c;
    return d;
}

void *memmove(void *d, const void *s, size_t n)
{
    char *a = d;
    const char *b = s;
    if (a < b)
        return memcpy(d, s, n);
    while (n--)
        a[n] = b[n];
    return d;
}

int memcmp(const void *x, const void *y, size_t n)
{
    const unsigned char *a = x, *b = y;
    for (; n; n--, a++, b++)
        if (*a != *b)
            return *a - *b;
    return 0;
}

static char stack[256 * 1024] __attribute__((aligned(16), used));
static char framearea[128 * 1024] __attribute__((aligned(64)));
static char buf[BUF] __attribute__((aligned(64)));
static char text[64 * 1024];
static struct jr_header hdr;
static struct jr_state st;
static struct jr_ksigaction sigs[JR_NSIG];
static struct jr_file files[MAX_FILES];
static struct jr_region regions[MAX_REGIONS];
static struct jr_region mine[64];
static char image[JR_PATH], image_out[JR_PATH], msg[2048];
static long imgfd = -1;

__asm__(".globl _start\n"
        "_start:\n"
        "  mov %rsp, %rdi\n"
        "  lea stack+262144(%rip), %rsp\n"
        "  call rmain\n"
        "  hlt\n");

static void out(int fd, const char *s) { jr_sys3(__NR_write, fd, s, jr_strlen(s)); }

__attribute__((noreturn)) static void die(int code, const char *a, const char *b, const char *c,
                                          const char *d)
{
    msg[0] = 0;
    jr_cat(msg, sizeof msg, "jobrt-restart: ", image, ": ", a);
    jr_cat(msg, sizeof msg, b, c, d, "\n");
    out(2, msg);
    jr_sys1(__NR_exit_group, code);
    __builtin_unreachable();
}

static char *hex(char *o, uint64_t v)
{
    static const char digits[] = "0123456789abcdef";
    *o++ = '0', *o++ = 'x';
    int started = 0;
    for (int sh = 60; sh >= 0; sh -= 4) {
        int d = (int)((v >> sh) & 15);
        if (d || started || sh == 0)
            *o++ = digits[d], started = 1;
    }
    *o = 0;
    return o;
}

static void pread_all(void *dst, uint64_t len, uint64_t off)
{
    char *p = dst;
    while (len) {
        long r = jr_sys4(__NR_pread64, imgfd, p, len > (1UL << 30) ? (1UL << 30) : len, off);
        if (r <= 0)
            die(hdr.magic[0] ? JR_EXIT_IO : JR_EXIT_CORRUPT, "short read (truncated image?)", 0, 0, 0);
        p += r, off += (uint64_t)r, len -= (uint64_t)r;
    }
}

/* this host's special mappings */
static void host_specials(uint64_t *vvar, uint64_t *vclock, uint64_t *vdso)
{
    char err[256] = "";
    int n = jr_collect_maps("/proc/self", text, sizeof text, mine, 64, err, sizeof err);
    *vvar = *vclock = *vdso = 0;
    for (int i = 0; i < n; i++) {
        uint64_t size = mine[i].end - mine[i].start;
        if (mine[i].flags & JR_R_VVAR)
            *vvar = size;
        if (mine[i].flags & JR_R_VCLOCK)
            *vclock = size;
        if (mine[i].flags & JR_R_VDSO)
            *vdso = size;
    }
}

static const char *release(void)
{
    static struct { char f[6][65]; } un;
    jr_sys1(__NR_uname, &un);
    return un.f[2];
}

static void print_host(void)
{
    uint64_t vv, vc, vd;
    host_specials(&vv, &vc, &vd);
    char *o = msg;
    msg[0] = 0;
    jr_cat(msg, sizeof msg, "arch x86_64\nkernel ", release(), "\nxcr0 ", 0);
    o = hex(msg + jr_strlen(msg), jr_xcr0());
    jr_cat(msg, sizeof msg, "\nxsave_size ", 0, 0, 0);
    o = jr_utoa(msg + jr_strlen(msg), jr_xsave_size());
    jr_cat(msg, sizeof msg, "\nvvar_size ", 0, 0, 0);
    o = jr_utoa(msg + jr_strlen(msg), vv);
    jr_cat(msg, sizeof msg, "\nvclock_size ", 0, 0, 0);
    o = jr_utoa(msg + jr_strlen(msg), vc);
    jr_cat(msg, sizeof msg, "\nvdso_size ", 0, 0, 0);
    o = jr_utoa(msg + jr_strlen(msg), vd);
    *o++ = '\n', *o = 0;
    out(1, msg);
}

static void verify_image(void)
{
    struct jr_kstat sb;
    if (jr_sys2(__NR_fstat, imgfd, &sb) < 0 || sb.st_size < JR_HEADER_SIZE)
        die(JR_EXIT_CORRUPT, "not a checkpoint image (too short)", 0, 0, 0);
    pread_all(&hdr, sizeof hdr, 0);
    if (memcmp(hdr.magic, JR_MAGIC, 8))
        die(JR_EXIT_CORRUPT, "not a checkpoint image (no ", JR_MAGIC, " magic)", 0);
    if (hdr.version != JR_VERSION || hdr.header_size != JR_HEADER_SIZE)
        die(JR_EXIT_CORRUPT, "image format version is not the one this restarter reads", 0, 0, 0);
    if ((uint64_t)sb.st_size != hdr.total_size)
        die(JR_EXIT_CORRUPT, "image size does not match its header (truncated or appended to)", 0, 0, 0);
    uint32_t crc = 0;
    for (uint64_t off = 0; off < hdr.total_size; off += BUF) {
        uint64_t n = hdr.total_size - off < BUF ? hdr.total_size - off : BUF;
        pread_all(buf, n, off);
        if (off == 0)
            memset(buf + __builtin_offsetof(struct jr_header, checksum), 0, 4);
        crc = jr_crc(crc, buf, n);
    }
    if (crc != hdr.checksum)
        die(JR_EXIT_CORRUPT, "checksum mismatch: the image is damaged or was modified", 0, 0, 0);
    if (hdr.nfiles > MAX_FILES || hdr.nrfiles > MAX_RFILES || hdr.nregions > MAX_REGIONS ||
        hdr.nsig != JR_NSIG)
        die(JR_EXIT_CORRUPT, "image tables are larger than this restarter supports", 0, 0, 0);
}

static void verify_host(void)
{
    char a[40], b[40];
    if (!jr_streq(hdr.arch, "x86_64"))
        die(JR_EXIT_FOREIGN, "image was taken on architecture ", hdr.arch, ", this host is x86_64", 0);
    if (!jr_streq(hdr.kernel, release()))
        die(JR_EXIT_FOREIGN, "image was taken under kernel ", hdr.kernel,
            ", this host runs another; restart the job from the start or on a host of that kind", 0);
    if (hdr.xcr0 != jr_xcr0() || hdr.xsave_size != jr_xsave_size()) {
        hex(a, hdr.xcr0), hex(b, jr_xcr0());
        die(JR_EXIT_FOREIGN, "CPU vector-state features differ (image XCR0 ", a, ", host ", b);
    }
    uint64_t vv, vc, vd;
    host_specials(&vv, &vc, &vd);
    if (vv != hdr.vvar_size || vc != hdr.vclock_size || vd != hdr.vdso_size)
        die(JR_EXIT_FOREIGN, "vDSO layout differs from the image's (another kernel build)", 0, 0, 0);
    for (uint32_t i = 0; i < hdr.nregions; i++)
        if (regions[i].end > JR_RESTARTER_BASE && regions[i].start < JR_RESTARTER_BASE + JR_RESTARTER_SPAN)
            die(JR_EXIT_FOREIGN, "image maps memory where the restarter lives (", regions[i].name, ")", 0);
}

static int writable(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

static void verify_files(void)
{
    struct jr_kstat sb;
    if (jr_sys4(__NR_newfstatat, AT_FDCWD, st.cwd, &sb, 0) < 0)
        die(JR_EXIT_FILES, "working directory ", st.cwd, " is gone", 0);
    for (uint32_t i = 0; i < hdr.nfiles; i++) {
        struct jr_file *f = &files[i];
        if (f->fd <= 2)
            continue; /* inherited from whoever starts the restarter */
        if (jr_sys4(__NR_newfstatat, AT_FDCWD, f->path, &sb, 0) < 0)
            die(JR_EXIT_FILES, "file ", f->path, " that the process had open is gone", 0);
        if ((sb.st_mode & JR_S_IFMT) != (f->mode & JR_S_IFMT))
            die(JR_EXIT_FILES, "file ", f->path, " has changed type since the checkpoint", 0);
        if ((f->mode & JR_S_IFMT) != JR_S_IFREG)
            continue;
        if (!writable(f->flags) && (sb.st_size != f->size || (int64_t)sb.st_mtime != f->mtime_sec ||
                                    (int64_t)sb.st_mtime_nsec != f->mtime_nsec))
            die(JR_EXIT_FILES, "input file ", f->path,
                " changed since the checkpoint (size or modification time)", 0);
        if (writable(f->flags) && sb.st_size < f->size)
            die(JR_EXIT_FILES, "output file ", f->path,
                " is shorter than at the checkpoint (truncated or replaced)", 0);
    }
}

static void restore_files(void)
{
    int maxfd = 2;
    for (uint32_t i = 0; i < hdr.nfiles; i++)
        if (files[i].fd > maxfd)
            maxfd = files[i].fd;
    long hi = jr_sys3(__NR_fcntl, imgfd, F_DUPFD_CLOEXEC, maxfd + 1 > 64 ? maxfd + 1 : 64);
    if (hi < 0)
        die(JR_EXIT_FILES, "cannot move the image descriptor out of the way", 0, 0, 0);
    jr_sys1(__NR_close, imgfd);
    imgfd = hi;
    for (uint32_t i = 0; i < hdr.nfiles; i++) {
        struct jr_file *f = &files[i];
        struct jr_kstat sb;
        int reg = (f->mode & JR_S_IFMT) == JR_S_IFREG;
        if (f->fd <= 2) {
            /* inherited; roll back only if it is the very output file of the checkpoint */
            if (reg && writable(f->flags) && jr_sys2(__NR_fstat, f->fd, &sb) == 0 &&
                sb.st_dev == f->dev && sb.st_ino == f->ino && sb.st_size >= f->size) {
                jr_sys2(__NR_ftruncate, f->fd, f->size);
                if (!(f->flags & O_APPEND))
                    jr_sys3(__NR_lseek, f->fd, f->offset, 0);
            }
            continue;
        }
        int flags = f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY);
        long fd = jr_sys4(__NR_openat, AT_FDCWD, f->path, flags | O_CLOEXEC, 0);
        if (fd < 0)
            die(JR_EXIT_FILES, "cannot reopen ", f->path, 0, 0);
        if (reg && writable(f->flags) && jr_sys2(__NR_ftruncate, fd, f->size) < 0)
            die(JR_EXIT_FILES, "cannot roll back ", f->path, " to its checkpoint size", 0);
        if (f->offset > 0 && (reg || (f->mode & JR_S_IFMT) == JR_S_IFDIR))
            jr_sys3(__NR_lseek, fd, f->offset, 0);
        if (fd != f->fd) {
            if (jr_sys3(__NR_dup3, fd, f->fd, f->fdflags ? O_CLOEXEC : 0) < 0)
                die(JR_EXIT_FILES, "cannot place ", f->path, " at its descriptor number", 0);
            jr_sys1(__NR_close, fd);
        } else if (!f->fdflags) {
            jr_sys3(__NR_fcntl, fd, F_SETFD, 0);
        }
    }
    if (jr_sys1(__NR_chdir, st.cwd) < 0)
        die(JR_EXIT_FILES, "cannot enter ", st.cwd, 0, 0);
}

static void restore_memory(void)
{
    char err[256] = "";
    int n = jr_collect_maps("/proc/self", text, sizeof text, mine, 64, err, sizeof err);
    if (n < 0)
        die(JR_EXIT_RESTORE, err, 0, 0, 0);
    uint64_t scratch = JR_RESTARTER_BASE + JR_RESTARTER_SPAN - 0x4000000ULL;
    uint64_t moved[3] = {0, 0, 0};
    const uint32_t kinds[3] = {JR_R_VVAR, JR_R_VCLOCK, JR_R_VDSO};
    for (int i = 0; i < n; i++) {
        uint64_t len = mine[i].end - mine[i].start;
        int k = mine[i].flags & JR_R_VVAR ? 0 : mine[i].flags & JR_R_VCLOCK ? 1
                                           : mine[i].flags & JR_R_VDSO    ? 2 : -1;
        if (k < 0) {
            jr_sys2(__NR_munmap, mine[i].start, len);
            continue;
        }
        uint64_t to = scratch + (uint64_t)k * 0x1000000ULL;
        if (jr_sys5(__NR_mremap, mine[i].start, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to) != (long)to)
            die(JR_EXIT_RESTORE, "cannot move ", mine[i].name, 0, 0);
        moved[k] = to;
    }
    for (uint32_t i = 0; i < hdr.nregions; i++) {
        struct jr_region *r = &regions[i];
        uint64_t len = r->end - r->start;
        for (int k = 0; k < 3; k++)
            if ((r->flags & kinds[k]) && moved[k] &&
                jr_sys5(__NR_mremap, moved[k], len, len, MREMAP_MAYMOVE | MREMAP_FIXED, r->start) != (long)r->start)
                die(JR_EXIT_RESTORE, "cannot move the vDSO to ", r->name, "'s address", 0);
        if (r->flags & (JR_R_VVAR | JR_R_VCLOCK | JR_R_VDSO))
            continue;
        int data = r->flags & JR_R_DATA;
        long flags = JR_MAP_PRIVATE | JR_MAP_ANONYMOUS | JR_MAP_FIXED | (r->flags & JR_R_STACK ? JR_MAP_GROWSDOWN : 0);
        long got = jr_sys6(__NR_mmap, r->start, len, data ? JR_PROT_READ | JR_PROT_WRITE : JR_PROT_NONE, flags, -1, 0);
        if (got != (long)r->start)
            die(JR_EXIT_RESTORE, "cannot map ", r->name[0] ? r->name : "an anonymous region", 0, 0);
        if (data) {
            pread_all((void *)r->start, len, r->data_off);
            if (jr_sys3(__NR_mprotect, r->start, len, r->prot) < 0)
                die(JR_EXIT_RESTORE, "cannot protect ", r->name, 0, 0);
        }
    }
}

static void restore_kernel_state(void)
{
    struct prctl_mm_map map = {
        .start_code = st.start_code, .end_code = st.end_code, .start_data = st.start_data,
        .end_data = st.end_data, .start_brk = st.start_brk, .brk = st.brk,
        .start_stack = st.start_stack, .arg_start = st.arg_start, .arg_end = st.arg_end,
        .env_start = st.env_start, .env_end = st.env_end, .auxv = (__u64 *)st.auxv,
        .auxv_size = st.auxv_size, .exe_fd = (uint32_t)-1,
    };
    /* needs CAP_SYS_RESOURCE; without it malloc falls back from brk to mmap */
    jr_sys5(__NR_prctl, PR_SET_MM, PR_SET_MM_MAP, &map, sizeof map, 0);
    for (int i = 1; i <= JR_NSIG; i++)
        if (i != 9 && i != 19)
            jr_sys4(__NR_rt_sigaction, i, &sigs[i - 1], 0, 8);
    if (st.tid_address) {
        long tid = jr_sys1(__NR_set_tid_address, st.tid_address);
        *(int *)st.tid_address = (int)tid; /* glibc's cached pthread->tid */
    }
    if (st.robust_head)
        jr_sys2(__NR_set_robust_list, st.robust_head, st.robust_len);
    if (st.rseq_addr)
        jr_sys4(__NR_rseq, st.rseq_addr, st.rseq_len, 0, st.rseq_sig);
    jr_sys2(__NR_arch_prctl, ARCH_SET_FS, st.fs_base);
    if (st.gs_base)
        jr_sys2(__NR_arch_prctl, ARCH_SET_GS, st.gs_base);
    if (hdr.cfg_addr) {
        struct jr_cfg *cfg = (struct jr_cfg *)hdr.cfg_addr;
        if (image_out[0])
            jr_strlcpy(cfg->image, image_out, sizeof cfg->image);
        cfg->restarted = 1;
    }
}

__attribute__((noreturn)) static void resume(void)
{
    /* rt_sigframe: pretcode | ucontext | siginfo | fpstate (64-byte aligned) */
    uint64_t top = ((uint64_t)framearea + sizeof framearea - JR_MAX_XSAVE - 64) & ~63ULL;
    uint8_t *fp = (uint8_t *)top;
    memcpy(fp, st.xsave, st.xsave_len);
    uint64_t frame = ((top - 8 - 304 - 128) & ~15ULL) - 8;
    uint64_t *pretcode = (uint64_t *)frame;
    uint64_t *uc = (uint64_t *)(frame + 8);
    memset(uc, 0, 304 + 128);
    *pretcode = hdr.restorer_addr;
    uc[0] = st.uc_flags;
    uc[2] = st.ss_sp;
    uc[3] = (uint64_t)st.ss_flags;
    uc[4] = st.ss_size;
    memcpy(&uc[5], st.gregs, sizeof st.gregs); /* sigcontext r8 .. cr2 */
    uc[5 + 23] = (uint64_t)fp;                  /* sigcontext.fpstate */
    uc[5 + 32] = st.sigmask;                    /* uc_sigmask */
    jr_sys1(__NR_close, imgfd);
    if (hdr.hook_addr) {
        __asm__ volatile("mov %0, %%rsp\n\t"
                         "xor %%edi, %%edi\n\t"
                         "lea 312(%0), %%rsi\n\t"
                         "lea 8(%0), %%rdx\n\t"
                         "jmp *%1\n"
                         :: "r"(frame), "r"(hdr.hook_addr) : "memory");
    } else {
        __asm__ volatile("lea 8(%0), %%rsp\n\t"
                         "mov $15, %%eax\n\t"
                         "syscall\n" :: "r"(frame) : "memory");
    }
    __builtin_unreachable();
}

void rmain(uint64_t *sp)
{
    int argc = (int)sp[0];
    char **argv = (char **)(sp + 1);
    int check = 0;
    jr_crc_init();
    for (int i = 1; i < argc; i++) {
        if (jr_streq(argv[i], "--host")) {
            print_host();
            jr_sys1(__NR_exit_group, 0);
        } else if (jr_streq(argv[i], "--check"))
            check = 1;
        else if (jr_streq(argv[i], "--image-out") && i + 1 < argc)
            jr_strlcpy(image_out, argv[++i], sizeof image_out);
        else if (argv[i][0] != '-' && !image[0])
            jr_strlcpy(image, argv[i], sizeof image);
        else
            image[0] = 0, i = argc;
    }
    if (!image[0]) {
        out(2, "usage: jobrt-restart [--check] [--image-out PATH] IMAGE | jobrt-restart --host\n");
        jr_sys1(__NR_exit_group, JR_EXIT_USAGE);
    }
    imgfd = jr_sys4(__NR_openat, AT_FDCWD, image, O_RDONLY | O_CLOEXEC, 0);
    if (imgfd < 0)
        die(JR_EXIT_IO, "cannot open the image", 0, 0, 0);
    verify_image();
    pread_all(&st, sizeof st, hdr.state_off);
    pread_all(sigs, sizeof sigs, hdr.sig_off);
    pread_all(files, hdr.nfiles * sizeof *files, hdr.files_off);
    pread_all(regions, hdr.nregions * sizeof *regions, hdr.regions_off);
    if (st.xsave_len > JR_MAX_XSAVE)
        die(JR_EXIT_CORRUPT, "XSAVE area larger than supported", 0, 0, 0);
    verify_host();
    verify_files();
    if (check) {
        out(1, "ok\n");
        jr_sys1(__NR_exit_group, 0);
    }
    uint64_t all = ~0ULL;
    jr_sys4(__NR_rt_sigprocmask, 2 /* SIG_SETMASK */, &all, 0, 8);
    restore_files();
    restore_memory();
    restore_kernel_state();
    resume();
}
