// Package procfs reads what package proc needs to know of processes from
// Linux's /proc and the sock_diag netlink interface: a process's stat
// line, the system call each thread is blocked in and the descriptors it
// waits on, the sockets it listens on, its PID namespace. It holds
// mechanics only: what a record's stdin is, which processes make up a tree
// and what to report is decided by package proc.
//
// The parsers are pure functions over the kernel's text (or bytes) and are
// table-tested; the readers around them open the files. On systems without
// /proc the readers fail (ok false or an error), and the Linux-only readers
// (the activity [Scanner], and the [Tracker] that looks at the same
// processes again and again, reading again only those that ran) are not
// built.
package procfs

import (
	"bytes"
	"os"
	"strconv"
)

// Stat is what proc reads of a /proc/PID/stat line.
type Stat struct {
	State   byte   // 'R', 'S', 'D', 'T', 'Z', 'X', ...
	PPID    int    // field 4
	Pgrp    int    // field 5: the process group
	Session int    // field 6
	TTYNr   uint64 // field 7: the controlling terminal's device number, 0 for none
	Flags   uint64 // field 9: the kernel's PF_* flags of the main thread
	Threads int    // field 20
	// StartTime is field 22: when the process started, in clock ticks
	// after boot. With the PID it names a process for good.
	StartTime uint64
}

// ParseStat parses a /proc/PID/stat line: "pid (comm) state ppid pgrp
// session tty_nr tpgid flags ...". comm may hold spaces and parentheses, so
// the fields are counted from the last ')'. ok is false for a line that
// does not read that way.
func ParseStat(data []byte) (_ Stat, ok bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return Stat{}, false
	}
	var st Stat
	n := 3 // the number of the next field
	for f := range fields(data[i+1:]) {
		var err error
		switch n {
		case 3:
			if len(f) != 1 {
				return Stat{}, false
			}
			st.State = f[0]
		case 4:
			st.PPID, err = strconv.Atoi(string(f))
		case 5:
			st.Pgrp, err = strconv.Atoi(string(f))
		case 6:
			st.Session, err = strconv.Atoi(string(f))
		case 7:
			var tty int64
			tty, err = strconv.ParseInt(string(f), 10, 64)
			st.TTYNr = uint64(uint32(tty))
		case 9:
			st.Flags, err = strconv.ParseUint(string(f), 10, 64)
		case 20:
			st.Threads, err = strconv.Atoi(string(f))
		case 22:
			st.StartTime, err = strconv.ParseUint(string(f), 10, 64)
		}
		if err != nil {
			return Stat{}, false
		}
		if n == 22 {
			return st, true
		}
		n++
	}
	return Stat{}, false
}

// fields yields the fields of line separated by spaces, tabs and
// newlines, without allocating.
func fields(line []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for {
			line = bytes.TrimLeft(line, " \t\n")
			if len(line) == 0 {
				return
			}
			end := bytes.IndexAny(line, " \t\n")
			if end < 0 {
				end = len(line)
			}
			if !yield(line[:end]) {
				return
			}
			line = line[end:]
		}
	}
}

// ReadStat reads /proc/PID/stat; ok is false when the process is gone or
// there is no /proc.
func ReadStat(pid int) (_ Stat, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	return ParseStat(data)
}

// SelfStartTime is this process's start time in clock ticks after boot
// (field 22 of /proc/self/stat), 0 when it cannot be read.
func SelfStartTime() uint64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	st, _ := ParseStat(data)
	return st.StartTime
}

// PIDNamespace is the inode number of the PID namespace of process pid
// (0 for this process), from its /proc/PID/ns/pid link "pid:[INODE]"; ok
// is false when it cannot be read.
func PIDNamespace(pid int) (ino uint64, ok bool) {
	name := "self"
	if pid != 0 {
		name = strconv.Itoa(pid)
	}
	link, err := os.Readlink("/proc/" + name + "/ns/pid")
	if err != nil {
		return 0, false
	}
	return nsInode([]byte(link), "pid")
}

// nsInode returns INODE of a namespace link "KIND:[INODE]".
func nsInode(link []byte, kind string) (uint64, bool) {
	return bracketed(link, kind+":[")
}

// SocketInode returns INODE of a descriptor's link "socket:[INODE]"; ok is
// false for a link to anything else.
func SocketInode(link []byte) (ino uint64, ok bool) {
	return bracketed(link, "socket:[")
}

// bracketed returns the decimal number N of "prefixN]".
func bracketed(link []byte, prefix string) (uint64, bool) {
	rest, ok := bytes.CutPrefix(link, []byte(prefix))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != ']' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 64)
	return n, err == nil
}
