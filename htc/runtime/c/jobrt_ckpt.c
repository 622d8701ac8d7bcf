/* jobrt_ckpt.c - the in-process checkpoint handler of libjobrt.so.
 *
 * Theory of operation
 * -------------------
 * When JOBRT_CKPT_IMAGE names an image path, the constructor installs a handler for two signals:
 * JOBRT_CKPT_SIGNAL (default SIGUSR2) checkpoints and continues, JOBRT_CKPT_EXIT_SIGNAL (default
 * SIGTSTP, HTCondor's "checkpoint and vacate") checkpoints and exits with JOBRT_CKPT_EXIT_CODE
 * (default 85).  The handler runs with every signal blocked and uses raw system calls and memory
 * it maps itself, so it is async-signal-safe.  It records:
 *   - the interrupted context from the kernel's signal frame: general registers, the signal mask,
 *     the whole XSAVE area, the sigaltstack; plus FS/GS base, the tid address, the robust list and
 *     the rseq area that glibc registered;
 *   - every mapping of /proc/self/maps with its contents ([vvar]/[vdso] only by address);
 *   - every signal disposition; the file table with offsets, sizes and identities; the cwd;
 *     the remote-I/O shim's table of remote files when the shim is linked in;
 *   - the mm fields PR_SET_MM_MAP needs (brk, arg/env areas, auxv).
 * It writes IMAGE.tmp and renames it to IMAGE.  A program it cannot restore (several threads,
 * children, sockets, pipes, shared memory, deleted files) is refused: no image is written and
 * IMAGE.refused receives one line saying why; the program then continues.
 *
 * With the remote-I/O shim linked in, a signal that lands inside a remote call is handed to the
 * shim (jobrt_io_deferred_signal), which raises it again once the call is over (a vacate that waits
 * there is kept over a later periodic signal); otherwise the
 * handler first lets the shim quiesce (queued writes executed, remote output sizes recorded).
 *
 * After a restart the restarter calls jr_resumed() on a frame that returns, through
 * jr_restorer(), to the interrupted context: it counts the generation and asks the remote-I/O
 * shim to reconnect.
 */
#include "jobrt_ckpt_write.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <ucontext.h>

#define JR_MAX_FILES 256
#define JR_MAX_RFILES 64
#define JR_MAX_REGIONS 4096
#define JR_TEXT (256 * 1024)

#ifndef ARCH_GET_FS
#define ARCH_GET_FS 0x1003
#define ARCH_GET_GS 0x1004
#endif

struct jobrt_rfile;
extern int jobrt_io_remote_files(struct jobrt_rfile *out, int max) __attribute__((weak));
extern int jobrt_io_reconnect(void) __attribute__((weak));
extern int jobrt_io_quiesce(void) __attribute__((weak));
extern volatile int jobrt_io_busy __attribute__((weak));
extern volatile int jobrt_io_deferred_signal __attribute__((weak));
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

struct jr_cfg jr_cfg __attribute__((visibility("default")));
static int jr_sig_continue = SIGUSR2, jr_sig_exit = SIGTSTP, jr_exit_code = 85, jr_fsync = 1;
static int jr_skip_fd = -1;           /* the remote-I/O shim's connection (JOBRT_IO_FD) */
static volatile int jr_busy;

/* everything the handler needs, mapped per checkpoint so it is not part of the image */
struct jr_work {
    struct jr_header h;
    struct jr_state st;
    struct jr_ksigaction sigs[JR_NSIG];
    struct jr_file files[JR_MAX_FILES];
    struct jr_rfile rfiles[JR_MAX_RFILES];
    struct jr_region regions[JR_MAX_REGIONS];
    int skip[JR_MAX_RFILES + 2];
    char text[JR_TEXT];
    char err[1024];
    char tmp[JR_PATH + 16];
};

/* the rt_sigreturn trampoline a restored frame returns through */
__attribute__((naked)) void jr_restorer(void)
{
    __asm__ volatile("mov $15, %eax\n\tsyscall\n\thlt");
}

/* called by the restarter, on its own stack, before returning to the interrupted context */
void jr_resumed(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    jr_busy = 0; /* the image was taken inside the handler */
    jr_cfg.generation++;
    jr_cfg.restarted = 1;
    if (jobrt_io_reconnect)
        jobrt_io_reconnect();
}

static void jr_refuse(struct jr_work *w)
{
    char path[JR_PATH + 16], tmp[JR_PATH + 24];
    path[0] = tmp[0] = 0;
    jr_cat(path, sizeof path, jr_cfg.image, ".refused", 0, 0);
    jr_cat(tmp, sizeof tmp, path, ".tmp", 0, 0);
    long fd = jr_sys4(__NR_openat, AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char seq[24], pid[24];
    jr_utoa(seq, jr_cfg.seq);
    jr_utoa(pid, (uint64_t)jr_sys0(__NR_getpid));
    char line[1200];
    line[0] = 0;
    jr_cat(line, sizeof line, "checkpoint ", seq, " of pid ", pid);
    jr_cat(line, sizeof line, " refused: ", w->err, 0, 0);
    jr_cat(line, sizeof line, "\n", 0, 0, 0);
    jr_write_all(fd, line, jr_strlen(line));
    jr_sys1(__NR_close, fd);
    jr_sys4(__NR_renameat, AT_FDCWD, tmp, AT_FDCWD, path);
}

/* drop the work area's own mapping from the region list (it may have merged with a neighbour) */
static int jr_drop_range(struct jr_region *r, int n, uint64_t lo, uint64_t hi)
{
    int out = 0;
    for (int i = 0; i < n; i++) {
        struct jr_region cur = r[i];
        if (cur.end <= lo || cur.start >= hi) {
            r[out++] = cur;
            continue;
        }
        if (cur.start < lo && out < JR_MAX_REGIONS) {
            r[out] = cur;
            r[out++].end = lo;
        }
        if (cur.end > hi && out < JR_MAX_REGIONS) {
            r[out] = cur;
            r[out++].start = hi;
        }
    }
    return out;
}

static int jr_capture(struct jr_work *w, ucontext_t *uc)
{
    struct jr_state *s = &w->st;
    int threads = jr_count_threads("/proc/self", w->text, JR_TEXT);
    if (threads != 1) {
        char num[24];
        jr_utoa(num, (uint64_t)(threads < 0 ? 0 : threads));
        jr_cat(w->err, sizeof w->err, "the program runs ", num,
               " threads; only single-threaded programs can be checkpointed", 0);
        return -1;
    }
    long pid = jr_sys0(__NR_getpid);
    if (jr_has_children("/proc/self", pid, w->text, JR_TEXT)) {
        jr_cat(w->err, sizeof w->err,
               "the program has child processes (fork); only single processes can be checkpointed",
               0, 0, 0);
        return -1;
    }
    /* registers, mask, FPU/vector state, sigaltstack from the kernel's signal frame */
    memcpy(s->gregs, uc->uc_mcontext.gregs, sizeof s->gregs);
    memcpy(&s->sigmask, &uc->uc_sigmask, 8);
    s->uc_flags = uc->uc_flags;
    s->ss_sp = (uint64_t)uc->uc_stack.ss_sp;
    s->ss_size = uc->uc_stack.ss_size;
    s->ss_flags = uc->uc_stack.ss_flags;
    const uint8_t *fp = (const uint8_t *)uc->uc_mcontext.fpregs;
    uint32_t magic1 = *(const uint32_t *)(fp + 464), ext = *(const uint32_t *)(fp + 468);
    s->xsave_len = magic1 == 0x46505853u && ext <= JR_MAX_XSAVE ? ext : 512;
    memcpy(s->xsave, fp, s->xsave_len);
    jr_sys2(__NR_arch_prctl, ARCH_GET_FS, &s->fs_base);
    jr_sys2(__NR_arch_prctl, ARCH_GET_GS, &s->gs_base);
    jr_sys2(__NR_prctl, PR_GET_TID_ADDRESS, &s->tid_address);
    jr_sys3(__NR_get_robust_list, 0, &s->robust_head, &s->robust_len);
    if (&__rseq_size && &__rseq_offset && __rseq_size) {
        s->rseq_addr = s->fs_base + (uint64_t)__rseq_offset;
        s->rseq_len = __rseq_size < 32 ? 32 : __rseq_size;
        s->rseq_sig = 0x53053053u;
    }
    if (jr_collect_stat("/proc/self", w->text, JR_TEXT, s) < 0) {
        jr_cat(w->err, sizeof w->err, "cannot read /proc/self/stat", 0, 0, 0);
        return -1;
    }
    s->brk = (uint64_t)jr_sys1(__NR_brk, 0);
    jr_collect_misc("/proc/self", s, w->h.exe, sizeof w->h.exe);
    for (int i = 1; i <= JR_NSIG; i++)
        if (i != SIGKILL && i != SIGSTOP)
            jr_sys4(__NR_rt_sigaction, i, 0, &w->sigs[i - 1], 8);
    /* files: the remote-I/O shim's placeholders and connection are not local files */
    int nskip = 0;
    if (jobrt_io_remote_files) {
        int nr = jobrt_io_remote_files((struct jobrt_rfile *)w->rfiles, JR_MAX_RFILES);
        if (nr > JR_MAX_RFILES) {
            jr_cat(w->err, sizeof w->err, "too many remote files open", 0, 0, 0);
            return -1;
        }
        w->h.nrfiles = nr > 0 ? (uint32_t)nr : 0;
        for (uint32_t i = 0; i < w->h.nrfiles; i++)
            w->skip[nskip++] = w->rfiles[i].fd;
    }
    if (jr_skip_fd >= 0)
        w->skip[nskip++] = jr_skip_fd;
    int nf = jr_collect_files("/proc/self", w->text, JR_TEXT, w->files, JR_MAX_FILES, w->skip, nskip,
                              w->err, sizeof w->err);
    if (nf < 0)
        return -1;
    w->h.nfiles = (uint32_t)nf;
    return 0;
}

static void jr_checkpoint(int sig, siginfo_t *si, void *ucv)
{
    (void)si;
    if (jr_busy)
        return;
    if (&jobrt_io_busy && &jobrt_io_deferred_signal && jobrt_io_busy) {
        /* inside a remote call: the shim re-raises it after.  One slot: a vacate waiting there
         * is never replaced by a periodic checkpoint that lands in the same call (its image
         * would be taken and the job run on, the vacate forgotten); the vacate's image serves. */
        if (jobrt_io_deferred_signal != jr_sig_exit)
            jobrt_io_deferred_signal = sig;
        return;
    }
    jr_busy = 1;
    int saved_errno = errno;
    if (jobrt_io_quiesce)
        jobrt_io_quiesce(); /* queued remote writes executed, remote output sizes recorded */
    jr_cfg.seq++;
    struct jr_work *w = (struct jr_work *)jr_sys6(__NR_mmap, 0, sizeof(struct jr_work),
                                                   JR_PROT_READ | JR_PROT_WRITE,
                                                   JR_MAP_PRIVATE | JR_MAP_ANONYMOUS, -1, 0);
    if ((long)w < 0 && (long)w > -4096)
        goto done;
    w->h.source = JR_SOURCE_HANDLER;
    w->h.seq = jr_cfg.seq;
    w->h.generation = jr_cfg.generation;
    w->h.pid = jr_sys0(__NR_getpid);
    struct timespec ts;
    jr_sys2(__NR_clock_gettime, CLOCK_REALTIME, &ts);
    w->h.time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    struct {
        char f[6][65];
    } un;
    jr_sys1(__NR_uname, &un);
    jr_strlcpy(w->h.kernel, un.f[2], sizeof w->h.kernel);
    w->h.xcr0 = jr_xcr0();
    w->h.xsave_size = jr_xsave_size();
    w->h.cfg_addr = (uint64_t)&jr_cfg;
    w->h.hook_addr = (uint64_t)&jr_resumed;
    w->h.restorer_addr = (uint64_t)&jr_restorer;
    int ok = jr_capture(w, (ucontext_t *)ucv) == 0;
    int nreg = 0;
    if (ok) {
        nreg = jr_collect_maps("/proc/self", w->text, JR_TEXT, w->regions, JR_MAX_REGIONS, w->err,
                               sizeof w->err);
        ok = nreg >= 0;
    }
    if (ok) {
        nreg = jr_drop_range(w->regions, nreg, (uint64_t)w,
                             ((uint64_t)w + sizeof *w + JR_PAGE - 1) & ~(JR_PAGE - 1));
        for (int i = 0; i < nreg; i++) {
            struct jr_region *r = &w->regions[i];
            if (r->flags & JR_R_VVAR)
                w->h.vvar_size = r->end - r->start;
            if (r->flags & JR_R_VCLOCK)
                w->h.vclock_size = r->end - r->start;
            if (r->flags & JR_R_VDSO)
                w->h.vdso_size = r->end - r->start;
        }
        jr_layout(&w->h, w->regions, nreg);
        w->tmp[0] = 0;
        jr_cat(w->tmp, sizeof w->tmp, jr_cfg.image, ".tmp", 0, 0);
        long rc = jr_write_image(jr_cfg.image, w->tmp, &w->h, &w->st, w->sigs, w->files, w->rfiles,
                                 w->regions, -1, jr_fsync);
        if (rc < 0) {
            char num[24];
            jr_utoa(num, (uint64_t)-rc);
            jr_cat(w->err, sizeof w->err, "cannot write ", w->tmp, ": errno ", num);
            ok = 0;
        }
    }
    if (!ok)
        jr_refuse(w);
    jr_sys2(__NR_munmap, w, sizeof *w);
    if (ok && sig == jr_sig_exit)
        jr_sys1(__NR_exit_group, jr_exit_code);
done:
    errno = saved_errno;
    jr_busy = 0;
}

static int jr_env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

__attribute__((constructor)) static void jr_ckpt_init(void)
{
    const char *image = getenv("JOBRT_CKPT_IMAGE");
    jr_crc_init();
    if (!image || !*image)
        return;
    jr_strlcpy(jr_cfg.image, image, sizeof jr_cfg.image);
    jr_sig_continue = jr_env_int("JOBRT_CKPT_SIGNAL", SIGUSR2);
    jr_sig_exit = jr_env_int("JOBRT_CKPT_EXIT_SIGNAL", SIGTSTP);
    jr_exit_code = jr_env_int("JOBRT_CKPT_EXIT_CODE", 85);
    jr_fsync = jr_env_int("JOBRT_CKPT_FSYNC", 1);
    jr_skip_fd = jr_env_int("JOBRT_IO_FD", -1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = jr_checkpoint;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (jr_sig_continue > 0)
        sigaction(jr_sig_continue, &sa, 0);
    if (jr_sig_exit > 0)
        sigaction(jr_sig_exit, &sa, 0);
}
