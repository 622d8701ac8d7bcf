/* jobrt_ckpt_fmt.h - the checkpoint image format shared by the in-process handler
 * (jobrt_ckpt.c, inside libjobrt.so), the ptrace dumper (jobrt_dump.c) and the restarter
 * (jobrt_restart.c, freestanding).  htc/runtime/image.py reads the same layout.
 *
 * An image is:  header (JR_HEADER_SIZE bytes) | state | sigactions | files | remote files |
 * regions | zero padding to a page | region data, each region page aligned.
 * All integers are little-endian x86-64 native.  The checksum is zlib's CRC-32 of the header
 * (with its checksum field zero) followed by everything after the header.
 *
 * Only freestanding headers may be included here: the restarter has no libc.
 */
#ifndef JOBRT_CKPT_FMT_H
#define JOBRT_CKPT_FMT_H

#include <stdint.h>
#include <stddef.h>

#define JR_MAGIC "HTCJRTI1"
#define JR_VERSION 1
#define JR_HEADER_SIZE 4096
#define JR_PAGE 4096ULL
#define JR_PATH 4096
#define JR_MAX_XSAVE 16384
#define JR_NSIG 64
/* The restarter is linked at this address; its mappings stay in a restarted process and
 * every later checkpoint skips this span. */
#define JR_RESTARTER_BASE 0x100000000000ULL
#define JR_RESTARTER_SPAN 0x10000000ULL

#define JR_SOURCE_HANDLER 1 /* written by the in-process signal handler */
#define JR_SOURCE_PTRACE 2  /* written by jobrt-dump from outside */

/* constants the kernel headers hide from user space, or glibc defines elsewhere */
#define JR_S_IFMT 0170000
#define JR_S_IFSOCK 0140000
#define JR_S_IFREG 0100000
#define JR_S_IFDIR 0040000
#define JR_S_IFCHR 0020000
#define JR_S_IFIFO 0010000
#define JR_PROT_READ 1
#define JR_PROT_WRITE 2
#define JR_PROT_NONE 0
#define JR_MAP_PRIVATE 0x02
#define JR_MAP_FIXED 0x10
#define JR_MAP_ANONYMOUS 0x20
#define JR_MAP_GROWSDOWN 0x100

/* region flags */
#define JR_R_DATA 1    /* contents are in the image */
#define JR_R_STACK 2   /* the main stack: mapped MAP_GROWSDOWN on restore */
#define JR_R_VVAR 4    /* [vvar]: moved, not copied */
#define JR_R_VCLOCK 8  /* [vvar_vclock]: moved, not copied */
#define JR_R_VDSO 16   /* [vdso]: moved, not copied */

/* restarter exit codes (documented in docs/checkpointing.md) */
#define JR_EXIT_USAGE 64
#define JR_EXIT_CORRUPT 65    /* not an image, truncated, or the checksum does not match */
#define JR_EXIT_FOREIGN 66    /* taken on another kind of host (arch, kernel, CPU features) */
#define JR_EXIT_FILES 67      /* a file or directory the process had open cannot be restored */
#define JR_EXIT_IO 68         /* the image could not be read */
#define JR_EXIT_RESTORE 70    /* the address space could not be rebuilt (process is lost) */

struct jr_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size;
    uint32_t checksum;
    uint32_t source;
    char arch[16];
    char kernel[72];          /* uname release */
    uint64_t xcr0;            /* XSAVE feature mask (XGETBV 0) */
    uint32_t xsave_size;      /* CPUID 0xD.0 EBX: bytes for the enabled features */
    uint32_t nsig;
    uint64_t vvar_size, vclock_size, vdso_size;
    uint64_t seq;             /* checkpoint number over the job's life */
    uint64_t generation;      /* restarts behind this image */
    int64_t pid;              /* pid when taken */
    int64_t time_ns;          /* CLOCK_REALTIME when taken */
    uint64_t total_size;      /* the whole image in bytes */
    uint32_t nfiles, nrfiles, nregions, pad0;
    uint64_t state_off, sig_off, files_off, rfiles_off, regions_off, data_off;
    uint64_t data_bytes;      /* bytes of region data */
    uint64_t cfg_addr;        /* struct jr_cfg in the process (0: none) */
    uint64_t hook_addr;       /* called on the restored stack after restore (0: none) */
    uint64_t restorer_addr;   /* rt_sigreturn trampoline the hook returns to */
    char exe[1024];           /* /proc/PID/exe when taken (for people) */
};

struct jr_ksigaction {        /* the kernel's struct sigaction on x86-64 */
    uint64_t handler;
    uint64_t flags;
    uint64_t restorer;
    uint64_t mask;
};

struct jr_state {
    uint64_t gregs[23];       /* glibc REG_R8..REG_CR2, the same order as struct sigcontext */
    uint64_t sigmask;         /* blocked signals at the interrupted point */
    uint64_t uc_flags;
    uint64_t fs_base, gs_base;
    uint64_t ss_sp, ss_size;  /* sigaltstack */
    int64_t ss_flags;
    uint64_t tid_address;
    uint64_t robust_head, robust_len;
    uint64_t rseq_addr;
    uint32_t rseq_len, rseq_sig;
    /* PR_SET_MM_MAP fields */
    uint64_t start_code, end_code, start_data, end_data, start_brk, brk, start_stack;
    uint64_t arg_start, arg_end, env_start, env_end;
    uint64_t auxv[64];
    uint32_t auxv_size;
    uint32_t xsave_len;       /* bytes of xsave (fpstate incl. the trailing FP_XSTATE_MAGIC2) */
    char cwd[JR_PATH];
    uint8_t xsave[JR_MAX_XSAVE] __attribute__((aligned(64)));
};

struct jr_file {
    int32_t fd;
    int32_t flags;            /* F_GETFL */
    int32_t fdflags;          /* F_GETFD (FD_CLOEXEC) */
    uint32_t mode;            /* st_mode */
    int64_t offset;
    int64_t size;
    uint64_t dev, ino;
    int64_t mtime_sec, mtime_nsec;
    char path[JR_PATH];
};

/* the remote I/O shim's table entry (jobrt.h: struct jobrt_rfile), recorded verbatim */
struct jr_rfile {
    int32_t fd;
    int32_t flags;
    int64_t offset;
    char path[JR_PATH];
};

struct jr_region {
    uint64_t start, end;
    uint32_t prot;
    uint32_t flags;           /* JR_R_* */
    uint64_t data_off;        /* offset of the contents in the image */
    char name[256];
};

/* The handler's configuration block, at header.cfg_addr in the process: the restarter may
 * point a restored process at a new image path and counts the generation. */
struct jr_cfg {
    char image[JR_PATH];
    uint64_t seq;
    uint64_t generation;
    int32_t restarted;        /* set by the restarter; the hook reconnects remote files */
    int32_t pad;
};

/* ---- CRC-32 (zlib's polynomial), slicing by 8 ---- */
static uint32_t jr_crc_table[8][256] __attribute__((unused));

static inline void jr_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        jr_crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            jr_crc_table[t][i] = (jr_crc_table[t - 1][i] >> 8) ^
                                 jr_crc_table[0][jr_crc_table[t - 1][i] & 0xff];
}

/* Carry-less multiplication folding (Intel's "Fast CRC computation using PCLMULQDQ", the
 * constants of zlib/Chromium's crc32_simd for the reflected IEEE polynomial).  Takes and returns
 * the inverted ("internal") CRC state; len is a multiple of 16, at least 64. */
__attribute__((target("pclmul,sse4.1"))) static inline uint32_t jr_crc_clmul(uint32_t crc,
                                                                             const uint8_t *buf,
                                                                             uint64_t len)
{
    typedef long long v2di __attribute__((vector_size(16)));
    const v2di k1k2 = {0x0154442bd4LL, 0x01c6e41596LL}, k3k4 = {0x01751997d0LL, 0x00ccaa009eLL};
    const v2di k5k0 = {0x0163cd6124LL, 0}, poly = {0x01db710641LL, 0x01f7011641LL};
    const v2di mask32 = {0xffffffffLL, 0xffffffffLL};
#define JR_LD(p) ((v2di)__builtin_ia32_loaddqu((const char *)(p)))
#define JR_CLMUL(a, b, imm) ((v2di)__builtin_ia32_pclmulqdq128((a), (b), (imm)))
    v2di x1 = JR_LD(buf), x2 = JR_LD(buf + 16), x3 = JR_LD(buf + 32), x4 = JR_LD(buf + 48);
    v2di x0, x5, x6, x7, x8;
    x1 ^= (v2di){(long long)crc, 0};
    x0 = k1k2;
    buf += 64, len -= 64;
    while (len >= 64) {
        x5 = JR_CLMUL(x1, x0, 0x00), x6 = JR_CLMUL(x2, x0, 0x00);
        x7 = JR_CLMUL(x3, x0, 0x00), x8 = JR_CLMUL(x4, x0, 0x00);
        x1 = JR_CLMUL(x1, x0, 0x11) ^ x5 ^ JR_LD(buf);
        x2 = JR_CLMUL(x2, x0, 0x11) ^ x6 ^ JR_LD(buf + 16);
        x3 = JR_CLMUL(x3, x0, 0x11) ^ x7 ^ JR_LD(buf + 32);
        x4 = JR_CLMUL(x4, x0, 0x11) ^ x8 ^ JR_LD(buf + 48);
        buf += 64, len -= 64;
    }
    x0 = k3k4;
    x5 = JR_CLMUL(x1, x0, 0x00);
    x1 = JR_CLMUL(x1, x0, 0x11) ^ x2 ^ x5;
    x5 = JR_CLMUL(x1, x0, 0x00);
    x1 = JR_CLMUL(x1, x0, 0x11) ^ x3 ^ x5;
    x5 = JR_CLMUL(x1, x0, 0x00);
    x1 = JR_CLMUL(x1, x0, 0x11) ^ x4 ^ x5;
    while (len >= 16) {
        x5 = JR_CLMUL(x1, x0, 0x00);
        x1 = JR_CLMUL(x1, x0, 0x11) ^ JR_LD(buf) ^ x5;
        buf += 16, len -= 16;
    }
    /* 128 -> 64 bits */
    typedef int v4si __attribute__((vector_size(16)));
    const v4si lo32 = {-1, 0, -1, 0};
    x2 = JR_CLMUL(x1, x0, 0x10);
    x1 = (v2di)__builtin_ia32_psrldqi128(x1, 64) ^ x2;
    x0 = k5k0;
    x2 = (v2di)__builtin_ia32_psrldqi128(x1, 32);
    x1 = x1 & (v2di)lo32;
    x1 = JR_CLMUL(x1, x0, 0x00) ^ x2;
    /* Barrett reduction to 32 bits */
    x0 = poly;
    x2 = x1 & (v2di)lo32;
    x2 = JR_CLMUL(x2, x0, 0x10) & (v2di)lo32;
    x2 = JR_CLMUL(x2, x0, 0x00);
    x1 ^= x2;
    (void)mask32;
    return (uint32_t)((v4si)x1)[1];
#undef JR_LD
#undef JR_CLMUL
}

static int jr_have_clmul __attribute__((unused)) = -1;

/* crc of buf continuing from crc (0 to start), like zlib.crc32(buf, crc) */
static inline uint32_t jr_crc(uint32_t crc, const void *buf, uint64_t len)
{
    const uint8_t *p = (const uint8_t *)buf;
    crc = ~crc;
    if (jr_have_clmul < 0) {
        uint32_t a = 1, b, c = 0, d;
        __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
        jr_have_clmul = (c >> 1) & (c >> 19) & 1; /* PCLMULQDQ and SSE4.1 */
    }
    if (jr_have_clmul && len >= 64) {
        uint64_t n = len & ~15ULL;
        crc = jr_crc_clmul(crc, p, n);
        p += n;
        len -= n;
    }
    while (len && ((uintptr_t)p & 7)) {
        crc = jr_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t v = *(const uint64_t *)p ^ crc;
        crc = jr_crc_table[7][v & 0xff] ^ jr_crc_table[6][(v >> 8) & 0xff] ^
              jr_crc_table[5][(v >> 16) & 0xff] ^ jr_crc_table[4][(v >> 24) & 0xff] ^
              jr_crc_table[3][(v >> 32) & 0xff] ^ jr_crc_table[2][(v >> 40) & 0xff] ^
              jr_crc_table[1][(v >> 48) & 0xff] ^ jr_crc_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = jr_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- host facts ---- */
static inline uint64_t jr_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static inline uint32_t jr_xsave_size(void)
{
    uint32_t a = 0xd, b, c = 0, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return b;
}

/* ---- raw system calls (async-signal-safe, no errno) ---- */
static inline long jr_sys6(long n, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#define jr_sys0(n) jr_sys6((n), 0, 0, 0, 0, 0, 0)
#define jr_sys1(n, a) jr_sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define jr_sys2(n, a, b) jr_sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define jr_sys3(n, a, b, c) jr_sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define jr_sys4(n, a, b, c, d) jr_sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define jr_sys5(n, a, b, c, d, e) \
    jr_sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* ---- tiny string helpers usable without libc ---- */
static inline size_t jr_strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

static inline void jr_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = src[i];
    dst[i] = 0;
}

static inline int jr_startswith(const char *s, const char *prefix)
{
    while (*prefix)
        if (*s++ != *prefix++)
            return 0;
    return 1;
}

static inline int jr_streq(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* parse hex at *p, advancing it */
static inline uint64_t jr_hex(const char **p)
{
    uint64_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uint64_t)(c - 'a' + 10);
        else
            return v;
    }
}

static inline char *jr_utoa(char *out, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *out++ = tmp[--n];
    *out = 0;
    return out;
}

#endif
