//go:build linux

package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ownRules returns this host's Support with read and write layers of its
// own, closed with the test: what it keeps is the test's to look at.
func ownRules(t *testing.T) Support {
	t.Helper()
	sup := support(t)
	sup.Reads = &ReadRules{}
	t.Cleanup(sup.Reads.Close)
	return sup
}

// runWith starts the ops helper with args under p and sup, and returns
// its result for each argument.
func runWith(t *testing.T, sup Support, p Policy, args ...string) map[string]string {
	t.Helper()
	cmd := opsCmd(nil, args...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	h, err := start(cmd, cmd.Start, p, sup, true)
	w.Close()
	if err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	h.Release()
	defer h.Stop()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read the output of %v: %v", cmd.Args, err)
	}
	_ = cmd.Wait()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(args) {
		t.Fatalf("%d result lines for %d operations (%v):\n%s", len(lines), len(args), cmd.ProcessState, out)
	}
	got := map[string]string{}
	for i, a := range args {
		_, got[a], _ = strings.Cut(lines[i], ": ")
	}
	return got
}

// kept returns the ruleset descriptors sup keeps as write layers.
func kept(sup Support) []int {
	sup.Reads.mu.Lock()
	defer sup.Reads.mu.Unlock()
	var fds []int
	for _, k := range sup.Reads.writes {
		fds = append(fds, k.ruleset.fd)
	}
	return fds
}

// TestWriteLayerKept: starts of one policy share a write layer while its
// root is the same directory, and one made again once another directory
// takes the root's path: the kept layer's rule holds the directory that
// moved away.
func TestWriteLayerKept(t *testing.T) {
	t.Parallel()
	sup := ownRules(t)
	base := t.TempDir()
	root, moved := filepath.Join(base, "root"), filepath.Join(base, "moved")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	p := Policy{WritableRoots: []string{root}}
	for i, name := range []string{"a", "b"} {
		arg := "create=" + filepath.Join(root, name)
		if got := runWith(t, sup, p, arg)[arg]; got != "ok" {
			t.Fatalf("start %d: %s: %s; want ok", i, arg, got)
		}
	}
	first := kept(sup)
	if len(first) != 1 {
		t.Fatalf("%d write layers kept after two starts of one policy; want 1", len(first))
	}
	if err := os.Rename(root, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	inNew, inMoved := "create="+filepath.Join(root, "c"), "create="+filepath.Join(moved, "c")
	got := runWith(t, sup, p, inNew, inMoved)
	if got[inNew] != "ok" || got[inMoved] != "EACCES" {
		t.Errorf("after the root was replaced: %s: %s, %s: %s; want ok, EACCES (the new directory is the root)",
			inNew, got[inNew], inMoved, got[inMoved])
	}
	if now := kept(sup); len(now) != 1 {
		t.Errorf("%d write layers kept after the root was replaced; want 1 (made again)", len(now))
	}
}

// TestWriteLayerMount: the kept write layers are dropped once a mount
// comes or goes (the read layer sees it), so that a root that is a mount
// replaced since, whose new root may carry the same device and inode
// numbers, gets a layer made again: the kept rule's object ended with
// its file system.
func TestWriteLayerMount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs root")
	}
	sup := ownRules(t)
	root, other := t.TempDir(), t.TempDir()
	mount := func(dir string) {
		t.Helper()
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount a tmpfs on %s: %v", dir, err)
		}
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	}
	mount(root)
	p := Policy{WritableRoots: []string{root}}
	arg := "create=" + filepath.Join(root, "a")
	if got := runWith(t, sup, p, arg)[arg]; got != "ok" {
		t.Fatalf("%s: %s; want ok", arg, got)
	}
	if err := unix.Unmount(root, 0); err != nil {
		t.Fatal(err)
	}
	mount(root)
	arg = "create=" + filepath.Join(root, "b")
	if got := runWith(t, sup, p, arg)[arg]; got != "ok" {
		t.Errorf("on the tmpfs mounted again: %s: %s; want ok", arg, got)
	}
	if n := len(kept(sup)); n != 1 {
		t.Fatalf("%d write layers kept; want 1", n)
	}
	// A mount elsewhere: the next read layer drops the kept write layers.
	mount(other)
	fd, err := readLayer(Policy{}, sup.Reads)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if n := len(kept(sup)); n != 0 {
		t.Errorf("%d write layers kept after a mount came; want 0", n)
	}
}

// TestWriteLayerDevices: the kept write layers are dropped once /dev
// changes (an entry made or removed, as when a device is replaced), and
// one kept again is made for the /dev of now: layers does not look at
// the devices' objects, only at /dev and the mounts (refresh). An entry
// made in / drops them too (/dev moved away and made again is one).
func TestWriteLayerDevices(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("makes an entry in /dev: needs root")
	}
	sup := ownRules(t)
	take := func() {
		t.Helper()
		lay, err := layers(Policy{}, sup.ABI, sup.Reads)
		if err != nil {
			t.Fatal(err)
		}
		lay.release()
	}
	take()
	take()
	if n := len(kept(sup)); n != 1 {
		t.Fatalf("%d write layers kept after two starts of one policy; want 1", n)
	}
	entry := filepath.Join("/dev", "proc-sandbox-test-"+strconv.Itoa(os.Getpid()))
	f, err := os.OpenFile(entry, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { _ = os.Remove(entry) })
	fd, err := readLayer(Policy{}, sup.Reads)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if n := len(kept(sup)); n != 0 {
		t.Errorf("%d write layers kept after an entry came in /dev; want 0", n)
	}
	take()
	if n := len(kept(sup)); n != 1 {
		t.Errorf("%d write layers kept after a start; want 1 (made again)", n)
	}
	dir := filepath.Join("/", "proc-sandbox-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	fd, err = readLayer(Policy{}, sup.Reads)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if n := len(kept(sup)); n != 0 {
		t.Errorf("%d write layers kept after an entry came in /; want 0", n)
	}
}

// TestWriteLayersBounded: a ReadRules keeps the write layers of the last
// maxKeptWrites policies and closes the others, and all of them when it
// is closed. Not parallel: it counts this process's rulesets.
func TestWriteLayersBounded(t *testing.T) {
	sup := ownRules(t)
	before := rulesetsOpen(t)
	base := t.TempDir()
	for try, made := 1, 0; ; try++ {
		var read *lent
		for range maxKeptWrites + 2 {
			root := filepath.Join(base, strconv.Itoa(made))
			made++
			if err := os.Mkdir(root, 0o700); err != nil {
				t.Fatal(err)
			}
			fd, err := writeLayer(Policy{WritableRoots: []string{root}}, sup.ABI, sup.Reads)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
			sup.Reads.mu.Lock()
			again := read != nil && sup.Reads.ruleset != read
			read = sup.Reads.ruleset
			sup.Reads.mu.Unlock()
			if again {
				// A mount came or went on this host (another program's),
				// or / or /dev changed: the kept layers were dropped.
				read = nil
				break
			}
		}
		if read != nil {
			break
		}
		if try == 20 {
			t.Fatalf("the kept layers were dropped %d times: the mounts, / or /dev keep changing", try)
		}
	}
	// writeLayer looks at /dev first (refresh), which keeps the read layer.
	if n, open := len(kept(sup)), rulesetsOpen(t)-before; n != maxKeptWrites || open != maxKeptWrites+1 {
		t.Errorf("after %d policies: %d write layers kept, %d rulesets open; want %d, and the read layer",
			maxKeptWrites+2, n, open, maxKeptWrites)
	}
	sup.Reads.Close()
	if n, open := len(kept(sup)), rulesetsOpen(t)-before; n != 0 || open != 0 {
		t.Errorf("after Close: %d write layers kept, %d rulesets open; want none", n, open)
	}
	if fd, err := writeLayer(Policy{}, sup.ABI, sup.Reads); err == nil {
		unix.Close(fd)
		t.Error("writeLayer after Close = nil; want an error")
	}
	if lay, err := layers(Policy{}, sup.ABI, sup.Reads); err == nil {
		lay.release()
		t.Error("layers after Close = nil; want an error")
	}
}

// TestLayersLent: starts share the layers a ReadRules keeps, lent with
// no copy, and a lent layer stays open while a start holds it, even once
// the ReadRules dropped it (closed here), until the last start gave it
// back. Not parallel: it counts this process's rulesets.
func TestLayersLent(t *testing.T) {
	sup := ownRules(t)
	before := rulesetsOpen(t)
	var first, second startLayers
	for try := 1; ; try++ {
		var err error
		if first, err = layers(Policy{}, sup.ABI, sup.Reads); err != nil {
			t.Fatal(err)
		}
		if second, err = layers(Policy{}, sup.ABI, sup.Reads); err != nil {
			first.release()
			t.Fatal(err)
		}
		if first.lr == second.lr && first.lw == second.lw {
			break
		}
		// A mount came or went on this host in between (another
		// program's), or / or /dev changed: the layers were made again.
		first.release()
		second.release()
		if try == 5 {
			t.Fatalf("the layers were made again between two starts %d times: the mounts, / or /dev keep changing", try)
		}
	}
	if first.read != second.read || first.write != second.write {
		t.Errorf("two starts got layers %d, %d and %d, %d; want the same, lent", first.read, first.write, second.read, second.write)
	}
	if open := rulesetsOpen(t) - before; open != 2 {
		t.Errorf("%d rulesets open with two starts holding the layers; want 2 (no copies)", open)
	}
	sup.Reads.Close()
	first.release()
	if open := rulesetsOpen(t) - before; open != 2 {
		t.Errorf("%d rulesets open after Close while a start holds the layers; want 2", open)
	}
	second.release()
	if open := rulesetsOpen(t) - before; open != 0 {
		t.Errorf("%d rulesets open once the last start gave the layers back; want 0", open)
	}
}

// rulesetsOpen counts this process's open Landlock rulesets.
func rulesetsOpen(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == "anon_inode:[landlock-ruleset]" {
			n++
		}
	}
	return n
}
