// Package linematch finds the whole lines of a stream that match a set of
// regular expressions. The stream comes in chunks cut anywhere (the reads
// of a pipe); a line is what lies between two '\n', without a trailing
// '\r', matched on at most a given number of bytes. It knows nothing of
// processes or events: package proc turns its matches into events.
//
// The work is linear in the bytes of the stream. A pattern that holds a
// literal (a string every match contains) is only tried on the lines
// that hold it, found at memory speed by a few bytes searched for with
// IndexByte (the anchors) and, for a pattern with one literal, only on
// the window of the line where a match can begin. A pattern without one
// is tried on the lines its form without assertions finds, or on every
// line; [Beside] runs such patterns on a goroutine of their own, fed
// through a bounded backlog, so that they never hold the stream.
//
// A [Stream] is a [Splitter] (the lines of the chunks) feeding a [Matcher]
// (the patterns, tried on them).
package linematch
