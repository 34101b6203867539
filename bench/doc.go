// Package bench compares proc with the baselines a user would otherwise
// reach for: os/exec used directly ("raw") and github.com/go-cmd/cmd
// ("gocmd"). It is its own module so that users of proc never download the
// comparison dependencies.
//
// Every benchmark runs the library and its baselines as sub-benchmarks of
// one function, in the order raw, proc, gocmd. A sub-benchmark that runs
// after its baseline reports its time as a multiple of the baseline's
// ("x-raw"), measured in the same run. On a shared machine those in-run
// ratios, and their medians over several rounds (go run ./cmd/table), are
// the numbers to quote; lone absolute times are not.
//
// The benchmarks need Linux: they run head, seq, sh and true, and read the
// child's exit with waitid.
package bench
