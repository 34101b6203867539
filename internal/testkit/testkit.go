// Package testkit is what the tests of several packages of this module
// share: the dispatch of a test binary run as a helper child, and test
// contexts. Only tests import it.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
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

// EachParallel runs f as parallel subtests of t, one for each of names.
func EachParallel(t *testing.T, names []string, f func(t *testing.T, name string)) {
	t.Helper()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, name)
		})
	}
}

// Buffer is a bytes.Buffer that Write and String may use at once: a tee
// that a test reads while a pump writes to it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
