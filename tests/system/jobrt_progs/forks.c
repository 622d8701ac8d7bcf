/* forks: forks a child and waits for it (a job checkpointing refuses) */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, 0, 0);
    printf("forked\n");
    return 0;
}
