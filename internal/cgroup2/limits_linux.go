package cgroup2

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/xerrors"
)

// Limits are what SetLimits writes; a zero field is left alone.
type Limits struct {
	MemoryBytes int64   // memory.max
	Pids        int     // pids.max
	CPUs        float64 // cpu.max, in cores
}

// ErrNoController is wrapped by SetLimits when a limit's controller is not
// enabled for the cgroup (its file is missing).
var ErrNoController = errors.New("controller not enabled")

// CPUPeriod is the period of cpu.max, and the CPU rate's unit of account.
const CPUPeriod = 100 * time.Millisecond

// cpuQuota is the share of CPUPeriod, in microseconds, that cpus cores
// may use in each period: at least the kernel's minimum of 1 ms.
func cpuQuota(cpus float64) int64 {
	return max(int64(math.Round(cpus*float64(CPUPeriod.Microseconds()))), 1000)
}

// SetLimits writes the non-zero limits of l into d, which should hold no
// process yet: memory.max in bytes, pids.max, and cpu.max as "quota
// period" in microseconds. A controller file that is missing is an error
// wrapping ErrNoController, and is never created.
func (d Dir) SetLimits(l Limits) error {
	type limitFile struct {
		set        bool
		controller string
		file       string
		value      string
	}
	for _, f := range []limitFile{
		{l.MemoryBytes > 0, "memory", "memory.max", strconv.FormatInt(l.MemoryBytes, 10)},
		{l.Pids > 0, "pids", "pids.max", strconv.Itoa(l.Pids)},
		{l.CPUs > 0, "cpu", "cpu.max", fmt.Sprintf("%d %d", cpuQuota(l.CPUs), CPUPeriod.Microseconds())},
	} {
		if !f.set {
			continue
		}
		path := d.file(f.file)
		// O_WRONLY without O_CREATE: a missing file is a missing controller.
		file, err := os.OpenFile(path, os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			return xerrors.Errorf("%s limit: the %s controller is not enabled for the cgroup %s: %w", f.controller, f.controller, d.Path, ErrNoController)
		}
		if err != nil {
			return xerrors.Errorf("%s limit: %w", f.controller, err)
		}
		_, err = file.WriteString(f.value)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return xerrors.Errorf("%s limit: write %s to %s: %w", f.controller, f.value, path, err)
		}
	}
	return nil
}

// Usage is a cgroup's accounting since it was made.
type Usage struct {
	User, System time.Duration // cpu.stat
	MemoryPeak   int64         // memory.peak; 0 without the memory controller
	PidsPeak     int           // pids.peak; 0 without the pids controller
	OOMKills     int           // memory.events oom_kill
}

// Usage reads d's accounting: cpu.stat (always there), and memory.peak,
// pids.peak and memory.events where their controllers are enabled.
func (d Dir) Usage() Usage {
	stat := readKeyed(d.file("cpu.stat"))
	return Usage{
		User:       time.Duration(stat["user_usec"]) * time.Microsecond,
		System:     time.Duration(stat["system_usec"]) * time.Microsecond,
		MemoryPeak: readInt(d.file("memory.peak")),
		PidsPeak:   int(readInt(d.file("pids.peak"))),
		OOMKills:   int(readKeyed(d.file("memory.events"))["oom_kill"]),
	}
}

// CPU reads cpu.stat alone: the part of Usage a cgroup without the memory
// and pids controllers has, in one read instead of four.
func (d Dir) CPU() Usage {
	var buf [512]byte
	data, err := readFile(d.file("cpu.stat"), buf[:0])
	if err != nil {
		return Usage{}
	}
	var u Usage
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		k, v, _ := bytes.Cut(line, []byte(" "))
		n, _ := strconv.ParseInt(string(v), 10, 64)
		switch string(k) {
		case "user_usec":
			u.User = time.Duration(n) * time.Microsecond
		case "system_usec":
			u.System = time.Duration(n) * time.Microsecond
		}
	}
	return u
}

// readKeyed reads a cgroup file of "key value" lines; missing is empty.
func readKeyed(path string) map[string]int64 {
	var buf [512]byte
	data, err := readFile(path, buf[:0])
	if err != nil {
		return nil
	}
	return parseKeyed(data)
}

// parseKeyed parses "key value" lines (cpu.stat, memory.events); a line
// whose value is not an integer is left out.
func parseKeyed(data []byte) map[string]int64 {
	m := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m
}

// readInt reads a cgroup file holding one integer; missing is 0.
func readInt(path string) int64 {
	var buf [64]byte
	data, err := readFile(path, buf[:0])
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}
