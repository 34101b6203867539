//go:build linux && !proc_otherunix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc/internal/sandbox"
)

// On Linux the sandbox is internal/sandbox: Landlock, seccomp,
// no-new-privileges and no capabilities on one thread that forks the
// child, holds it at its exec until that thread is gone, and ends.

type (
	sandboxSteps  = sandbox.Steps   // the probe's steps; nil ones ask the kernel
	sandboxKernel = sandbox.Support // the Landlock ABI found
)

// probeSandbox asks the kernel once; lasting is false for an error of
// the moment, which is not kept.
func probeSandbox(steps sandboxSteps) (k sandboxKernel, err error, lasting bool) {
	k, err = sandbox.Probe(steps)
	var u *sandbox.UnsupportedError
	return k, err, err == nil || errors.As(err, &u)
}

// rootThroughSymlink reports whether a component of root is a symbolic
// link, and if so where root leads. The root is opened with no symlink
// followed in any component, as the kernel sees it now.
func rootThroughSymlink(root string) (real string, linked bool) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, root, &how)
	if err == nil {
		unix.Close(fd)
		return "", false
	}
	if !errors.Is(err, unix.ELOOP) {
		return "", false // missing or unreadable: the caller's stat says so
	}
	real, err = filepath.EvalSymlinks(root)
	if err != nil {
		real = "an unresolvable path: " + err.Error()
	}
	return real, true
}

// describeSandbox says what a policy is enforced with, for Info.Sandbox.
func describeSandbox(k sandboxKernel, sb *Sandbox) string { return k.Describe(policyOf(sb)) }

// policyOf is sb's network part as internal/sandbox takes it.
func policyOf(sb *Sandbox) sandbox.Policy {
	return sandbox.Policy{Network: sb.Network, Listen: sb.Listen, ConnectPorts: sb.ConnectPorts}
}

// kernelAllows reports why the kernel k cannot enforce sb, if it cannot:
// TCP port rules (Listen, ConnectPorts) need Landlock ABI 4.
func kernelAllows(k sandboxKernel, sb *Sandbox) error {
	if (sb.Listen || len(sb.ConnectPorts) > 0) && k.ABI < 4 {
		return xerrors.Errorf("Listen and ConnectPorts need Landlock ABI 4 (Linux 6.7) for TCP port rules; this kernel has ABI %d", k.ABI)
	}
	return nil
}

// sandboxStart is a start's sandbox: the policy and what the probe found.
type sandboxStart struct {
	sb     *Sandbox
	kernel sandboxKernel
}

// start runs fork (cmd.Start, from lifecycle.go's fork) on a restricted
// thread, and returns the function that lets the held child go, to call
// once the child was registered (it must be called whenever start
// succeeded). The tree that started makes ends the host's service of the
// tree's routed calls when it is released (setup.stopSandbox).
//
// Where setup wants the child killed with the host until its group is
// registered (group mode with a watchdog), setupTree gave it no Pdeathsig
// (it would fire when the restricted thread ends) but a pending mark in
// the watchdog's file, and asks the sandbox (exitKill) for the held
// child's PTRACE_O_EXITKILL from the exec stop on, until the restricted
// thread has registered the group (registerHeld) and lets the child go.
// In cgroup mode the pending mark covers the child until it enters its
// cgroup at its exec stop.
func (s *sandboxStart) start(setup *treeSetup, cmd *exec.Cmd, fork func() error, tty bool) (release func(), err error) {
	p := policyOf(s.sb)
	p.WritableRoots = s.sb.WritableRoots
	if p.ExitKill = setup.exitKill(); p.ExitKill {
		p.Register = setup.registerHeld
	}
	if tty {
		// connect made the terminal's slave end the child's stdin.
		f, ok := cmd.Stdin.(*os.File)
		if !ok {
			return nil, xerrors.New("sandbox: the terminal is not the child's stdin")
		}
		p.TTY = f.Name()
	}
	h, err := sandbox.Start(cmd, fork, p, s.kernel)
	if err != nil {
		return nil, err
	}
	setup.stopSandbox = h.Stop
	return h.Release, nil
}

// closeSandboxKernel closes the read rules k keeps.
func closeSandboxKernel(k sandboxKernel) {
	if k.Reads != nil {
		k.Reads.Close()
	}
}
