package screen_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/internal/testkit"
	"github.com/procvisor/proc/proctest"
	"github.com/procvisor/proc/screen"
	"go.uber.org/goleak"
)

// helperEnv names the helper mode when the test binary runs as a child.
const helperEnv = "PROC_SCREEN_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(testkit.RunHelper(map[string]func([]string) int{"redraw": redraw, "flood": flood}, mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// redrawArgs returns the argv and environment of a child that redraws a
// full 24x80 screen frames times, the way a TUI repaints: home, then
// every row rewritten with colours and erased to its end.
func redrawArgs(frames int) ([]string, map[string]string) {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return []string{exe, strconv.Itoa(frames)}, map[string]string{helperEnv: "redraw"}
}

func redraw(args []string) int {
	frames, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "redraw: want FRAMES")
		return 2
	}
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	w.WriteString("\x1b[?1049h\x1b[?25l")
	for f := 1; f <= frames; f++ {
		w.WriteString("\x1b[H")
		for r := 1; r <= 23; r++ {
			fmt.Fprintf(w, "\x1b[%d;1H\x1b[1;3%dm%3d %-40s\x1b[0m frame %6d\x1b[K", r, r%8, r, strings.Repeat("#", (f+r)%40), f)
		}
		fmt.Fprintf(w, "\x1b[24;1H\x1b[7m status: frame %d \x1b[0m\x1b[K", f)
		if f%8 == 0 {
			w.Flush()
		}
	}
	w.WriteString("\x1b[?25h")
	w.Flush()
	return 0
}

// flood writes, for each pair of arguments COUNT UNIT, UNIT (a Go string
// literal) COUNT times.
func flood(args []string) int {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	for ; len(args) >= 2; args = args[2:] {
		n, err := strconv.Atoi(args[0])
		unit, err2 := strconv.Unquote(args[1])
		if err != nil || err2 != nil {
			fmt.Fprintln(os.Stderr, "flood: want COUNT UNIT pairs")
			return 2
		}
		for range n {
			w.WriteString(unit)
		}
	}
	if err := w.Flush(); err != nil {
		return 1
	}
	return 0
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func skipWithoutTTY(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("proc has terminals on Unix only; TestStartUnsupported runs on Windows")
	}
}

// ttyCtx skips t where there are no terminals, and returns testCtx(t).
func ttyCtx(t *testing.T) context.Context {
	t.Helper()
	skipWithoutTTY(t)
	return testCtx(t)
}

// ttyManager is ttyCtx with a Manager closed when t ends.
func ttyManager(t *testing.T) (context.Context, *proc.Manager) {
	t.Helper()
	return ttyCtx(t), proctest.NewManager(t, proc.Options{})
}

// toolManager skips t where the program tool is not installed, and
// returns testCtx(t) and a Manager closed when t ends.
func toolManager(t *testing.T, tool string) (context.Context, *proc.Manager) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skip(tool + " is not installed")
	}
	return testCtx(t), proctest.NewManager(t, proc.Options{})
}

// quitProgram types keys, which quit the program of s (name), waits
// until it exits, and checks that it left the alternate screen.
func quitProgram(ctx context.Context, t *testing.T, s *screen.Screen, keys, name string) {
	t.Helper()
	if _, err := s.Process().Write([]byte(keys)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if s.AltScreen() {
		t.Errorf("%s quit: AltScreen() = true", name)
	}
}

// run starts script under bash on a screen and waits for it to end.
func run(t *testing.T, ctx context.Context, script string) *screen.Screen {
	t.Helper()
	m := proctest.NewManager(t, proc.Options{})
	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c", script}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return s
}

func TestOverwriteInPlace(t *testing.T) {
	t.Parallel()
	ctx := ttyCtx(t)
	s := run(t, ctx, `printf 'Working\rDo\n50%%\r100%%\n\033[31mred\033[0m'`)
	if got, want := s.Text(), "Dorking\n100%\nred"; got != want {
		t.Errorf("Text() = %q; want %q", got, want)
	}
	if row, col := s.Cursor(); row != 2 || col != 3 {
		t.Errorf("Cursor() = %d, %d; want 2, 3", row, col)
	}
}

func TestRedrawLeavesLastFrame(t *testing.T) {
	t.Parallel()
	ctx := ttyCtx(t)
	s := run(t, ctx, `for i in $(seq 200); do printf '\033[H\033[2Jframe %d\nrow two %d\n\033[Kspinner %s' $i $i '|/-\'; done`)
	if got, want := s.Text(), "frame 200\nrow two 200\nspinner |/-\\"; got != want {
		t.Errorf("Text() = %q; want %q", got, want)
	}
	if sb := s.Scrollback(10); len(sb) != 0 {
		t.Errorf("Scrollback(10) = %q; want none: redraws in place scroll nothing", sb)
	}
	s2 := run(t, ctx, `printf 'one\ntwo\n\033[2A\033[KONE\n\033[KTWO\n'`)
	if got, want := s2.Text(), "ONE\nTWO"; got != want {
		t.Errorf("cursor-up redraw: Text() = %q; want %q", got, want)
	}
}

// TestQueriesAnswered: a program that asks the terminal where its cursor
// is, and what it is, gets answers and finishes; under a bare proc TTY it
// waits forever.
func TestQueriesAnswered(t *testing.T) {
	t.Parallel()
	ctx := ttyCtx(t)
	script := `stty raw -echo
printf 'abc\r\n  de'
printf '\033[6n'; IFS= read -r -d R cpr
printf '\033[c'; IFS= read -r -d c da1
printf '\033[>c'; IFS= read -r -d c da2
stty sane
printf '\ncpr=%s da1=%s da2=%s\n' "${cpr#?}" "${da1#?}" "${da2#?}"`
	s := run(t, ctx, script)
	row, err := s.Wait(ctx, regexp.MustCompile(`^cpr=`))
	if err != nil {
		t.Fatalf("Wait: %v (screen %q)", err, s.Text())
	}
	if want := "cpr=[2;5 da1=[?62;22 da2=[>1;10;0"; row != want {
		t.Errorf("answers: %q; want %q", row, want)
	}
	if code := s.Process().Info().ExitCode; code == nil || *code != 0 {
		t.Errorf("exit code %v; want 0", code)
	}
}

func TestAltScreen(t *testing.T) {
	t.Parallel()
	ctx, m := ttyManager(t)
	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c",
		`stty -echo; printf 'before\n\033[?1049h\033[H\033[2Jfull screen'; read -r x; printf '\033[?1049lafter\n'`}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := s.Wait(ctx, regexp.MustCompile(`^full screen$`)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if !s.AltScreen() || s.Text() != "full screen" {
		t.Errorf("in vim-like mode: AltScreen() = %v, Text() = %q; want true, %q", s.AltScreen(), s.Text(), "full screen")
	}
	if _, err := s.Process().Write([]byte("q\n")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if s.AltScreen() || s.Text() != "before\nafter" {
		t.Errorf("left: AltScreen() = %v, Text() = %q; want false, %q", s.AltScreen(), s.Text(), "before\nafter")
	}
}

func TestResize(t *testing.T) {
	t.Parallel()
	ctx, m := ttyManager(t)
	// The child waits in sleep, not read: bash runs a trap once the
	// foreground command ends, and a read on the terminal may not end.
	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c",
		`stty -echo; for i in $(seq 20); do echo "line $i"; done
trap 'echo "winch $(stty size)"; printf "%050d"; exit 0' WINCH
echo "ready $(stty size)"; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := s.Wait(ctx, regexp.MustCompile(`^ready 24 80$`)); err != nil {
		t.Fatalf("Wait: %v (%q)", err, s.Text())
	}
	if err := s.Resize(proc.TermSize{Rows: 10, Cols: 40}); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	// The shrink pushed the rows above the cursor's into the scrollback.
	if sb := s.Scrollback(100); len(sb) != 12 || sb[0] != "line 1" || sb[11] != "line 12" {
		t.Errorf("Scrollback(100) after the shrink = %q; want line 1 .. line 12", sb)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v (%q)", err, s.Text())
	}
	// The child saw the new size, and the screen wrapped its 50 columns
	// at 40.
	want := "line 15\nline 16\nline 17\nline 18\nline 19\nline 20\nready 24 80\nwinch 10 40\n" +
		strings.Repeat("0", 40) + "\n" + strings.Repeat("0", 10)
	if got := s.Text(); got != want {
		t.Errorf("Text() = %q; want %q", got, want)
	}
	if row, col := s.Cursor(); row != 9 || col != 10 {
		t.Errorf("Cursor() = %d, %d; want 9, 10", row, col)
	}
	if err := s.Resize(proc.TermSize{Rows: 0, Cols: 40}); !errors.Is(err, proc.ErrInvalid) && !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Resize(0x40) = %v; want ErrInvalid or ErrNotRunning", err)
	}
}

func TestScrollbackBounded(t *testing.T) {
	t.Parallel()
	ctx := ttyCtx(t)
	s := run(t, ctx, `seq 1500`)
	// 1,500 lines and the cursor's blank row on 24 rows: 1..1477 scrolled
	// off, of which the last 1,000 are kept.
	sb := s.Scrollback(5000)
	if len(sb) != screen.ScrollbackRows || sb[0] != "478" || sb[len(sb)-1] != "1477" {
		t.Errorf("Scrollback(5000): %d rows, %q .. %q; want %d, 478 .. 1477", len(sb), sb[0], sb[len(sb)-1], screen.ScrollbackRows)
	}
	if got, want := strings.Join(s.Scrollback(3), ","), "1475,1476,1477"; got != want {
		t.Errorf("Scrollback(3) = %s; want %s (oldest first)", got, want)
	}
	if !strings.HasPrefix(s.Text(), "1478\n") || !strings.HasSuffix(s.Text(), "\n1500") {
		t.Errorf("Text() = %q; want 1478 .. 1500", s.Text())
	}
}

func TestOwnTeeGetsEveryByte(t *testing.T) {
	t.Parallel()
	ctx, m := ttyManager(t)
	own := &testkit.Buffer{}
	s, err := screen.Start(m, proc.StartRequest{
		// The query's reply is read, with echo off: unread, the terminal
		// would echo it onto the screen whenever it came before the exit.
		Args:      []string{"bash", "-c", `stty -echo; printf 'a\033[31mb\033[0m\r\n'; seq 3000; printf '\033[6n'; read -r -d R _`},
		OutputTee: own,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	out := s.Process().Output()
	if out.Truncation != nil {
		t.Fatalf("output truncated: %+v", out.Truncation)
	}
	if own.String() != out.Text {
		t.Errorf("own tee got %d bytes; want the %d of Output", len(own.String()), len(out.Text))
	}
	if !strings.HasPrefix(own.String(), "a\x1b[31mb\x1b[0m\r\r\n1\r\n") || !strings.HasSuffix(s.Text(), "3000") {
		t.Errorf("own tee starts %q, screen ends %q", own.String()[:20], s.Text())
	}
	if s.TeeError() != nil {
		t.Errorf("TeeError() = %v; want nil", s.TeeError())
	}
}

type failingTee struct{ writes int }

var errTeeBroke = errors.New("tee broke")

func (f *failingTee) Write(p []byte) (int, error) {
	f.writes++
	return 0, errTeeBroke
}

func TestOwnTeeFails(t *testing.T) {
	t.Parallel()
	ctx, m := ttyManager(t)
	own := &failingTee{}
	s, err := screen.Start(m, proc.StartRequest{
		Args:      []string{"bash", "-c", `stty -echo; echo first; read -r x; echo second`},
		OutputTee: own,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := s.Wait(ctx, regexp.MustCompile(`^first$`)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := s.Process().Write([]byte("\n")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if _, err := s.Wait(ctx, regexp.MustCompile(`^second$`)); err != nil {
		t.Fatalf("the screen stopped with its own tee: %v (%q)", err, s.Text())
	}
	if err := s.TeeError(); !errors.Is(err, errTeeBroke) {
		t.Errorf("TeeError() = %v; want it to wrap %v", err, errTeeBroke)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if own.writes != 1 {
		t.Errorf("own tee written %d times; want 1 (fed no more after it failed)", own.writes)
	}
	if info := s.Process().Info(); info.TeeError != "" {
		t.Errorf("Info().TeeError = %q; want none: the screen itself did not fail", info.TeeError)
	}
}

func TestWaitEnded(t *testing.T) {
	t.Parallel()
	ctx := ttyCtx(t)
	s := run(t, ctx, `echo done`)
	if row, err := s.Wait(ctx, regexp.MustCompile(`do`)); err != nil || row != "done" {
		t.Errorf("Wait(do) on the final screen = %q, %v; want done", row, err)
	}
	if _, err := s.Wait(ctx, regexp.MustCompile(`never`)); !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Wait(never) = %v; want ErrNotRunning", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Wait(cancelled, regexp.MustCompile(`never`)); !errors.Is(err, context.Canceled) && !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Wait(cancelled) = %v; want context.Canceled", err)
	}
}

func TestWaitCancelled(t *testing.T) {
	t.Parallel()
	ctx, m := ttyManager(t)
	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c", `echo up; read -r x`}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	short, cancel := context.WithCancel(ctx)
	if _, err := s.Wait(short, regexp.MustCompile(`^up$`)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	cancel()
	if _, err := s.Wait(short, regexp.MustCompile(`never`)); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v; want context.Canceled", err)
	}
}

// TestRepliesToDeafChild: a child that asks many questions and never reads
// the answers fills its terminal's input; the goroutine writing the
// replies ends when the Manager closes (goleak in TestMain checks).
func TestRepliesToDeafChild(t *testing.T) {
	t.Parallel()
	ctx := ttyCtx(t)
	m := proc.NewManager(proc.Options{})
	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c",
		`stty raw -echo; for i in $(seq 3000); do printf '\033[6n'; done; echo asked; sleep 60`}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if _, err := s.Wait(ctx, regexp.MustCompile(`^asked$`)); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	m := proctest.NewManager(t, proc.Options{})
	if _, err := screen.Start(m, proc.StartRequest{Args: []string{"true"}, Size: proc.TermSize{Cols: 80}}); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Start(Size 0x80) = %v; want ErrInvalid", err)
	}
	if _, err := screen.Start(nil, proc.StartRequest{Args: []string{"true"}}); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Start(nil) = %v; want ErrInvalid", err)
	}
	if _, err := screen.Start(m, proc.StartRequest{}); runtime.GOOS != "windows" && !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Start(no command) = %v; want ErrInvalid", err)
	}
	if len(m.List()) != 0 {
		t.Errorf("records after failed starts: %d", len(m.List()))
	}
}

// TestRealPrograms runs full-screen programs as a user would: vim and
// less paint on the alternate screen and leave it. It skips a program
// that is not installed (both are on the CI machine).
func TestRealPrograms(t *testing.T) {
	t.Parallel()
	skipWithoutTTY(t)
	t.Run("vim", func(t *testing.T) {
		t.Parallel()
		ctx, m := toolManager(t, "vim")
		file := filepath.Join(t.TempDir(), "notes.txt")
		if err := os.WriteFile(file, []byte("first line\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := screen.Start(m, proc.StartRequest{
			Args: []string{"vim", "-u", "NONE", "-N", "-n", file},
			Env:  map[string]string{"TERM": "xterm-256color"},
			Size: proc.TermSize{Rows: 8, Cols: 40},
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if _, err := s.Wait(ctx, regexp.MustCompile(`notes\.txt`)); err != nil {
			t.Fatalf("Wait: %v (%q)", err, s.Text())
		}
		if !s.AltScreen() {
			t.Errorf("vim: AltScreen() = false")
		}
		if _, err := s.Process().Write([]byte("Ohello \x1b")); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if _, err := s.Wait(ctx, regexp.MustCompile(`^hello$`)); err != nil {
			t.Fatalf("Wait: %v (%q)", err, s.Text())
		}
		if rows := strings.Split(s.Text(), "\n"); len(rows) < 3 || rows[1] != "first line" || rows[2] != "~" {
			t.Errorf("vim's screen: %q", s.Text())
		}
		quitProgram(ctx, t, s, ":q!\r", "vim")
	})
	t.Run("less", func(t *testing.T) {
		t.Parallel()
		ctx, m := toolManager(t, "less")
		file := filepath.Join(t.TempDir(), "long.txt")
		var b strings.Builder
		for i := 1; i <= 100; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := screen.Start(m, proc.StartRequest{
			Args: []string{"less", file},
			Env:  map[string]string{"TERM": "xterm", "LESS": ""},
			Size: proc.TermSize{Rows: 6, Cols: 40},
		})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if _, err := s.Wait(ctx, regexp.MustCompile(`^line 5$`)); err != nil {
			t.Fatalf("Wait: %v (%q)", err, s.Text())
		}
		if _, err := s.Process().Write([]byte(" ")); err != nil { // a page down
			t.Fatalf("Write: %v", err)
		}
		if _, err := s.Wait(ctx, regexp.MustCompile(`^line 10$`)); err != nil {
			t.Fatalf("Wait: %v (%q)", err, s.Text())
		}
		if !s.AltScreen() || strings.Contains(s.Text(), "line 1\n") {
			t.Errorf("less paged: AltScreen() = %v, Text() = %q", s.AltScreen(), s.Text())
		}
		quitProgram(ctx, t, s, "q", "less")
	})
}

// TestSizeCap: a size above 1,000,000 cells is refused at Start, before
// anything starts (on every platform), and at Resize, which leaves the
// terminal as it was; the cap itself is allowed.
func TestSizeCap(t *testing.T) {
	t.Parallel()
	m := proctest.NewManager(t, proc.Options{})
	huge := []proc.TermSize{{Rows: 65535, Cols: 65535}, {Rows: 1000, Cols: 1001}, {Rows: 65535, Cols: 16}, {Rows: 16, Cols: 65535}}
	for _, size := range huge {
		s, err := screen.Start(m, proc.StartRequest{Args: []string{"true"}, Size: size})
		if !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "1000000") || s != nil {
			t.Errorf("Start(Size %dx%d) = %v, %v; want nil and ErrInvalid naming the cap of 1000000", size.Rows, size.Cols, s, err)
		}
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("records after refused starts: %d; want none", n)
	}
	ctx := ttyCtx(t)
	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c", `stty -echo; read x; stty size`}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	for _, size := range huge {
		if err := s.Resize(size); !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "1000000") {
			t.Errorf("Resize(%dx%d) = %v; want ErrInvalid naming the cap of 1000000", size.Rows, size.Cols, err)
		}
	}
	if err := s.Resize(proc.TermSize{Rows: 1000, Cols: 1000}); err != nil {
		t.Fatalf("Resize(1000x1000) = %v; want nil (at the cap)", err)
	}
	if _, err := s.Process().Write([]byte("\n")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if row, err := s.Wait(ctx, regexp.MustCompile(`^\d+ \d+$`)); err != nil || row != "1000 1000" {
		t.Errorf("stty size after the refused resizes = %q, %v; want 1000 1000", row, err)
	}
}

// TestFloodsUnderTerminal: a program that writes 1 MB of combining marks
// on one cell, asks 100,000 questions without reading an answer, and
// writes 1 MB of an OSC string before ending it, runs to its end (nothing
// waits for the answers it never reads), and leaves its text with one
// cell of 16 marks.
func TestFloodsUnderTerminal(t *testing.T) {
	t.Parallel()
	ctx, m := ttyManager(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("Executable: %v", err)
	}
	s, err := screen.Start(m, proc.StartRequest{
		Args: []string{"bash", "-c", `stty raw -echo && exec "$@"`, "bash", exe,
			"1", `"e"`, "524288", `"\u0301"`, "1", `"\r\n"`,
			"100000", `"\x1b[6n"`,
			"1", `"\x1b]0;"`, "131072", `"title..."`, "1", `"\adone"`},
		Env: map[string]string{helperEnv: "flood"},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Process().Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if code := s.Process().Info().ExitCode; code == nil || *code != 0 {
		t.Errorf("exit code %v; want 0", code)
	}
	if got, want := s.Text(), "e"+strings.Repeat("\u0301", 16)+"\ndone"; got != want {
		t.Errorf("Text() = %q; want %q", got, want)
	}
}
