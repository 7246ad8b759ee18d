/*
 * The pod sandbox's process (the kubelet's --pod-infra-container-image): it holds the pod's
 * namespaces open and does nothing else. It sleeps until SIGTERM or SIGINT (then exits 0, so the
 * sandbox stops at once) and, as PID 1 of a pod that shares its PID namespace, reaps every child
 * that gets reparented to it (SIGCHLD), so no zombie outlives its process.
 *
 * Built static (`gcc -static -O2`) for a FROM scratch image: there is no libc in the image.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal = 0;

static void on_stop(int signo) { stop_signal = signo; }

static void on_child(int signo) {
    (void)signo;
    int saved = errno; /* a handler must not change errno under the interrupted code */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int handle(int signo, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = (signo == SIGCHLD) ? SA_NOCLDSTOP | SA_RESTART : 0;
    return sigaction(signo, &action, NULL);
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("magnetar pause 1.0\n");
        return 0;
    }
    if (getpid() != 1) {
        /* Like the kubelet's own pause: only useful as a container's init. */
        fprintf(stderr, "pause: warning: not PID 1\n");
    }
    if (handle(SIGINT, on_stop) < 0 || handle(SIGTERM, on_stop) < 0 || handle(SIGCHLD, on_child) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    /* The signals stay blocked except inside sigsuspend, so a SIGTERM that arrives between the
     * check and the wait is not lost (as it could be with a bare pause()). */
    sigset_t blocked, waiting;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &blocked, &waiting) < 0) {
        perror("pause: sigprocmask");
        return 1;
    }
    sigdelset(&waiting, SIGINT);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGCHLD);
    while (!stop_signal) {
        sigsuspend(&waiting);
    }
    fprintf(stderr, "pause: shutting down, got signal %d\n", (int)stop_signal);
    return 0;
}
