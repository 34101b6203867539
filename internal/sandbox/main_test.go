package sandbox

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// helperEnv names the helper mode when the test binary runs as a child.
const helperEnv = "SANDBOX_TEST_HELPER"

// helpers are the modes the test binary can run as a child, by name; the
// return value is the exit code. Per-OS test files add theirs.
var helpers = map[string]func(args []string) int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		fn, ok := helpers[mode]
		if !ok {
			names := make([]string, 0, len(helpers))
			for name := range helpers {
				names = append(names, name)
			}
			sort.Strings(names)
			fmt.Fprintf(os.Stderr, "unknown helper %q; have %s\n", mode, strings.Join(names, ", "))
			os.Exit(2)
		}
		os.Exit(fn(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
