package proc

import (
	"math"
	"time"

	"golang.org/x/xerrors"
)

// Limits bound what a process tree may take (design section 13). They are
// enforced by the operating system only, never by polling: on Linux by the
// record's cgroup (memory.max, pids.max, cpu.max), on Windows by its Job
// Object. A zero field is no limit. A non-zero limit that cannot be
// enforced fails the start with ErrUnsupported, naming what is missing; a
// negative one is ErrInvalid. Nothing is ever silently not enforced.
type Limits struct {
	// MemoryBytes caps the memory of the whole tree. When it is hit the
	// kernel kills a member (TreeUsage.OOMKills counts it; if it was the
	// child itself, the record ends 137 with Signal "SIGKILL").
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Pids caps the number of processes (and threads, on Linux) in the
	// tree. At the limit a fork fails inside the tree; nothing is killed.
	Pids int `json:"pids,omitempty"`
	// CPUs caps the tree's CPU bandwidth in cores (0.5, 2).
	CPUs float64 `json:"cpus,omitempty"`
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// orDefault returns l with every zero field taken from def. Both were
// validated, so no field is negative.
func (l Limits) orDefault(def Limits) Limits {
	return Limits{
		MemoryBytes: positiveOr(l.MemoryBytes, def.MemoryBytes),
		Pids:        positiveOr(l.Pids, def.Pids),
		CPUs:        positiveOr(l.CPUs, def.CPUs),
	}
}

// validate refuses negative (or not finite) limits; where says whose.
func (l Limits) validate(where string) error {
	switch {
	case l.MemoryBytes < 0:
		return xerrors.Errorf("start: %s.MemoryBytes %d is negative: %w", where, l.MemoryBytes, ErrInvalid)
	case l.Pids < 0:
		return xerrors.Errorf("start: %s.Pids %d is negative: %w", where, l.Pids, ErrInvalid)
	case l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return xerrors.Errorf("start: %s.CPUs %v is not a non-negative number of cores: %w", where, l.CPUs, ErrInvalid)
	}
	return nil
}

// TreeUsage is what a whole process tree consumed, every member living and
// dead, at the moment the record became final (cgroup and job only).
type TreeUsage struct {
	User   time.Duration `json:"user"`
	System time.Duration `json:"system"`
	// MemoryPeak is the tree's peak memory in bytes; 0 where the OS
	// cannot tell (no memory controller).
	MemoryPeak int64 `json:"memory_peak"`
	// PidsPeak is the most processes the tree held at once; 0 where the
	// OS cannot tell.
	PidsPeak int `json:"pids_peak"`
	// OOMKills counts members the kernel killed for Limits.MemoryBytes.
	OOMKills int `json:"oom_kills"`
}

// positiveOr is the one "zero means default" rule: v if it is positive,
// else def. Negative values were refused before they get here, or (in
// Options) mean the default too.
func positiveOr[T int | int64 | float64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
