//go:build linux && !proc_otherunix

package proc

import (
	"errors"
	"os"
	"os/exec"

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

// describeSandbox says what a policy is enforced with, for Info.Sandbox.
func describeSandbox(k sandboxKernel, sb *Sandbox) string { return k.Describe(sb.Network) }

// sandboxStart is a start's sandbox: the policy and what the probe found.
type sandboxStart struct {
	sb     *Sandbox
	kernel sandboxKernel
}

// start runs fork (cmd.Start, from lifecycle.go's fork) on a restricted
// thread, and returns the function that lets the held child go, to call
// once the child was registered (it must be called whenever start
// succeeded).
//
// Where setup wants the child killed with the host until its group is
// registered (group mode with a watchdog), setupTree gave it no Pdeathsig
// (it would fire when the restricted thread ends) but a pending mark in
// the watchdog's file, and asks the sandbox (exitKill) for the held
// child's PTRACE_O_EXITKILL from the exec stop on, cleared by the release.
func (s *sandboxStart) start(setup *treeSetup, cmd *exec.Cmd, fork func() error, tty bool) (release func(), err error) {
	p := sandbox.Policy{WritableRoots: s.sb.WritableRoots, Network: s.sb.Network, ExitKill: setup.exitKill()}
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
	return h.Release, nil
}
