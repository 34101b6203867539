package screen_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
	"github.com/procvisor/proc/screen"
)

// BenchmarkScreen runs a program under a bare proc TTY (the request
// screen.Start makes, without the screen) and under a Screen, alternately,
// and reports the Screen's time as a multiple of the
// bare TTY's ("x-bare"), measured in the same run: the cost a program
// sees. "seq" scrolls 100,000 plain lines; "redraw" repaints a full
// screen 2,000 times with colours and cursor moves, as a TUI does.
func BenchmarkScreen(b *testing.B) {
	if runtime.GOOS == "windows" {
		b.Skip("proc has terminals on Unix only")
	}
	redraw, env := redrawArgs(2000)
	programs := []struct {
		name string
		req  proc.StartRequest
	}{
		{"seq", proc.StartRequest{Args: []string{"seq", "100000"}}},
		{"redraw", proc.StartRequest{Args: redraw, Env: env}},
	}
	for _, pr := range programs {
		b.Run(pr.name, func(b *testing.B) {
			m := proctest.NewManager(b, proc.Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ReportAllocs()
			var bare, scr time.Duration
			runBare := func() {
				req := pr.req
				req.TTY, req.Stdin = true, true // as screen.Start sets them
				start := time.Now()
				p, err := m.Start(req)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				bare += time.Since(start)
			}
			runScreen := func(check bool) {
				start := time.Now()
				s, err := screen.Start(m, pr.req)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Process().Wait(ctx); err != nil {
					b.Fatal(err)
				}
				scr += time.Since(start)
				if check && pr.name == "redraw" && !strings.Contains(s.Text(), "status: frame 2000") {
					b.Fatalf("last frame missing: %q", s.Text())
				}
			}
			for i := 0; i < b.N; i++ {
				// Alternate which goes first, so that neither always
				// runs on a machine the other just warmed or loaded.
				if i%2 == 0 {
					runBare()
					runScreen(i == 0)
				} else {
					runScreen(false)
					runBare()
				}
			}
			b.ReportMetric(float64(scr)/float64(bare), "x-bare")
		})
	}
}

// BenchmarkEmulator feeds recorded terminal output to this package's
// emulator and to github.com/charmbracelet/x/vt v0.1.0 (the maintained
// emulator it was measured against), on several goroutines, and reports
// x/vt's time as a multiple of this one's ("x-screen"), in the same run.
func BenchmarkEmulator(b *testing.B) {
	for _, in := range []struct {
		name string
		data []byte
	}{
		{"seq", record(b, "seq", "100000")},
		{"redraw", recordRedraw(b, 200)},
	} {
		b.Run(in.name, func(b *testing.B) {
			var own time.Duration
			b.Run("screen", func(b *testing.B) {
				own = feedParallel(b, in.data, func() func([]byte) {
					return screen.NewEmulator(24, 80)
				})
			})
			b.Run("x-vt", func(b *testing.B) {
				theirs := feedParallel(b, in.data, func() func([]byte) {
					e := vt.NewEmulator(80, 24)
					e.SetScrollbackSize(screen.ScrollbackRows)
					return func(p []byte) { _, _ = e.Write(p) }
				})
				if own > 0 {
					b.ReportMetric(float64(theirs)/float64(own), "x-screen")
				}
			})
		})
	}
}

// feedParallel feeds data, in pieces of 4 KiB as a terminal delivers it,
// to a new emulator per operation on every goroutine, and returns the time
// per byte.
func feedParallel(b *testing.B, data []byte, newEmulator func() func([]byte)) time.Duration {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			write := newEmulator()
			for p := data; len(p) > 0; {
				n := min(len(p), 4096)
				write(p[:n])
				p = p[n:]
			}
		}
	})
	return time.Since(start) / time.Duration(max(b.N, 1))
}

// record returns what a program writes to a terminal (with "\r\n" line
// ends, as the terminal's output processing makes them).
func record(b *testing.B, args ...string) []byte {
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		b.Fatal(err)
	}
	return bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
}

func recordRedraw(b *testing.B, frames int) []byte {
	args, env := redrawArgs(frames)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s", k, v))
	}
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	return out
}
