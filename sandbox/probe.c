/*
 * mindloop-probe: a tiny static binary baked into the sandbox image so the containment suite
 * (test/sandbox/containment.test.ts) can try forbidden syscalls directly, without relying on
 * what busybox happens to wrap. Every probe prints one line `<name> <ok|denied> <detail>` and
 * exits 0 when the attempt was refused (contained) and 1 when it succeeded (a breach).
 *
 *   mindloop-probe mount|unshare|keyctl|bpf|ptrace|proc_mem|release_agent|proc_self_exe|docker_socket
 *   mindloop-probe connect <ipv4> <port>
 *   mindloop-probe syscalls          (one line per extra syscall the seccomp profile removes)
 *   mindloop-probe memhog <mb>       (touches memory until killed)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(const char *name, long rc, int err) {
  if (rc < 0) {
    printf("%s denied %s\n", name, strerror(err));
    return 0;
  }
  printf("%s ok rc=%ld\n", name, rc);
  return 1;
}

static int try_mount(void) {
  mkdir("/tmp/m", 0700);
  long rc = mount("none", "/tmp/m", "tmpfs", 0, NULL);
  return report("mount", rc, errno);
}

static int try_unshare(void) {
  /* A user namespace needs no capability on most kernels: only seccomp stops it here. */
  long rc = unshare(CLONE_NEWUSER);
  int breach = report("unshare_user", rc, errno);
  rc = unshare(CLONE_NEWNS);
  return report("unshare_mnt", rc, errno) | breach;
}

static int try_keyctl(void) {
  long rc = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 1);
  int breach = report("keyctl", rc, errno);
  rc = syscall(SYS_add_key, "user", "mindloop", "x", 1, -3);
  breach |= report("add_key", rc, errno);
  rc = syscall(SYS_request_key, "user", "mindloop", NULL, 0);
  /* ENOKEY would mean the call went through. */
  return report("request_key", rc < 0 && errno == ENOKEY ? 0 : rc, errno) | breach;
}

static int try_bpf(void) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  long rc = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
  return report("bpf", rc, errno);
}

static int try_ptrace(void) {
  pid_t child = fork();
  if (child < 0) return report("ptrace", -1, errno);
  if (child == 0) {
    pause();
    _exit(0);
  }
  long rc = ptrace(PTRACE_ATTACH, child, NULL, NULL);
  int err = errno;
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return report("ptrace_attach", rc, err);
}

/* The /proc/<pid>/mem open of one target, for writing and for reading: any fd is a breach. */
static int try_mem_of(pid_t pid, const char *who) {
  char path[64], name[96];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
  int breach = 0;
  const int modes[] = {O_RDWR, O_WRONLY, O_RDONLY};
  const char *mode_names[] = {"rdwr", "wronly", "rdonly"};
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "proc_mem_%s_%s", who, mode_names[i]);
    int fd = open(path, modes[i]);
    int err = errno;
    if (fd >= 0) close(fd);
    breach |= report(name, fd, err);
  }
  return breach;
}

/* The comm field of /proc/<pid>/stat (readable without ptrace access), "" when unknown. */
static void comm_of(pid_t pid, char *out, size_t len) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  out[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (fgets(buf, sizeof buf, f)) {
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (l && r && r > l && (size_t)(r - l) < len) {
      memcpy(out, l + 1, r - l - 1);
      out[r - l - 1] = '\0';
    }
  }
  fclose(f);
}

/*
 * ptrace refused by seccomp is not enough: /proc/<pid>/mem of a process of the same uid is open
 * to any process that passes the ptrace access check (no Yama here). The target is a child that
 * has exec'd `sleep` (exec resets dumpability, so it must be refused after an exec too), then
 * this probe's parent and PID 1.
 */
static int try_proc_mem(void) {
  pid_t child = fork();
  if (child < 0) return report("proc_mem_fork", -1, errno);
  if (child == 0) {
    execlp("sleep", "sleep", "30", (char *)NULL);
    _exit(127);
  }
  char comm[32];
  for (int i = 0; i < 200; i++) {
    comm_of(child, comm, sizeof comm);
    if (!strcmp(comm, "sleep")) break;
    usleep(10000);
  }
  int breach = 0;
  if (strcmp(comm, "sleep") != 0) {
    printf("proc_mem_child ok exec of sleep not seen (comm %s): nothing was tested\n", comm);
    breach = 1;
  } else {
    breach |= try_mem_of(child, "child");
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  breach |= try_mem_of(getppid(), "parent");
  if (getppid() != 1) breach |= try_mem_of(1, "init");
  return breach;
}

static int try_release_agent(void) {
  /* cgroup v1 escape: write a host path into release_agent. Try every place it can be. */
  const char *patterns[] = {"/sys/fs/cgroup/*/release_agent", "/sys/fs/cgroup/release_agent", NULL};
  int breach = 0, found = 0;
  for (int p = 0; patterns[p]; p++) {
    glob_t g;
    if (glob(patterns[p], 0, NULL, &g) != 0) continue;
    for (size_t i = 0; i < g.gl_pathc; i++) {
      found++;
      int fd = open(g.gl_pathv[i], O_WRONLY);
      if (fd >= 0 && write(fd, "/tmp/x", 6) == 6) {
        printf("release_agent ok wrote %s\n", g.gl_pathv[i]);
        breach = 1;
      }
      if (fd >= 0) close(fd);
    }
    globfree(&g);
  }
  /* Mounting a fresh cgroup hierarchy to get a writable release_agent must fail too. */
  mkdir("/tmp/cg", 0700);
  long rc = mount("cgroup", "/tmp/cg", "cgroup", 0, "rdma");
  breach |= report("cgroup_mount", rc, errno);
  if (!breach) printf("release_agent denied none of %d writable\n", found);
  return breach;
}

static int try_proc_self_exe(void) {
  int fd = open("/proc/self/exe", O_WRONLY);
  if (fd >= 0) {
    close(fd);
    return report("proc_self_exe", fd, 0);
  }
  return report("proc_self_exe", -1, errno);
}

static int try_docker_socket(void) {
  const char *paths[] = {"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", NULL};
  int breach = 0;
  for (int i = 0; paths[i]; i++) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, paths[i], sizeof a.sun_path - 1);
    long rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&a, sizeof a);
    int err = errno;
    if (fd >= 0) close(fd);
    char name[128];
    snprintf(name, sizeof name, "unix:%s", paths[i]);
    breach |= report(name, rc, err);
  }
  return breach;
}

static int try_connect(const char *ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  char name[96];
  snprintf(name, sizeof name, "tcp:%s:%d", ip, port);
  if (fd < 0) return report(name, -1, errno);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  long rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  int err = errno;
  close(fd);
  return report(name, rc, err);
}

static int try_syscalls(void) {
  struct {
    const char *name;
    long nr;
    long a, b, c;
  } calls[] = {
      {"setns", SYS_setns, -1, 0, 0},
      {"umount2", SYS_umount2, (long)"/proc", 0, 0},
      {"pivot_root", SYS_pivot_root, (long)"/tmp", (long)"/tmp", 0},
      {"chroot", SYS_chroot, (long)"/tmp", 0, 0},
      {"personality", SYS_personality, 0x0040000 /* ADDR_NO_RANDOMIZE */, 0, 0},
      {"userfaultfd", SYS_userfaultfd, 0, 0, 0},
      {"perf_event_open", SYS_perf_event_open, 0, 0, -1},
      {"process_vm_readv", SYS_process_vm_readv, 1, 0, 0},
      {"kexec_load", SYS_kexec_load, 0, 0, 0},
      {"init_module", SYS_init_module, 0, 0, 0},
      {"finit_module", SYS_finit_module, -1, 0, 0},
      {"delete_module", SYS_delete_module, (long)"x", 0, 0},
      {"open_by_handle_at", SYS_open_by_handle_at, -1, 0, 0},
      {"name_to_handle_at", SYS_name_to_handle_at, -1, (long)"/", 0},
      {"clock_settime", SYS_clock_settime, 0, 0, 0},
      {"reboot", SYS_reboot, 0, 0, 0},
      {"swapon", SYS_swapon, (long)"/tmp/x", 0, 0},
      {"swapoff", SYS_swapoff, (long)"/tmp/x", 0, 0},
      {"io_uring_setup", SYS_io_uring_setup, 1, 0, 0},
      {"mq_open", SYS_mq_open, (long)"mindloop", O_CREAT | O_RDWR, 0600},
      {"mq_unlink", SYS_mq_unlink, (long)"mindloop", 0, 0},
  };
  int breach = 0;
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    errno = 0;
    long rc = syscall(calls[i].nr, calls[i].a, calls[i].b, calls[i].c, 0, 0);
    int err = errno;
    /* seccomp answers EPERM before the kernel looks at the (deliberately bad) arguments; any
       other errno (EFAULT, EINVAL, EBADF…) means the call reached the kernel. */
    if (rc < 0 && err == EPERM) {
      printf("%s denied %s\n", calls[i].name, strerror(err));
    } else {
      printf("%s reached rc=%ld errno=%s\n", calls[i].name, rc, strerror(err));
      breach = 1;
    }
  }
  return breach;
}

static int memhog(long mb) {
  for (long i = 0; i < mb; i++) {
    char *p = malloc(1 << 20);
    if (!p) {
      printf("memhog denied malloc failed at %ld MB\n", i);
      return 0;
    }
    memset(p, 1, 1 << 20);
  }
  printf("memhog ok allocated %ld MB\n", mb);
  return 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: mindloop-probe <probe> [args]\n");
    return 2;
  }
  const char *p = argv[1];
  if (!strcmp(p, "mount")) return try_mount();
  if (!strcmp(p, "unshare")) return try_unshare();
  if (!strcmp(p, "keyctl")) return try_keyctl();
  if (!strcmp(p, "bpf")) return try_bpf();
  if (!strcmp(p, "ptrace")) return try_ptrace();
  if (!strcmp(p, "proc_mem")) return try_proc_mem();
  if (!strcmp(p, "release_agent")) return try_release_agent();
  if (!strcmp(p, "proc_self_exe")) return try_proc_self_exe();
  if (!strcmp(p, "docker_socket")) return try_docker_socket();
  if (!strcmp(p, "connect") && argc == 4) return try_connect(argv[2], atoi(argv[3]));
  if (!strcmp(p, "syscalls")) return try_syscalls();
  if (!strcmp(p, "memhog") && argc == 3) return memhog(atol(argv[2]));
  fprintf(stderr, "unknown probe %s\n", p);
  return 2;
}
