//go:build unix

package screen_test

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/screen"
)

// An agent's tool shows the model what a terminal would show, not the
// escape sequences, redraws and progress updates the program wrote.
func Example() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	// A program that paints as a TUI does: it clears the screen, draws
	// a box in colour, moves the cursor back into it, and updates a
	// progress line in place.
	s, err := screen.Start(m, proc.StartRequest{
		Args: []string{"sh", "-c", `printf '\033[2J\033[H\033[1;34m+----------+\n|          |\n+----------+\033[0m'
printf '\033[2;3Hbuilding\033[4;1H'
for p in 10 40 70 100; do printf '\rprogress %3d%%' $p; done
printf '\033[2;3Hdone    \033[5;1H'`},
		Size: proc.TermSize{Rows: 10, Cols: 40},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Process().Wait(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Text())
	// Output:
	// +----------+
	// | done     |
	// +----------+
	// progress 100%
}

// Wait watches the screen, not the byte stream: here a full-screen
// program on the alternate screen, which asks the terminal where its
// cursor is before it draws (the screen answers).
func ExampleScreen_Wait() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	s, err := screen.Start(m, proc.StartRequest{Args: []string{"bash", "-c", `stty raw -echo
printf '\033[?1049h\033[H\033[6n'; IFS= read -r -d R pos
printf '\033[5;10HReady (cursor was at %s)' "${pos#??}"
IFS= read -r -n 1 key; printf '\033[?1049l'`}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	row, err := s.Wait(ctx, regexp.MustCompile(`Ready`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q alt=%v\n", row, s.AltScreen())
	_, _ = s.Process().Write([]byte("q"))
	_ = s.Process().Wait(ctx)
	fmt.Printf("alt=%v\n", s.AltScreen())
	// Output:
	// "         Ready (cursor was at 1;1)" alt=true
	// alt=false
}
