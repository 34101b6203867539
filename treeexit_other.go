//go:build !linux || proc_otherunix

package proc

import (
	"os/exec"
	"time"
)

// exitWatchable: no record is handed over (begin).
const exitWatchable = false

// exitWatch: without pidfds every record has an exit goroutine of its
// own (lifecycle.go).
type exitWatch struct{}

func (*exitWatch) watch(*Process, *pump) bool { return false }

func (*endHandoff) pipeEnded() bool { return false }

func (*exitWatch) forget(*Process) {}

func (*exitWatch) close() {}

func (p *Process) askPidfd(*exec.Cmd) {}

func (p *Process) dropPidfd() {}

func exitedNow(int) bool { return true }

func exitsWithin(int, int, time.Duration) bool { return true }
