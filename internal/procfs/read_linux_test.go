package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadFileAt pins ReadFileAt and ReadShowAt against os.ReadFile: a
// file larger than the buffer given is read whole (by path and relative
// to a directory descriptor), a show that fits is read in one read, and a
// missing file is os.ErrNotExist.
func TestReadFileAt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := []byte(strings.Repeat("0123456789abcdef\n", 1000))
	if err := os.WriteFile(filepath.Join(dir, "big"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dirfd)
	for _, size := range []int{0, 1, 512, 64 << 10} {
		for name, read := range map[string]func(int, string, []byte) ([]byte, error){"ReadFileAt": ReadFileAt, "ReadShowAt": ReadShowAt} {
			got, err := read(unix.AT_FDCWD, filepath.Join(dir, "big"), make([]byte, 0, size))
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s(path, %d bytes of buffer) = %d bytes, %v; want the file's %d bytes", name, size, len(got), err, len(want))
			}
			got, err = read(dirfd, "big", make([]byte, 0, size))
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s(dirfd, %d bytes of buffer) = %d bytes, %v; want the file's %d bytes", name, size, len(got), err, len(want))
			}
		}
	}
	// A show: /proc/self/stat is made by one show, shorter than a page.
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	got, err := ReadShowAt(unix.AT_FDCWD, "/proc/self/stat", make([]byte, 0, 4096))
	if err != nil || len(got) == 0 || !strings.HasPrefix(string(got), string(stat[:strings.IndexByte(string(stat), ')')+1])) {
		t.Errorf("ReadShowAt(/proc/self/stat) = %q, %v; want the stat line", got, err)
	}
	if _, err := ReadFileAt(dirfd, "absent", nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFileAt(absent) = %v; want an error wrapping os.ErrNotExist", err)
	}
}
