/*
 * mindloop-init: PID 1 of every sandbox container, in place of Docker's docker-init.
 *
 *   mindloop-init <kill-after-seconds> <command> [args…]
 *
 * It runs the command as its only direct child, forwards the signals it receives to it, reaps
 * every orphan, and exits with the command's status (128 + signal when it was killed), as
 * docker-init does. Two things docker-init cannot do:
 *
 *  - It is not dumpable (PR_SET_DUMPABLE 0, and an execute-only image file). docker-init is the
 *    host's readable binary, so under the shared uid any process of the run could open
 *    /proc/1/mem for writing and rewrite it. A non-dumpable process's /proc files belong to
 *    root and ptrace-mode access to them is refused.
 *  - It is the wall-clock backstop for a run no worker follows any more: at kill-after seconds
 *    it SIGKILLs every process in the container and exits 137. As PID 1 it cannot be killed from
 *    inside (the kernel drops SIGKILL/SIGSTOP sent to a namespace's init from within), unlike a
 *    watchdog process of the run's uid, which the run itself could kill.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mindloop-init <kill-after-seconds> <command> [args]\n");
    return 2;
  }
  char *end;
  long kill_after = strtol(argv[1], &end, 10);
  if (*end != '\0' || kill_after <= 0) {
    fprintf(stderr, "mindloop-init: bad kill-after seconds %s\n", argv[1]);
    return 2;
  }
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    perror("mindloop-init: prctl(PR_SET_DUMPABLE)");
    return 2;
  }

  /* Every signal stays pending until sigtimedwait takes it: nothing is lost between fork and
     the loop, and none of them can end PID 1 by its default action. */
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);

  pid_t child = fork();
  if (child < 0) {
    perror("mindloop-init: fork");
    return 2;
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(argv[2], argv + 2);
    fprintf(stderr, "mindloop-init: exec %s: %s\n", argv[2], strerror(errno));
    _exit(127);
  }

  struct timespec now, deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += kill_after;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    long left_ms = (deadline.tv_sec - now.tv_sec) * 1000 + (deadline.tv_nsec - now.tv_nsec) / 1000000;
    if (left_ms <= 0) {
      /* kill(-1) from PID 1 reaches every other process of the namespace; whatever forks in
         between dies when PID 1 exits (the kernel kills a namespace whose init is gone). */
      kill(-1, SIGKILL);
      return 128 + SIGKILL;
    }
    struct timespec wait = {left_ms / 1000, (left_ms % 1000) * 1000000L};
    siginfo_t info;
    int sig = sigtimedwait(&all, &info, &wait);
    if (sig < 0) continue; /* EAGAIN (time to check the deadline) or EINTR */
    if (sig != SIGCHLD) {
      kill(child, sig);
      continue;
    }
    /* SIGCHLDs coalesce: reap everything that has ended. */
    for (;;) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid == child) return exit_status(status);
    }
  }
}
