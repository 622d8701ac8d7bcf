/* threads: starts a worker thread, then both loop for up to 60 s (a job checkpointing refuses) */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 60000; i++)
        usleep(1000);
    return 0;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, 0, worker, 0))
        return 1;
    printf("started\n");
    fflush(stdout);
    for (int i = 0; i < 60000; i++)
        usleep(1000);
    return 0;
}
