//go:build linux

package sandbox

import (
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// What a Manager keeps for its sandboxed starts (ReadRules): the
// Landlock read layer of starts without a terminal and the write layers
// of the last few policies, made again when what their rules hold may
// have changed, which starts borrow (lent), so that a start needs
// neither a layer nor a copy of its own; and the watch over its trees'
// seccomp listeners (listeners, watch_linux.go).

// startLayers are the two Landlock layers of a start (descriptors to
// enforce), from layers: lent by a ReadRules (r), or made for this start
// (r nil). release gives them back, or closes them, once they were
// enforced.
type startLayers struct {
	read, write int
	r           *ReadRules
	lr, lw      *lent // with r: what read and write were lent from
}

// release ends the start's hold on its layers; enforced rules stay.
func (l startLayers) release() {
	if l.r == nil {
		unix.Close(l.read)
		unix.Close(l.write)
		return
	}
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	l.lr.giveBack()
	l.lw.giveBack()
}

// layers returns the read and write layers for p with ABI abi, which the
// caller releases: for a start without a terminal, with r, the layers r
// keeps, lent (readLayer, writeLayer say which), both decided under one
// hold of r's lock, after one look at whether /, /dev or the mounts
// changed (refresh); otherwise layers made for this start.
func layers(p Policy, abi int, r *ReadRules) (startLayers, error) {
	if p.TTY != "" || r == nil {
		read, err := readLayer(p, r)
		if err != nil {
			return startLayers{}, err
		}
		write, _, err := newRuleset(p, abi)
		if err != nil {
			unix.Close(read)
			return startLayers{}, err
		}
		return startLayers{read: read, write: write}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fresh("landlock layers"); err != nil {
		return startLayers{}, err
	}
	lw, err := r.write(p, abi)
	if err != nil {
		return startLayers{}, err
	}
	return startLayers{read: r.ruleset.lend(), write: lw.lend(), r: r, lr: r.ruleset, lw: lw}, nil
}

// lent is a ruleset a ReadRules keeps and lends to the starts that
// enforce it: a start holds it from layers until it was enforced
// (release), and one no longer kept (dropped: replaced, or its ReadRules
// closed) is closed once no start holds it. Its ReadRules' mu guards
// its fields.
type lent struct {
	fd      int // -1 once closed
	users   int // starts holding it
	dropped bool
}

// lend returns the descriptor to a start, which gives it back once it
// was enforced. Called with mu held.
func (l *lent) lend() int {
	l.users++
	return l.fd
}

// giveBack ends a start's hold. Called with mu held.
func (l *lent) giveBack() {
	l.users--
	l.closeUnused()
}

// drop ends keeping the ruleset: it is closed now, or once the last
// start holding it gives it back. Called with mu held.
func (l *lent) drop() {
	l.dropped = true
	l.closeUnused()
}

func (l *lent) closeUnused() {
	if l.dropped && l.users == 0 && l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}

// writeLayer returns the write layer for p with ABI abi (a descriptor
// the caller closes): a copy of the one r keeps, as layers would lend
// it, or one made for a start with a terminal or without r. For tests.
func writeLayer(p Policy, abi int, r *ReadRules) (int, error) {
	if p.TTY != "" || r == nil {
		fd, _, err := newRuleset(p, abi)
		return fd, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fresh("landlock write layer"); err != nil {
		return -1, err
	}
	l, err := r.write(p, abi)
	if err != nil {
		return -1, err
	}
	fd, err := unix.FcntlInt(uintptr(l.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, xerrors.Errorf("landlock write layer: %w", err)
	}
	return fd, nil
}

// write returns the kept write layer for p with ABI abi, a start without
// a terminal, made now if need be. A layer is the same for
// every start of the same policy whose roots and devices are the same
// objects (a rule holds the object it was added on, not its path): r
// keeps the layers of the last few policies, with the objects their
// roots' rules hold, and a start gets a kept layer only if every root
// names the same object now, as a layer made now would hold; for any
// other start one is made (and r keeps it). The devices need no
// such look: they are entries of /dev (or, for /dev/ptmx, a devpts
// mount's), and refresh drops every kept layer when /dev or the mounts
// changed, so a kept layer's devices are what their paths name now.
// Called with mu held, after refresh.
func (r *ReadRules) write(p Policy, abi int) (*lent, error) {
	key := writeKey(p, abi)
	now, known := rootObjects(p)
	if i := slices.IndexFunc(r.writes, func(k keptWrite) bool { return k.key == key }); i >= 0 {
		if known && slices.Equal(r.writes[i].ids, now) {
			return r.writes[i].ruleset, nil
		}
		// A root names another object now.
		r.writes[i].ruleset.drop()
		r.writes = slices.Delete(r.writes, i, i+1)
	}
	fd, ids, err := newRuleset(p, abi)
	if err != nil {
		return nil, err
	}
	if len(r.writes) == maxKeptWrites {
		r.writes[0].ruleset.drop()
		r.writes = slices.Delete(r.writes, 0, 1)
	}
	l := &lent{fd: fd}
	r.writes = append(r.writes, keptWrite{key: key, ids: ids[:len(p.WritableRoots)], ruleset: l})
	return l, nil
}

// maxKeptWrites bounds the write layers a ReadRules keeps (a descriptor
// each): the distinct policies a Manager starts with are usually few.
const maxKeptWrites = 8

// keptWrite is a write layer kept for the policy key (writeKey), whose
// roots' rules hold the objects ids (newRuleset).
type keptWrite struct {
	key     string
	ids     []fileID
	ruleset *lent
}

// writeKey is what the write layer of p depends on besides the objects
// its paths name: the ABI, the network, the ports and the roots (which
// hold no NUL).
func writeKey(p Policy, abi int) string {
	key := strconv.AppendInt(nil, int64(abi), 10)
	key = append(key, boolByte(p.Network), boolByte(p.Listen))
	for _, port := range p.ConnectPorts {
		key = strconv.AppendInt(append(key, ','), int64(port), 10)
	}
	for _, root := range p.WritableRoots {
		key = append(append(key, 0), root...)
	}
	return string(key)
}

func boolByte(b bool) byte {
	if b {
		return '1'
	}
	return '0'
}

// rootObjects reports the objects p's roots name now, in newRuleset's
// order, as addRule opens them (following symbolic links); known is
// false if a root cannot be found (newRuleset then says why).
func rootObjects(p Policy) (ids []fileID, known bool) {
	ids = make([]fileID, 0, len(p.WritableRoots))
	var st unix.Stat_t
	for _, root := range p.WritableRoots {
		if unix.Stat(root, &st) != nil {
			return nil, false
		}
		ids = append(ids, idOf(&st))
	}
	return ids, true
}

// readLayer returns the read layer for p (a descriptor the caller
// closes): a copy of the one r keeps (for tests: layers lends it), or,
// for a record with a terminal or without r, one made for it.
func readLayer(p Policy, r *ReadRules) (int, error) {
	if p.TTY == "" && r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.fresh("landlock read layer"); err != nil {
			return -1, err
		}
		fd, err := unix.FcntlInt(uintptr(r.ruleset.fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return -1, xerrors.Errorf("landlock read layer: %w", err)
		}
		return fd, nil
	}
	entries, err := readEntries()
	if err != nil {
		return -1, err
	}
	defer closeEntries(entries)
	return makeReadLayer(entries, p.TTY)
}

// ReadRules keeps the Landlock read layer of starts without a terminal
// (four descriptors: the layer; / and /dev, and the mount table, to see
// them change), made at the first such start and again when /, /dev or
// the mounts change, and the write layers of the last few policies of
// such starts (a descriptor each), and lends them to starts (layers);
// and the watch over the seccomp listeners of its starts' trees (an
// epoll instance, made at the first start). The zero value is ready;
// [Probe] gives each answer one. Its owner calls Close when it starts no
// more (a Manager's Close).
type ReadRules struct {
	// mu guards the fields below but watch, and the lent rulesets.
	mu      sync.Mutex
	dirs    []int          // / and /dev (O_PATH) when the layer was made; nil: none
	root    [2]unix.Stat_t // of dirs when the layer was made
	mounts  int            // /proc/self/mountinfo, to see mounts change; 0: not open
	ruleset *lent          // nil: none yet
	writes  []keptWrite    // write layers (write), oldest first
	closed  bool
	watch   listeners // has a lock of its own
}

// watcher returns the watch over the trees' listeners (nil for no r).
func (r *ReadRules) watcher() *listeners {
	if r == nil {
		return nil
	}
	return &r.watch
}

// Close closes the kept layers (one lent to a start still running when
// that start gives it back) and the watch (a tree still in it loses the
// host's service of its routed calls, as with [Held.Stop]); later starts
// with these rules fail.
func (r *ReadRules) Close() {
	r.watch.close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ruleset != nil {
		r.ruleset.drop()
		r.ruleset = nil
	}
	if r.mounts != 0 {
		unix.Close(r.mounts)
		r.mounts = 0
	}
	r.closeDirs()
	r.dropWrites()
	r.closed = true
}

// dropWrites drops the kept write layers. Called with mu held.
func (r *ReadRules) dropWrites() {
	for _, k := range r.writes {
		k.ruleset.drop()
	}
	r.writes = nil
}

// fresh is refresh for a start of what (named in the error): an error
// once r is closed. Called with mu held.
func (r *ReadRules) fresh(what string) error {
	if r.closed {
		return xerrors.New(what + ": closed")
	}
	return r.refresh()
}

// refresh reads the rules again if / or /dev changed since (an entry
// added or removed), or the mounts, and makes the kept layer. Called
// with mu held.
func (r *ReadRules) refresh() error {
	if r.mounts == 0 {
		fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return xerrors.Errorf("landlock read layer: %w", err)
		}
		r.mounts = fd
	}
	if r.ruleset != nil && r.unchanged() && !mountsChanged(r.mounts) {
		return nil
	}
	if r.ruleset != nil {
		r.ruleset.drop()
		r.ruleset = nil
	}
	// A mount that came or went may have replaced the objects the kept
	// write layers' rules hold, or ended them (an object of an unmounted
	// file system grants nothing).
	r.dropWrites()
	// Looked at before the entries are read, and the mount table read to
	// its end: a change from here on is seen at the next start.
	r.closeDirs()
	if err := r.openDirs(); err != nil {
		return err
	}
	if err := drainMounts(r.mounts); err != nil {
		return err
	}
	entries, err := readEntries()
	if err != nil {
		return err
	}
	defer closeEntries(entries)
	fd, err := makeReadLayer(entries, "")
	if err != nil {
		return err
	}
	r.ruleset = &lent{fd: fd}
	return nil
}

// openDirs opens / and /dev (O_PATH) and notes what they are now (root).
// Called with mu held.
func (r *ReadRules) openDirs() error {
	for i, dir := range []string{"/", "/dev"} {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return xerrors.Errorf("landlock read layer: %w", &os.PathError{Op: "open", Path: dir, Err: err})
		}
		r.dirs = append(r.dirs, fd)
		if err := unix.Fstat(fd, &r.root[i]); err != nil {
			return xerrors.Errorf("landlock read layer: %w", err)
		}
	}
	return nil
}

// closeDirs closes what openDirs opened. Called with mu held.
func (r *ReadRules) closeDirs() {
	for _, fd := range r.dirs {
		unix.Close(fd)
	}
	r.dirs = nil
}

// unchanged reports whether / and /dev have the entries they had when
// the layer was made (their times are the same), looked at through the
// descriptors opened then, which resolves no path: /dev moved away or
// replaced changes / too, and a mount over either changes the mount
// table. (A host that changes its own root directory keeps the layer of
// its old one, which grants reading less, never more.) Called with mu
// held.
func (r *ReadRules) unchanged() bool {
	if len(r.dirs) != len(r.root) {
		return false
	}
	var st unix.Stat_t
	for i, fd := range r.dirs {
		if unix.Fstat(fd, &st) != nil || !sameDir(st, r.root[i]) {
			return false
		}
	}
	return true
}

// mountsChanged reports whether the mount table changed since mounts (an
// open /proc/self/mountinfo) was last read to its end: the kernel flags
// the file then (POLLPRI).
func mountsChanged(mounts int) bool {
	pfd := []unix.PollFd{{Fd: int32(mounts), Events: unix.POLLPRI}}
	n, err := unix.Poll(pfd, 0)
	return err != nil || n > 0 && pfd[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// drainMounts reads mounts from its start to its end.
func drainMounts(mounts int) error {
	if _, err := unix.Seek(mounts, 0, 0); err != nil {
		return xerrors.Errorf("landlock read layer: %w", err)
	}
	buf := make([]byte, 16<<10)
	for {
		n, err := unix.Read(mounts, buf)
		if err != nil {
			return xerrors.Errorf("landlock read layer: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}

// sameDir reports whether a and b are the same directory, unchanged.
func sameDir(a, b unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}
