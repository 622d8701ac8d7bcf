/* jobrt_ckpt_guard.c - refuse, at the moment it happens, what a checkpointed job cannot do.
 *
 * Theory of operation
 * -------------------
 * The checkpoint handler saves one thread of one process.  When checkpointing is on
 * (JOBRT_CKPT_IMAGE is set), starting a thread, forking, opening a socket or attaching SysV shared
 * memory is caught here, as it happens:
 *   JOBRT_CKPT_UNSUPPORTED=fail  (default) print one line naming the program and what it did,
 *                                and exit with JOBRT_CKPT_UNSUPPORTED_EXIT (default 86);
 *   JOBRT_CKPT_UNSUPPORTED=allow let it happen: the job runs on, and every later checkpoint is
 *                                refused with the reason (IMAGE.refused), so the job runs
 *                                without checkpoints.
 * Whatever slips past these wrappers (clone(2) called directly, sockets made inside glibc, pipes,
 * MAP_SHARED mappings, children made by posix_spawn) is refused by the handler when a checkpoint
 * is asked for.
 */
#include "jobrt_ckpt_fmt.h"

#include <asm/unistd.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

extern struct jr_cfg jr_cfg;

static void jr_unsupported(const char *what)
{
    const char *policy = getenv("JOBRT_CKPT_UNSUPPORTED");
    if (!jr_cfg.image[0] || (policy && strcmp(policy, "allow") == 0))
        return;
    const char *code = getenv("JOBRT_CKPT_UNSUPPORTED_EXIT");
    char exe[512];
    long n = jr_sys4(__NR_readlinkat, -100, "/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char line[1024] = "jobrt: ";
    size_t len = strlen(line);
    const char *parts[] = {exe, " ", what, "; the checkpointing runtime handles single-threaded, "
                           "single-process programs without sockets or shared memory (JOBRT_CKPT_UNSUPPORTED=allow runs it "
                           "without checkpoints)\n"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *p = parts[i]; *p && len + 1 < sizeof line; p++)
            line[len++] = *p;
    jr_sys3(__NR_write, 2, line, len);
    jr_sys1(__NR_exit_group, code && *code ? atoi(code) : 86);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    jr_unsupported("starts a thread");
    if (!real)
        real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
            RTLD_NEXT, "pthread_create");
    return real(thread, attr, start, arg);
}

pid_t fork(void)
{
    static pid_t (*real)(void);
    jr_unsupported("forks a child process");
    if (!real)
        real = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
    return real();
}

int socket(int domain, int type, int protocol)
{
    static int (*real)(int, int, int);
    jr_unsupported("opens a socket");
    if (!real)
        real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    return real(domain, type, protocol);
}

int socketpair(int domain, int type, int protocol, int sv[2])
{
    static int (*real)(int, int, int, int *);
    jr_unsupported("opens a socket pair");
    if (!real)
        real = (int (*)(int, int, int, int *))dlsym(RTLD_NEXT, "socketpair");
    return real(domain, type, protocol, sv);
}

int shmget(key_t key, size_t size, int flags)
{
    static int (*real)(key_t, size_t, int);
    jr_unsupported("uses SysV shared memory");
    if (!real)
        real = (int (*)(key_t, size_t, int))dlsym(RTLD_NEXT, "shmget");
    return real(key, size, flags);
}
