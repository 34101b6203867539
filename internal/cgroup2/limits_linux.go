package cgroup2

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
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

// ReadUsage reads d's accounting: cpu.stat (always there, as ReadCPU
// reads it), and memory.peak, pids.peak and memory.events where their
// controllers are enabled (missing without them: zero). The error says
// why cpu.stat could not be read (a removed cgroup's: ENOENT).
func (d Dir) ReadUsage() (Usage, error) {
	u, err := d.ReadCPU()
	if err != nil {
		return Usage{}, err
	}
	u.MemoryPeak = d.readInt("memory.peak")
	u.PidsPeak = int(d.readInt("pids.peak"))
	var buf [256]byte
	if data, err := d.readShow("memory.events", buf[:0]); err == nil {
		oom, _ := keyedValue(data, "oom_kill")
		u.OOMKills = int(oom)
	}
	return u, nil
}

// CPU reads cpu.stat alone: the part of Usage a cgroup without the memory
// and pids controllers has, in one read instead of four; zero if it
// cannot be read.
func (d Dir) CPU() Usage {
	u, _ := d.ReadCPU()
	return u
}

// ReadCPU is CPU that says why it could not read (a removed cgroup's
// cpu.stat is gone: ENOENT).
func (d Dir) ReadCPU() (Usage, error) {
	var buf [512]byte
	data, err := d.readShow("cpu.stat", buf[:0])
	if err != nil {
		return Usage{}, err
	}
	return parseCPU(data), nil
}

// CPUStat is cpu.stat held open (heldFile), so that a read costs one
// pread at offset 0, the cgroup's CPU accounting flushed first as an
// open and read do.
type CPUStat struct{ heldFile }

// OpenCPU opens d's cpu.stat.
func (d Dir) OpenCPU() (*CPUStat, error) { return openHeldAs[CPUStat](d, "cpu.stat") }

// ReadCPU is [Dir.ReadCPU] through the open file: an error if it cannot
// be read (a removed cgroup's held cpu.stat reads ENODEV), or after
// Close. user_usec and system_usec come first in the file, well within
// the buffer.
func (f *CPUStat) ReadCPU() (Usage, error) {
	var buf [512]byte
	data, err := f.read(buf[:])
	if err != nil {
		return Usage{}, err
	}
	return parseCPU(data), nil
}

// parseCPU takes user_usec and system_usec from cpu.stat's data.
func parseCPU(data []byte) Usage {
	var u Usage
	parseKeyed(data, func(key []byte, n int64) {
		switch string(key) {
		case "user_usec":
			u.User = time.Duration(n) * time.Microsecond
		case "system_usec":
			u.System = time.Duration(n) * time.Microsecond
		}
	})
	return u
}

// parseKeyed calls f with each "key value" line of data (cpu.stat,
// memory.events, cgroup.stat) whose value is an integer; other lines are
// left out. It is the one parser of those files, and allocates nothing.
func parseKeyed(data []byte, f func(key []byte, value int64)) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			f(k, n)
		}
	}
}

// keyedValue is the value of key in "key value" lines (parseKeyed).
func keyedValue(data []byte, key string) (n int64, ok bool) {
	parseKeyed(data, func(k []byte, v int64) {
		if !ok && string(k) == key {
			n, ok = v, true
		}
	})
	return n, ok
}

// readInt reads d's file name, holding one integer; missing is 0.
func (d Dir) readInt(name string) int64 {
	var buf [64]byte
	data, err := d.readShow(name, buf[:0])
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
	return n
}
