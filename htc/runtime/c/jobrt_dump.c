/* jobrt_dump.c - jobrt-dump: checkpoint a process from outside, with ptrace.
 *
 * Theory of operation
 * -------------------
 * For programs the preload library cannot reach (static binaries; anything started without it)
 * the dumper seizes the process (PTRACE_SEIZE + PTRACE_INTERRUPT), reads what the kernel shows
 * from outside - general registers, the XSAVE area (NT_X86_XSTATE, to which FP_XSTATE_MAGIC2 is
 * appended so it is a valid signal-frame fpstate), the signal mask, the rseq registration, the
 * robust list and everything in /proc/PID - and asks the process itself for what only it can
 * tell (its sigactions, its tid address, its brk) by injecting those system calls: rip is pointed
 * at a `syscall` instruction found in its executable mappings and the process single-steps it,
 * with results written below its stack's red zone.  A process stopped inside an interrupted system
 * call is recorded as about to re-issue it (rip moved back over `syscall`, rax = the call number),
 * as the kernel would do.  Memory comes from /proc/PID/mem.  The image has the in-process
 * handler's format with source JR_SOURCE_PTRACE and no hook: the restarter resumes it with a
 * bare rt_sigreturn.
 *
 * Usage: jobrt-dump [--run|--kill] [--fsync|--no-fsync] PID IMAGE
 *   --run (default) lets the process continue; --kill kills it once the image is renamed into
 *   place.  Exit 0: image written; 1: the process cannot be checkpointed (reason on stderr);
 *   2: usage or system error.
 */
#include "jobrt_ckpt_write.h"

#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#endif
#define PR_GET_TID_ADDRESS_ 40

struct rseq_config {
    uint64_t addr;
    uint32_t size, sig, flags, pad;
};

static struct jr_header h;
static struct jr_state st;
static struct jr_ksigaction sigs[JR_NSIG];
static struct jr_file files[256];
static struct jr_rfile rfiles[1];
static struct jr_region regions[4096];
static char text[256 * 1024], err[1024], procdir[64];
static pid_t pid;
static int memfd = -1;
static struct user_regs_struct saved;
static uint64_t sysaddr;

static void fail(int code, const char *what)
{
    fprintf(stderr, "jobrt-dump: pid %d: %s\n", (int)pid, what);
    if (code == 1 || saved.rip) {
        ptrace(PTRACE_SETREGS, pid, 0, &saved);
        ptrace(PTRACE_DETACH, pid, 0, 0);
    }
    exit(code);
}

static void wait_stop(void)
{
    int status;
    if (waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status))
        fail(2, "the process exited while being checkpointed");
}

/* run one system call inside the stopped process */
static long inject(long nr, long a, long b, long c, long d)
{
    struct user_regs_struct r = saved;
    r.rax = (uint64_t)nr;
    r.orig_rax = (uint64_t)-1;
    r.rdi = (uint64_t)a, r.rsi = (uint64_t)b, r.rdx = (uint64_t)c, r.r10 = (uint64_t)d;
    r.rip = sysaddr;
    if (ptrace(PTRACE_SETREGS, pid, 0, &r) || ptrace(PTRACE_SINGLESTEP, pid, 0, 0))
        fail(2, "cannot single-step the process");
    wait_stop();
    ptrace(PTRACE_GETREGS, pid, 0, &r);
    return (long)r.rax;
}

static void find_syscall_insn(int nreg)
{
    static unsigned char code[1 << 16];
    for (int pass = 0; pass < 2 && !sysaddr; pass++)
        for (int i = 0; i < nreg && !sysaddr; i++) {
            struct jr_region *r = &regions[i];
            if (!(r->prot & 4) || ((r->flags & JR_R_VDSO) ? 1 : 0) != (pass == 0))
                continue; /* the vDSO first, then the program's text */
            for (uint64_t a = r->start; a < r->end && !sysaddr; a += sizeof code) {
                uint64_t n = r->end - a < sizeof code ? r->end - a : sizeof code;
                if (pread(memfd, code, n, (off_t)a) != (ssize_t)n)
                    break;
                for (uint64_t k = 0; k + 1 < n; k++)
                    if (code[k] == 0x0f && code[k + 1] == 0x05) {
                        sysaddr = a + k;
                        break;
                    }
            }
        }
    if (!sysaddr)
        fail(1, "no syscall instruction in its executable memory to inject calls with");
}

static void capture_registers(void)
{
    struct user_regs_struct r = saved;
    long ret = (long)r.rax;
    if ((long)r.orig_rax >= 0 && (ret == -512 || ret == -513 || ret == -514 || ret == -516)) {
        r.rax = r.orig_rax; /* ERESTARTSYS/NOINTR/NOHAND/RESTART_BLOCK: re-issue the call */
        r.rip -= 2;
    }
    uint64_t g[23] = {r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rdi, r.rsi, r.rbp,
                      r.rbx, r.rdx, r.rax, r.rcx, r.rsp, r.rip, r.eflags,
                      0x33 | (0x2bULL << 48), 0, 0, 0, 0};
    memcpy(st.gregs, g, sizeof g);
    st.uc_flags = 1 | 2 | 4; /* UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS */
    st.fs_base = r.fs_base;
    st.gs_base = r.gs_base;
    st.ss_flags = 2; /* SS_DISABLE */
    struct iovec iov = {st.xsave, JR_MAX_XSAVE - 64}; /* a multiple of 8, room for MAGIC2 */
    if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &iov))
        fail(2, strerror(errno));
    /* the regset is the XSAVE image without the signal frame's software-reserved bytes: write
     * them as the kernel does for a frame (magic1, extended size, features, size) */
    uint32_t size = (uint32_t)iov.iov_len, ext = size + 4;
    uint64_t features = jr_xcr0();
    memcpy(st.xsave + 464, &(uint32_t){0x46505853u}, 4);
    memcpy(st.xsave + 468, &ext, 4);
    memcpy(st.xsave + 472, &features, 8);
    memcpy(st.xsave + 480, &size, 4);
    memcpy(st.xsave + size, &(uint32_t){0x46505845u}, 4); /* FP_XSTATE_MAGIC2 */
    st.xsave_len = ext;
    if (ptrace(PTRACE_GETSIGMASK, pid, (void *)8, &st.sigmask))
        fail(2, "cannot read the signal mask");
    struct rseq_config rc = {0, 0, 0, 0, 0};
    if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, pid, (void *)sizeof rc, &rc) > 0 && rc.addr) {
        st.rseq_addr = rc.addr;
        st.rseq_len = rc.size;
        st.rseq_sig = rc.sig;
    }
    jr_sys3(__NR_get_robust_list, pid, &st.robust_head, &st.robust_len);
}

static void capture_inside(void)
{
    uint64_t scratch = (saved.rsp - 4096) & ~63ULL; /* well below the red zone */
    for (int i = 1; i <= JR_NSIG; i++) {
        if (i == SIGKILL || i == SIGSTOP)
            continue;
        if (inject(__NR_rt_sigaction, i, 0, (long)scratch, 8) == 0)
            pread(memfd, &sigs[i - 1], sizeof sigs[0], (off_t)scratch);
    }
    if (inject(__NR_prctl, PR_GET_TID_ADDRESS_, (long)scratch, 0, 0) == 0)
        pread(memfd, &st.tid_address, 8, (off_t)scratch);
    st.brk = (uint64_t)inject(__NR_brk, 0, 0, 0, 0);
}

int main(int argc, char **argv)
{
    int kill_after = 0, do_fsync = 1, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--kill"))
            kill_after = 1;
        else if (!strcmp(argv[i], "--run"))
            kill_after = 0;
        else if (!strcmp(argv[i], "--no-fsync"))
            do_fsync = 0;
        else if (!strcmp(argv[i], "--fsync"))
            do_fsync = 1;
        else
            break;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: jobrt-dump [--run|--kill] [--fsync|--no-fsync] PID IMAGE\n");
        return 2;
    }
    pid = atoi(argv[i]);
    const char *image = argv[i + 1];
    jr_crc_init();
    snprintf(procdir, sizeof procdir, "/proc/%d", (int)pid);
    if (ptrace(PTRACE_SEIZE, pid, 0, 0)) {
        fprintf(stderr, "jobrt-dump: pid %d: cannot trace it: %s\n", (int)pid, strerror(errno));
        return 2;
    }
    ptrace(PTRACE_INTERRUPT, pid, 0, 0);
    wait_stop();
    if (ptrace(PTRACE_GETREGS, pid, 0, &saved))
        fail(2, "cannot read its registers");
    int threads = jr_count_threads(procdir, text, sizeof text);
    if (threads != 1) {
        snprintf(err, sizeof err, "the program runs %d threads; only single-threaded programs can be checkpointed", threads);
        fail(1, err);
    }
    if (jr_has_children(procdir, pid, text, sizeof text))
        fail(1, "the program has child processes; only single processes can be checkpointed");
    char path[96];
    snprintf(path, sizeof path, "%s/mem", procdir);
    memfd = (int)jr_sys4(__NR_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (memfd < 0)
        fail(2, "cannot open its memory");
    int nreg = jr_collect_maps(procdir, text, sizeof text, regions, 4096, err, sizeof err);
    if (nreg < 0)
        fail(1, err);
    int nf = jr_collect_files(procdir, text, sizeof text, files, 256, 0, 0, err, sizeof err);
    if (nf < 0)
        fail(1, err);
    if (jr_collect_stat(procdir, text, sizeof text, &st) < 0)
        fail(2, "cannot read its stat");
    jr_collect_misc(procdir, &st, h.exe, sizeof h.exe);
    capture_registers();
    find_syscall_insn(nreg);
    capture_inside();
    ptrace(PTRACE_SETREGS, pid, 0, &saved);
    h.source = JR_SOURCE_PTRACE;
    h.seq = 1;
    h.pid = pid;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h.time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    struct { char f[6][65]; } un;
    jr_sys1(__NR_uname, &un);
    jr_strlcpy(h.kernel, un.f[2], sizeof h.kernel);
    h.xcr0 = jr_xcr0();
    h.xsave_size = jr_xsave_size();
    h.nfiles = (uint32_t)nf;
    for (int k = 0; k < nreg; k++) {
        uint64_t size = regions[k].end - regions[k].start;
        if (regions[k].flags & JR_R_VVAR)
            h.vvar_size = size;
        if (regions[k].flags & JR_R_VCLOCK)
            h.vclock_size = size;
        if (regions[k].flags & JR_R_VDSO)
            h.vdso_size = size;
    }
    jr_layout(&h, regions, nreg);
    char tmp[JR_PATH + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", image);
    long rc = jr_write_image(image, tmp, &h, &st, sigs, files, rfiles, regions, memfd, do_fsync);
    if (rc < 0) {
        snprintf(err, sizeof err, "cannot write %s: %s", tmp, strerror((int)-rc));
        fail(2, err);
    }
    if (kill_after) {
        kill(pid, SIGKILL);
        waitpid(pid, 0, __WALL);
    } else {
        ptrace(PTRACE_DETACH, pid, 0, 0);
    }
    return 0;
}
