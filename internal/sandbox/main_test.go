package sandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/procvisor/proc/internal/testkit"
)

// helperEnv names the helper mode when the test binary runs as a child.
const helperEnv = "SANDBOX_TEST_HELPER"

// helpers are the modes the test binary can run as a child, by name; the
// return value is the exit code. Per-OS test files add theirs.
var helpers = map[string]func(args []string) int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(testkit.RunHelper(helpers, mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}
