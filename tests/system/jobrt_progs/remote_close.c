/* remote_close PATH: opens PATH (a remote file), says "ready", and on a "c" line from stdin closes
 * it and says "closed"; on the next line (or end of input) it exits 0.  A test stops the file
 * server so that the close's remote call cannot end, and lands a checkpoint signal in it. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0)
        return 3;
    char cmd[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(cmd, sizeof cmd, stdin))
        return 4;
    if (close(fd) != 0)
        return 5;
    printf("closed\n");
    fflush(stdout);
    fgets(cmd, sizeof cmd, stdin);
    return 0;
}
