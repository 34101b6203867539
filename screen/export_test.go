package screen

// NewEmulator returns the write function of a new emulator of this
// package, for the benchmarks of package screen_test.
func NewEmulator(rows, cols int) func([]byte) {
	t := newTerm(rows, cols, ScrollbackRows)
	return t.write
}
