package proc_test

import (
	"fmt"

	"github.com/procvisor/proc"
)

// Plain leaves text as a terminal would show it: colours and titles
// removed, a progress bar redrawn with \r only in its last state, an
// erased line gone.
func ExamplePlain() {
	raw := "\x1b]0;build\x07\x1b[1mBuilding\x1b[0m 10%\r\x1b[1mBuilding\x1b[0m 100%\n" +
		"Working\rDo\n" +
		"spinner |\b/\b-\b\\\bdone\n" +
		"\x1b[31merror\x1b[0m: none\n"
	fmt.Print(proc.Plain(raw))
	// Output:
	// Building 100%
	// Dorking
	// spinner done
	// error: none
}
