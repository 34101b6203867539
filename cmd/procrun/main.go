// Command procrun runs one command under the proc supervisor and prints its
// final snapshot as JSON. With no arguments it runs a short demonstration.
//
//	procrun [flags] -- CMD [ARGS...]
//	procrun               # demonstration
//
// The command runs in the current directory unless -dir names another.
// procrun exits with the command's exit code: 124 when -timeout ended it,
// 128+N when signal N did. Its own failures have codes of their own, as
// timeout(1) has them: 2 for a usage error, 125 when procrun failed (or
// -wait-for never matched and the command exited 0), 126 when the command
// could not be run, 127 when it was not found. -h prints the usage and
// exits 0.
//
// The snapshot also lists the record's events (started, the lines each
// -watch NAME=REGEXP matched, final); with -follow the matches are
// reported on stderr as they happen.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/xerrors"

	"github.com/procvisor/proc"
)

// Exit codes of procrun's own failures; any other code is the command's.
const (
	exitUsage      = 2
	exitFailed     = 125
	exitCannotRun  = 126
	exitNotFound   = 127
	exitNoExitCode = 1 // the wait for the command failed (exit code -1)
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// failure is an error of procrun's own with its exit code.
type failure struct {
	code int
	err  error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// run runs procrun with args and returns its exit code, having reported
// any error of its own on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code, err := runArgs(ctx, args, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "procrun:", err)
		var f *failure
		switch {
		case errors.As(err, &f):
			return f.code
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
			return exitNotFound
		case errors.Is(err, fs.ErrPermission):
			return exitCannotRun
		case code == 0:
			return exitFailed
		}
	}
	return code
}

type config struct {
	timeout time.Duration
	shell   bool
	head    int
	tail    int
	stdin   bool
	tty     bool
	follow  bool
	dir     string
	waitFor string
	logPath string
	limits  proc.Limits
	contain string
	watches []proc.Watch
	plain   bool
	quiet   bool
	dropEnv []string
	sandbox *proc.Sandbox // nil: unrestricted
}

// runArgs parses args and runs the command (or the demonstration). It
// returns the command's exit code, and an error of procrun's own.
func runArgs(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	flags := flag.NewFlagSet("procrun", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var cfg config
	flags.DurationVar(&cfg.timeout, "timeout", 0, "terminate, then kill, after this long (exit code 124)")
	flags.BoolVar(&cfg.shell, "shell", false, "run the arguments, joined by spaces, through sh -c")
	flags.IntVar(&cfg.head, "head", 0, "bytes kept from the start of the output (0: 16 KiB)")
	flags.IntVar(&cfg.tail, "tail", 0, "bytes kept from the end of the output (0: 16 KiB)")
	flags.BoolVar(&cfg.stdin, "stdin", false, "forward procrun's stdin to the command")
	flags.BoolVar(&cfg.tty, "tty", false, "run the command under a pseudo-terminal")
	flags.BoolVar(&cfg.follow, "follow", false, "stream the output while the command runs; report on stderr when it waits for input and the ports it listens on (Linux)")
	flags.StringVar(&cfg.dir, "dir", "", "work dir (default: the current directory)")
	flags.StringVar(&cfg.waitFor, "wait-for", "", "report on stderr when an output line matches this regexp (readiness)")
	flags.StringVar(&cfg.logPath, "log", "", "also append the full output to this file")
	flags.Func("memory", "memory limit of the whole tree, e.g. 512MiB or 2GiB (needs cgroups with the memory controller)", func(v string) error {
		n, err := parseBytes(v)
		cfg.limits.MemoryBytes = n
		return err
	})
	flags.IntVar(&cfg.limits.Pids, "pids", 0, "most processes the tree may hold at once (needs the pids controller)")
	flags.Float64Var(&cfg.limits.CPUs, "cpus", 0, "CPU bandwidth of the tree in cores, e.g. 0.5 (needs the cpu controller)")
	flags.BoolVar(&cfg.plain, "plain", false, "print the output as plain text (escape sequences removed, progress bars redrawn as a terminal would) instead of the JSON snapshot")
	flags.BoolVar(&cfg.quiet, "quiet-env", false, "a quiet environment: NO_COLOR, PAGER=cat, no git prompts, CI=1, TERM=dumb without -tty")
	flags.Func("drop-env", "remove inherited environment variables whose names match this glob, e.g. '*_TOKEN' (repeatable)", func(v string) error {
		cfg.dropEnv = append(cfg.dropEnv, v)
		return nil
	})
	flags.StringVar(&cfg.contain, "containment", "", `how the tree is held: "cgroup", "group", or "" (cgroup where it works)`)
	flags.Func("watch", "NAME=REGEXP: report output lines that match REGEXP as events named NAME (repeatable; printed as they happen with -follow)", func(v string) error {
		name, pattern, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return xerrors.Errorf("%q is not NAME=REGEXP", v)
		}
		if _, err := regexp.Compile(pattern); err != nil {
			return err
		}
		for _, w := range cfg.watches {
			if w.Name == name {
				return xerrors.Errorf("a watch named %q was given before", name)
			}
		}
		cfg.watches = append(cfg.watches, proc.Watch{Name: name, Pattern: pattern})
		return nil
	})
	sandbox := func() *proc.Sandbox {
		if cfg.sandbox == nil {
			cfg.sandbox = &proc.Sandbox{}
		}
		return cfg.sandbox
	}
	flags.BoolFunc("sandbox", "restrict the tree: read and execute everywhere, change nothing (but -write roots), no network (but -net)", func(v string) error {
		on, err := strconv.ParseBool(v)
		if on {
			sandbox()
		} else {
			cfg.sandbox = nil
		}
		return err
	})
	flags.Func("write", "with the sandbox (implied): a directory or file the tree may change; repeatable", func(v string) error {
		abs, err := filepath.Abs(v)
		sandbox().WritableRoots = append(sandbox().WritableRoots, abs)
		return err
	})
	flags.BoolFunc("net", "with the sandbox (implied): leave the network as it is", func(v string) error {
		on, err := strconv.ParseBool(v)
		sandbox().Network = on
		return err
	})
	flags.BoolFunc("listen", "with the sandbox (implied) and no -net: the tree may bind and listen on TCP ports", func(v string) error {
		on, err := strconv.ParseBool(v)
		sandbox().Listen = on
		return err
	})
	flags.Func("connect", "with the sandbox (implied) and no -net: a TCP port the tree may connect to; repeatable", func(v string) error {
		port, err := strconv.Atoi(v)
		sandbox().ConnectPorts = append(sandbox().ConnectPorts, port)
		return err
	})
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: procrun [flags] -- CMD [ARGS...]\n       procrun            (a demonstration)")
		flags.PrintDefaults()
		fmt.Fprintln(stderr, "exit code: the command's (124 on timeout, 128+N on signal N); 2 usage, 125 procrun failed, 126 cannot run, 127 not found")
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, nil
		}
		// The flag package has printed the problem and the usage.
		return exitUsage, nil
	}
	if flags.NArg() == 0 {
		return 0, demo(ctx, stdout)
	}
	if cfg.dir == "" || !filepath.IsAbs(cfg.dir) {
		// The library's default is $HOME, and it resolves a relative
		// WorkDir against that; a command-line tool runs where it is
		// called, and resolves -dir against it.
		wd, err := os.Getwd()
		if err != nil {
			return 0, xerrors.Errorf("current directory: %w", err)
		}
		cfg.dir = filepath.Join(wd, cfg.dir)
	}
	return runOne(ctx, cfg, flags.Args(), stdin, stdout, stderr)
}

// runOne runs argv and prints its final snapshot. It returns the command's
// exit code, and an error of procrun's own.
func runOne(ctx context.Context, cfg config, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var ready *regexp.Regexp
	if cfg.waitFor != "" && cfg.follow {
		return 0, &failure{exitUsage, xerrors.New("-wait-for and -follow cannot be combined: both read the output as it comes")}
	}
	if cfg.waitFor != "" {
		var err error
		if ready, err = regexp.Compile(cfg.waitFor); err != nil {
			return 0, &failure{exitUsage, xerrors.Errorf("-wait-for: %w", err)}
		}
	}
	m := proc.NewManager(proc.Options{Containment: proc.Containment(cfg.contain)})
	defer m.Close()

	req := proc.StartRequest{
		Limits:    cfg.limits,
		Args:      argv,
		WorkDir:   cfg.dir,
		Timeout:   cfg.timeout,
		HeadBytes: cfg.head,
		TailBytes: cfg.tail,
		Stdin:     cfg.stdin,
		TTY:       cfg.tty,
		LogPath:   cfg.logPath,
		Watch:     cfg.watches,

		NonInteractive: cfg.quiet,
		DropEnv:        cfg.dropEnv,
		Sandbox:        cfg.sandbox,
	}
	if cfg.shell {
		req.Args, req.Command = nil, strings.Join(argv, " ")
	}
	p, err := m.Start(req)
	if err != nil {
		return 0, err
	}
	streamed := make(chan struct{})
	if cfg.follow {
		// A follower gets every byte while it keeps up: the pump holds the
		// command a few milliseconds at most for it. A terminal or pipe
		// that falls behind further loses output, said on stderr, rather
		// than hold the command back. Ends at the record's end (or when
		// the Manager is closed); joined before the snapshot is printed.
		f, err := p.Follow(0, proc.FollowOptions{})
		if err != nil {
			return 0, err
		}
		go func() {
			defer close(streamed)
			stream(f, stdout, stderr)
		}()
	} else {
		close(streamed)
	}

	// Ctrl-C interrupts the command's process group, not procrun; SIGTERM
	// terminates it. Either way procrun still prints the final snapshot and
	// closes the manager, so nothing is left running.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stopForward := make(chan struct{})
	defer close(stopForward)
	// Stopped by stopForward when runOne returns.
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == os.Interrupt {
					_ = p.Signal(proc.Interrupt)
				} else {
					_ = p.Signal(proc.Terminate)
				}
			case <-stopForward:
				return
			}
		}
	}()

	if cfg.stdin {
		// Ends when stdin ends or, once the process is gone, at the next
		// read that returns (the Write then fails). procrun exits right
		// after the snapshot, so a read still blocked then does not matter.
		go func() {
			_, _ = io.Copy(p, stdin)
			_ = p.CloseStdin()
		}()
	}
	reported := make(chan struct{})
	matched := make(chan struct{})
	if cfg.follow {
		// Reports on stderr, beside the streamed output, when the command
		// starts to wait for input and the ports it opens. Stopped when the
		// record is final; joined before the snapshot is printed.
		go func() {
			defer close(reported)
			reportActivity(p, stderr)
		}()
		// Reports the watches' matches as they happen. Stopped at the
		// record's final event, or when the Manager is closed; joined
		// before the snapshot is printed.
		go func() {
			defer close(matched)
			reportMatches(m, stderr)
		}()
	} else {
		close(matched)
	}
	var readyErr error
	if ready != nil && !cfg.follow {
		line, err := p.WaitFor(ctx, ready, true)
		if err != nil {
			readyErr = xerrors.Errorf("-wait-for %q: %w", cfg.waitFor, err)
		} else {
			fmt.Fprintf(stderr, "procrun: ready: %s\n", line)
		}
	}
	if err := p.Wait(ctx); err != nil {
		// Close makes the record final, which ends the reporter.
		_ = m.Close()
		if cfg.follow {
			<-reported
		}
		<-matched
		<-streamed
		return 0, err
	}
	if cfg.follow {
		<-reported
	}
	<-matched
	<-streamed
	snap := p.Snapshot()
	// The one record's events, after the snapshot's fields.
	evs, _, _ := m.Events(0, 0)
	if err := printSnapshot(stdout, snap, evs, cfg.plain); err != nil {
		return 0, err
	}
	code := exitNoExitCode
	if c := snap.Info.ExitCode; c != nil && *c >= 0 {
		code = *c
	}
	// A -wait-for that never matched fails a command that exited 0 (125);
	// a failing command's own code says more.
	return code, readyErr
}

// printSnapshot prints snap as indented JSON, or with plain only its
// output as plain text (stderr after stdout with SeparateStderr).
func printSnapshot(w io.Writer, snap proc.Snapshot, evs []proc.Event, plain bool) error {
	if plain {
		if _, err := io.WriteString(w, snap.Output.Plain()+snap.Stderr.Plain()); err != nil {
			return xerrors.Errorf("print output: %w", err)
		}
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // output for people and scripts, not for a web page
	out := struct {
		proc.Snapshot
		Events []proc.Event `json:"events"`
	}{snap, evs}
	if err := enc.Encode(out); err != nil {
		return xerrors.Errorf("print snapshot: %w", err)
	}
	return nil
}

// stream copies what f reads to w until the record's end, and says on
// errw how many bytes it lost where it lost them. It closes f.
func stream(f *proc.Follower, w, errw io.Writer) {
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		c, err := f.Read(context.Background(), buf)
		if c.Lost > 0 {
			fmt.Fprintf(errw, "procrun: [%d bytes of output lost]\n", c.Lost)
		}
		if _, werr := w.Write(c.Data); werr != nil || err != nil {
			return
		}
	}
}

// activityPoll is how often -follow looks at what the command is doing.
const activityPoll = 100 * time.Millisecond

// reportActivity prints a line to w each time p's tree starts to wait for
// input, and one for each socket it listens on as it appears, until p is
// final. Where Activity is not supported (not Linux) it prints nothing.
func reportActivity(p *proc.Process, w io.Writer) {
	ticker := time.NewTicker(activityPoll)
	defer ticker.Stop()
	waiting := false
	seen := make(map[proc.Listener]bool)
	for {
		a, err := p.Activity()
		if err != nil {
			return // final, or unsupported here
		}
		if a.WaitingForInput && !waiting {
			fmt.Fprintln(w, "procrun: waiting for input")
		}
		waiting = a.WaitingForInput
		for _, l := range a.Listeners {
			if !seen[l] {
				seen[l] = true
				fmt.Fprintf(w, "procrun: listening on %s %s (pid %d)\n", l.Network, l.Address, l.PID)
			}
		}
		select {
		case <-p.Done():
			return
		case <-ticker.C:
		}
	}
}

// reportMatches prints a line to w for each matched event of m's one
// record, as it is appended, until its final event (or until m is closed).
func reportMatches(m *proc.Manager, w io.Writer) {
	var cursor int64
	for {
		if m.WaitEvent(context.Background(), cursor) != nil {
			return // closed
		}
		var evs []proc.Event
		evs, cursor, _ = m.Events(cursor, 0)
		for _, ev := range evs {
			switch ev.Kind {
			case proc.EventMatched:
				fmt.Fprintf(w, "procrun: matched %s: %s\n", ev.Watch, ev.Line)
			case proc.EventFinal:
				return
			}
		}
	}
}

// demo shows three things the supervisor does: a long output cut to head
// and tail, a command that leaves a background child behind without
// holding the caller, and a timeout.
func demo(ctx context.Context, w io.Writer) error {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	fmt.Fprintln(w, "1. A long output is kept as head and tail, with exact accounting.")
	fmt.Fprintln(w, "   $ seq 1 100000   (head and tail of 64 bytes each)")
	snap, err := m.Run(ctx, proc.StartRequest{Command: "seq 1 100000", HeadBytes: 64, TailBytes: 64})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n", indent(snap.Output.Text))
	if t := snap.Output.Truncation; t != nil {
		fmt.Fprintf(w, "   written %d bytes, kept %d, omitted %d\n\n", t.OriginalBytes, t.RetainedBytes, t.OmittedBytes)
	}

	fmt.Fprintln(w, "2. A background child that keeps stdout open does not hold the caller.")
	fmt.Fprintln(w, "   $ sleep 30 & echo started")
	start := time.Now()
	if snap, err = m.Run(ctx, proc.StartRequest{Command: "sleep 30 & echo started"}); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n   final after %v with exit code %d (the drain waited %v of quiet)\n",
		indent(snap.Output.Text), time.Since(start).Round(time.Millisecond), *snap.Info.ExitCode, proc.DefaultDrainQuiet)
	err = m.Signal(snap.Info.ID, proc.Kill)
	fmt.Fprintf(w, "   the background sleep is still reachable: Signal(kill) = %v\n\n", err)

	fmt.Fprintln(w, "3. A timeout terminates the process group and reports exit code 124.")
	fmt.Fprintln(w, "   $ echo working; sleep 10   (timeout 300ms)")
	start = time.Now()
	if snap, err = m.Run(ctx, proc.StartRequest{Command: "echo working; sleep 10", Timeout: 300 * time.Millisecond}); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n   final after %v: exit code %d, timed out %v, ended by %s\n",
		indent(snap.Output.Text), time.Since(start).Round(time.Millisecond), *snap.Info.ExitCode, snap.Info.TimedOut, snap.Info.Signal)
	return nil
}

func indent(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return "   | " + strings.ReplaceAll(s, "\n", "\n   | ")
}

// parseBytes reads a byte count: "1073741824", "512MiB", "2GiB", "64KiB".
func parseBytes(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte count such as 512MiB", v)
	}
	return n * mult, nil
}
