/* remote_copy SRC DST: copies SRC to DST 64 bytes per "c" line read from stdin ("q": the rest,
 * then exit), saying "ready" on stdout before each read.  While it waits on stdin it is outside
 * any remote call, so a checkpoint then is taken at a known point. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int src = open(argv[1], O_RDONLY), dst = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (src < 0 || dst < 0)
        return 3;
    char cmd[16], buf[64];
    for (;;) {
        printf("ready\n");
        fflush(stdout);
        if (!fgets(cmd, sizeof cmd, stdin))
            return 4;
        int all = cmd[0] == 'q';
        ssize_t n;
        do {
            n = read(src, buf, sizeof buf);
            if (n > 0 && write(dst, buf, (size_t)n) != n)
                return 5;
        } while (all && n > 0);
        if (all)
            break;
    }
    close(dst);
    printf("done\n");
    return 0;
}
