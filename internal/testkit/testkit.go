// Package testkit is what the tests of several packages of this module
// share: the dispatch of a test binary run as a helper child, and test
// contexts. Only tests import it.
package testkit

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// RunHelper runs the helper mode of helpers with args and returns its
// exit code; a mode helpers does not have is reported on stderr, with the
// modes it has, and exits 2.
func RunHelper(helpers map[string]func(args []string) int, mode string, args []string) int {
	fn, ok := helpers[mode]
	if !ok {
		names := make([]string, 0, len(helpers))
		for name := range helpers {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "unknown helper %q; have %s\n", mode, strings.Join(names, ", "))
		return 2
	}
	return fn(args)
}

// Ctx returns a context that ends with the test, at the latest after d[0]
// if given, else after def, so that a hang fails instead of stalling the
// run.
func Ctx(t testing.TB, def time.Duration, d ...time.Duration) context.Context {
	t.Helper()
	if len(d) > 0 {
		def = d[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), def)
	t.Cleanup(cancel)
	return ctx
}
