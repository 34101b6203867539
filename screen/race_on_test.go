//go:build race

package screen

// raceEnabled: the race detector slows the emulator's loops about tenfold,
// so the floods of the hostile tests are cut to a tenth under it (their
// bounds are asserted either way).
const raceEnabled = true
