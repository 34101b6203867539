// Command procscreen runs one command under a terminal, supervised by
// proc, and prints the screen it leaves: what a person would see, not the
// escape sequences, redraws and progress updates it wrote. It answers the
// terminal's queries, so a program that asks where its cursor is does not
// hang.
//
//	procscreen [flags] -- CMD [ARGS...]
//
// It is the screen module's counterpart of procrun, which has no -screen
// flag: procrun lives in proc's own module, which must not depend on a
// terminal emulator and cannot require the unpublished screen module.
//
// The command runs in the current directory unless -dir names another,
// with its stdin the terminal (nobody types into it). procscreen prints
// the last -scrollback rows that scrolled off (none by default), then the
// final screen, and exits with the command's exit code: 124 when -timeout
// ended it, 128+N when signal N did; 2 for a usage error, 125 when
// procscreen failed, 127 when the command was not found. -h prints the
// usage and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/screen"
)

const (
	exitUsage    = 2
	exitFailed   = 125
	exitNotFound = 127
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("procscreen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	rows := flags.Uint("rows", 24, "terminal rows")
	cols := flags.Uint("cols", 80, "terminal columns")
	timeout := flags.Duration("timeout", 0, "terminate, then kill, after this long (exit code 124)")
	dir := flags.String("dir", "", "working directory (default: the current one)")
	scrollback := flags.Int("scrollback", 0, "also print up to this many rows that scrolled off, before the screen")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: procscreen [flags] -- CMD [ARGS...]")
		fmt.Fprintln(stderr, "Runs CMD under a terminal and prints the screen it leaves.")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if flags.NArg() == 0 || *rows == 0 || *cols == 0 || *rows > 1<<15 || *cols > 1<<15 {
		flags.Usage()
		return exitUsage
	}
	if *dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintln(stderr, "procscreen:", err)
			return exitFailed
		}
		*dir = wd
	}
	// A command-line tool runs where it was started: a relative -dir is
	// made absolute here, as the library would resolve it elsewhere.
	if abs, err := filepath.Abs(*dir); err == nil {
		*dir = abs
	}
	m := proc.NewManager(proc.Options{})
	defer m.Close()
	s, err := screen.Start(m, proc.StartRequest{
		Args:    flags.Args(),
		WorkDir: *dir,
		Timeout: *timeout,
		Size:    proc.TermSize{Rows: uint16(*rows), Cols: uint16(*cols)},
	})
	if err != nil {
		fmt.Fprintln(stderr, "procscreen:", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		if errors.Is(err, proc.ErrInvalid) {
			return exitUsage
		}
		return exitFailed
	}
	// The Manager's Close, deferred, bounds the end: Wait needs no
	// deadline of its own beyond the command's -timeout.
	if err := s.Process().Wait(context.Background()); err != nil {
		fmt.Fprintln(stderr, "procscreen:", err)
		return exitFailed
	}
	for _, row := range s.Scrollback(*scrollback) {
		fmt.Fprintln(stdout, row)
	}
	if text := s.Text(); text != "" {
		fmt.Fprintln(stdout, text)
	}
	if c := s.Process().Info().ExitCode; c != nil && *c >= 0 {
		return *c
	}
	return exitFailed
}
