package cgroup2

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc/internal/procfs"
)

// Mount finds the cgroup v2 mount in /proc/self/mountinfo: its mount point
// and the cgroup path it shows as its root.
func Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads mountinfo lines ("id parent major:minor root
// mountpoint options ... - fstype source super") and returns the first
// cgroup2 mount.
func parseMountinfo(r io.Reader) (mount, root string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 1 || after[0] != "cgroup2" {
			continue
		}
		return procfs.UnescapeMount(fields[4]), procfs.UnescapeMount(fields[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// Self is this process's cgroup v2 path (the "0::" line of
// /proc/self/cgroup), relative to the mount's root.
func Self() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	if path, ok := parseCgroupFile(data); ok {
		return path, nil
	}
	return "", errors.New("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// parseCgroupFile returns the cgroup v2 path of a /proc/<pid>/cgroup file:
// the rest of its "0::" line.
func parseCgroupFile(data []byte) (string, bool) {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest, true
		}
	}
	return "", false
}

// IsDir reports whether dir is a directory of a cgroup v2 file system.
func IsDir(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "cgroup.procs"))
	return err == nil
}
