/* jobrt.h -- declarations shared by the parts of libjobrt.so (remote I/O, checkpointing)
 * and the runtime's programs.
 *
 * The remote-I/O shim (jobrt_io*.c) owns the table of remote file descriptors: each is a
 * placeholder fd in the job's fd table (so local fds never get its number) standing for a file
 * opened by the server. The checkpoint code saves that table in the image and, after a restart,
 * asks the shim to reopen every entry on the new server.
 */
#ifndef JOBRT_H
#define JOBRT_H

#define JOBRT_PATH_MAX 4096

/* One open remote file as the checkpoint code sees it. */
struct jobrt_rfile {
    int fd;              /* the job's fd number (the placeholder's) */
    int flags;           /* open(2) flags it was opened with (O_CREAT/O_TRUNC/O_EXCL dropped) */
    long long offset;    /* current file offset */
    char path[JOBRT_PATH_MAX]; /* server-side path (absolute within the server's root) */
};

/* Fill out[0..max) with the remote fds open now; return how many there are (which may exceed
 * max: then only max were written). Async-signal-safe: reads the shim's table only. */
int jobrt_io_remote_files(struct jobrt_rfile *out, int max);

/* After a restart: connect to the server named by the environment the new starter set
 * (JOBRT_IO_FD), then reopen every remote fd of the table and seek it to its saved offset.
 * Return 0, or -1 with errno set when a file could not be reopened. */
int jobrt_io_reconnect(void);

/* Nonzero when the shim forwards calls (JOBRT_IO_FD was set at load time). */
int jobrt_io_active(void);

/* Checkpointing and the connection. A checkpoint must not catch the shim in the middle of a
 * remote call (the request would be half sent, or its reply owed by a server that will be gone
 * after a restart), and queued pipelined writes must reach the server first:
 *  - jobrt_io_busy is nonzero while the shim is inside a remote call. A checkpoint handler that
 *    finds it set stores its signal number in jobrt_io_deferred_signal and returns; the shim
 *    raise()s that signal again as soon as the call is over.
 *  - jobrt_io_quiesce(), called by the handler when not busy, before it saves anything: sends
 *    the queued writes, waits until the server has executed them, and records each writable
 *    remote file's size, which jobrt_io_reconnect() truncates the file back to (so output
 *    written after the checkpoint is rolled back, as for local files). Returns 0, or -1 with
 *    errno set (the connection is gone: the checkpoint is still usable, the sizes unknown). */
extern volatile int jobrt_io_busy;
extern volatile int jobrt_io_deferred_signal;
int jobrt_io_quiesce(void);

#endif
