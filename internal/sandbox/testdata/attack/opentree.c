#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <linux/mount.h>
/* ot DIR REL MODE: in a new user+mount namespace (no ID map, no exec: the
   capabilities there stay), open_tree(DIR, OPEN_TREE_CLONE), then
   fchmodat(tree, REL, MODE) and utimensat(tree, REL, {1,1}). */
int main(int argc, char **argv) {
	if (argc < 4) return 2;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) { printf("unshare: %s\n", strerror(errno)); return 1; }
	int tree = syscall(SYS_open_tree, AT_FDCWD, argv[1], OPEN_TREE_CLONE | O_CLOEXEC);
	if (tree < 0) { printf("open_tree: %s\n", strerror(errno)); return 1; }
	int fd = openat(tree, argv[2], O_PATH | O_CLOEXEC);
	if (fd >= 0) {
		char p[64], buf[4096] = {0};
		snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
		readlink(p, buf, sizeof buf - 1);
		printf("sees: %s\n", buf);
	}
	long mode = strtol(argv[3], 0, 8);
	printf("fchmodat: %s\n", fchmodat(tree, argv[2], mode, 0) ? strerror(errno) : "ok");
	struct timespec ts[2] = {{1, 0}, {1, 0}};
	printf("utimensat: %s\n", utimensat(tree, argv[2], ts, 0) ? strerror(errno) : "ok");
	printf("fchownat: %s\n", fchownat(tree, argv[2], 0, 0, 0) ? strerror(errno) : "ok");
	/* The same by the working directory: fchdir into the detached tree
	   and a relative chmod (the host opens /proc/<pid>/cwd). */
	if (fchdir(tree) == 0)
		printf("cwd-chmod: %s\n", chmod(argv[2], 0640) ? strerror(errno) : "ok");
	return 0;
}
