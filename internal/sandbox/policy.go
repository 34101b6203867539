package sandbox

// Policy is what a child and everything it starts may do: read and
// execute everywhere, change files only beneath WritableRoots (and the
// devices below), and use the network only with Network.
type Policy struct {
	// WritableRoots are absolute paths of existing directories or files;
	// the caller validated them.
	WritableRoots []string
	// Network leaves the network as it is; false refuses every socket but
	// AF_UNIX stream and seqpacket ones, every connect(2) and io_uring,
	// but for Listen and ConnectPorts.
	Network bool
	// Listen (with Network false) lets the tree bind and listen on TCP
	// ports, any port (Landlock ABI 4).
	Listen bool
	// ConnectPorts (with Network false) lets the tree connect to these TCP
	// ports, on any address (Landlock ABI 4). The tree's AF_UNIX sockets
	// other than socketpair's are refused then, so that a connect(2)
	// cannot reach a host daemon's Unix socket.
	ConnectPorts []int
	// TTY is the child's terminal device (/dev/pts/N), which it may read,
	// write and control (ioctls) together with /dev/tty; "" without one.
	TTY string
	// ExitKill (Linux) kills the child if the host dies from its exec
	// stop until [Held.Release], or with Register until Register returned
	// (PTRACE_O_EXITKILL). It cannot cover the instants from the fork to
	// that stop (the option can be set only on a stopped tracee): a
	// caller that must not lose the child to the host's death then needs
	// a guard of its own (proc: a pending mark in its watchdog's file).
	ExitKill bool
	// Register (Linux), if set, is called with the child's PID on the
	// restricted thread once the child is held at its exec stop (and in
	// its cgroup), under ExitKill if set; the thread then lets the child
	// go at once, without waiting for [Held.Release]. If it fails, the
	// child is killed while still held and Start fails with its error.
	// It is not called for a child that died before its stop. It runs
	// restricted: it may use descriptors opened before, but must open
	// nothing and start nothing.
	Register func(pid int) error
}

// UnsupportedError says that the kernel (or the host) cannot enforce a
// policy: which step of the probe failed and what to change. The caller
// wraps it in its own "unsupported" sentinel.
type UnsupportedError struct {
	Step string // "landlock", "seccomp", "hold" or "capabilities"
	Msg  string // what is missing and what to change
	Err  error  // the system call's error, if one failed
}

func (e *UnsupportedError) Error() string {
	s := "sandbox " + e.Step + ": " + e.Msg
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *UnsupportedError) Unwrap() error { return e.Err }
