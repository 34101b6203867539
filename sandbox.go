package proc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/xerrors"
)

// Sandbox restricts a child and everything it starts: which files it
// may change, and whether it may use the network. The kernel enforces it,
// with no helper binary and no root needed; a policy that cannot be
// enforced exactly fails the start with ErrUnsupported saying what is
// missing, never silently weaker. nil: unrestricted.
//
// Everywhere the tree may read and execute, but in terminals other than
// the record's own. Implied, never more: /dev/null, /dev/zero and
// /dev/full read-write, /dev/ptmx, and with TTY the record's own terminal
// (its /dev/pts/N and /dev/tty) with its ioctls. No temporary directory
// is added: list /tmp, or a private one, if the command needs it. The
// tree may not set a setuid or setgid bit, an extended attribute (ACLs
// included) or an inode flag anywhere, push input into a terminal
// (TIOCSTI), use the kernel keyring, clone into another cgroup, or change
// the limits, priority or affinity of a process outside its tree. A
// refused operation fails with the kernel's EACCES or EPERM (ENOSYS for
// clone3, so that libc and Go fall back to clone), and Info.Sandbox says
// what was enforced.
//
// Linux (6.2, Landlock ABI 3, or newer): Landlock for files (and TCP
// from ABI 4), a seccomp filter (which routes chmod, chown and the times
// calls to the host, which does them only beneath a writable root),
// no-new-privileges, and no capabilities even for a root host's child,
// applied to one thread of the host that forks the child and then ends,
// so that the rest of the host is never restricted; from Landlock ABI 6
// the tree cannot signal processes outside it (the host above all).
// macOS: sandbox-exec with a generated profile. Windows and other
// systems: ErrUnsupported.
//
// What cannot be expressed: a read-only hole inside a writable root
// (everything beneath a root is writable), and reads are restricted only
// for terminals. What stays reachable: System V IPC of the same user, and
// binding abstract Unix socket names with Network false.
type Sandbox struct {
	// WritableRoots are absolute paths of existing directories or files.
	// The tree may create, change, rename and delete beneath them, and
	// change the mode (never to setuid or setgid), owner and times of what
	// lies beneath them; everywhere else it may read and execute, and
	// nothing more. A relative, empty or missing root is ErrInvalid, and so
	// on Linux is a root that passes through a symbolic link (the error
	// names the real path, which the caller may pass instead).
	WritableRoots []string `json:"writable_roots,omitempty"`
	// Network false denies every socket but AF_UNIX stream sockets: no
	// IPv4/IPv6 (TCP, UDP, raw, MPTCP), no io_uring, and no connecting to
	// a Unix socket by path (a host daemon's). On Linux below Landlock ABI
	// 9 the kernel cannot tell a socket outside the sandbox from one the
	// tree made, so every connect(2) and every AF_UNIX datagram socket is
	// refused — stricter than needed, never weaker; socketpair and pipes
	// work. Info.Sandbox says which ("no connect"). true leaves the
	// network as it is.
	Network bool `json:"network,omitempty"`
	// Listen, with Network false, lets the tree bind and listen on TCP
	// ports (any port, on any address: the kernel's rule is by port, so a
	// server bound to 0.0.0.0 is as reachable as an unsandboxed one; bind
	// 127.0.0.1 to keep it local). Every other socket stays refused.
	// Linux: Landlock ABI 4 or newer, else ErrUnsupported.
	Listen bool `json:"listen,omitempty"`
	// ConnectPorts, with Network false, lets the tree connect to these TCP
	// ports (1-65535), on any address: with Listen, a sandboxed dev server
	// and the sandboxed client that tests it. UDP, raw sockets and every
	// other connection stay refused, and so (on Linux below Landlock ABI
	// 9) are the tree's AF_UNIX sockets but socketpair's, so that no
	// connect reaches a host daemon's Unix socket. Linux: Landlock ABI 4
	// or newer, else ErrUnsupported.
	ConnectPorts []int `json:"connect_ports,omitempty"`
}

// validate refuses a bad policy before anything starts; where says whose.
// It returns the policy with its roots cleaned, or nil for nil.
func (s *Sandbox) validate(where string) (*Sandbox, error) {
	if s == nil {
		return nil, nil
	}
	roots := make([]string, 0, len(s.WritableRoots))
	for _, root := range s.WritableRoots {
		switch {
		case root == "":
			return nil, xerrors.Errorf("start: %s.WritableRoots holds an empty path: %w", where, ErrInvalid)
		case strings.ContainsRune(root, 0):
			return nil, xerrors.Errorf("start: %s.WritableRoots: %q contains NUL: %w", where, root, ErrInvalid)
		case !filepath.IsAbs(root):
			return nil, xerrors.Errorf("start: %s.WritableRoots: %s is not absolute: %w", where, quotePath(root), ErrInvalid)
		}
		if _, err := os.Stat(root); err != nil {
			return nil, xerrors.Errorf("start: %s.WritableRoots: %s: %v: %w", where, quotePath(root), err, ErrInvalid)
		}
		if real, linked := rootThroughSymlink(root); linked {
			// A tree could have planted the link to redirect this start's
			// root: the caller names the real path itself.
			return nil, xerrors.Errorf("start: %s.WritableRoots: %s passes through a symbolic link (it resolves to %s): %w",
				where, quotePath(root), quotePath(real), ErrInvalid)
		}
		roots = append(roots, filepath.Clean(root))
	}
	if s.Network && (s.Listen || len(s.ConnectPorts) > 0) {
		return nil, xerrors.Errorf("start: %s: Listen and ConnectPorts open parts of a network that Network already opens: %w", where, ErrInvalid)
	}
	for _, port := range s.ConnectPorts {
		if port < 1 || port > 65535 {
			return nil, xerrors.Errorf("start: %s.ConnectPorts: %d is not a port (1-65535): %w", where, port, ErrInvalid)
		}
	}
	return &Sandbox{WritableRoots: roots, Network: s.Network, Listen: s.Listen, ConnectPorts: slices.Clone(s.ConnectPorts)}, nil
}

// sameSandbox reports whether two requested policies are the same, for
// StartOrGet; nil (the default) equals only nil.
func sameSandbox(a, b *Sandbox) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Network == b.Network && a.Listen == b.Listen && slices.Equal(a.WritableRoots, b.WritableRoots) &&
		slices.Equal(a.ConnectPorts, b.ConnectPorts)
}

// clone copies s, so that a caller changing its request later changes
// nothing here.
func (s *Sandbox) clone() *Sandbox {
	if s == nil {
		return nil
	}
	return &Sandbox{WritableRoots: slices.Clone(s.WritableRoots), Network: s.Network, Listen: s.Listen,
		ConnectPorts: slices.Clone(s.ConnectPorts)}
}

// sandboxCache holds a Manager's first-use sandbox probe: it runs once,
// under mu, on the first start that asks for a sandbox; its answer is kept
// unless it was an error of the moment (out of descriptors, say), not
// a missing feature. A leaf lock.
type sandboxCache struct {
	steps sandboxSteps // per OS; tests replace a step before the first start

	mu     sync.Mutex
	done   bool
	kernel sandboxKernel // per OS: what the probe found
	err    error
}

// close lets go of what the probe's answer keeps (the sandbox's read
// rules); Close calls it once no start is under way.
func (c *sandboxCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done && c.err == nil {
		closeSandboxKernel(c.kernel)
	}
}

// sandboxFor resolves the policy of req (its own, else Options.Sandbox),
// validates it and probes the OS once; it returns nil for no sandbox,
// else the start's sandbox and what Info.Sandbox says. It starts nothing.
func (m *Manager) sandboxFor(req StartRequest) (*sandboxStart, string, error) {
	sb, where := req.Sandbox, "StartRequest.Sandbox"
	if sb == nil {
		sb, where = m.opts.Sandbox, "Options.Sandbox"
	}
	sb, err := sb.validate(where)
	if sb == nil || err != nil {
		return nil, "", err
	}
	c := &m.sandbox
	c.mu.Lock()
	lasting := true // a kept answer is
	if !c.done {
		c.kernel, c.err, lasting = probeSandbox(c.steps)
		c.done = lasting
	}
	kernel, err := c.kernel, c.err
	c.mu.Unlock()
	switch {
	case err != nil && !lasting:
		// Not a missing feature: the next start asks again.
		return nil, "", xerrors.Errorf("start: %w", err)
	case err != nil:
		return nil, "", xerrors.Errorf("start: %v: %w", err, ErrUnsupported)
	}
	if err := kernelAllows(kernel, sb); err != nil {
		return nil, "", xerrors.Errorf("start: %s: %v: %w", where, err, ErrUnsupported)
	}
	return &sandboxStart{sb: sb, kernel: kernel}, describeSandbox(kernel, sb), nil
}
