package proc

import (
	"context"
	stdslog "log/slog"
	"strings"

	"cdr.dev/slog/v3"
)

// StdlibLogger returns a cdr.dev/slog/v3 Logger, for [Options.Logger], that
// hands every entry to h, the handler of a standard-library log/slog
// logger:
//
//	m := proc.NewManager(proc.Options{Logger: proc.StdlibLogger(slog.Default().Handler())})
//
// Each entry becomes one [log/slog.Record] with the entry's time, level and
// message, and its fields (including those carried by the context, see
// cdr.dev/slog/v3.With) as attributes in order; a nested field map becomes
// a group. Names given with Logger.Named travel as a "logger" attribute
// ("proc"), joined by dots. h.Enabled and h.Handle receive the context of
// the logging call, so a handler that reads trace IDs from it sees them.
// Levels map as Debug, Info, Warn, Error; Critical and Fatal are Error+4
// and Error+8. Every level reaches h, which decides what to keep; an error
// from h.Handle is dropped, as a logger has nobody to return it to. Source
// locations are not carried (the record's PC is zero).
//
// A nil h returns a Logger that discards everything. The Logger is safe for
// concurrent use if h is, as log/slog requires of handlers.
func StdlibLogger(h stdslog.Handler) slog.Logger {
	if h == nil {
		return slog.Logger{}
	}
	// Leveled(Debug): the cdr.dev Logger would drop Debug before the sink;
	// the handler's Enabled is the one filter.
	return slog.Make(stdlibSink{h: h}).Leveled(slog.LevelDebug)
}

// stdlibSink is the slog.Sink behind StdlibLogger.
type stdlibSink struct {
	h stdslog.Handler
}

var _ slog.Sink = stdlibSink{}

func (s stdlibSink) LogEntry(ctx context.Context, e slog.SinkEntry) {
	level := stdlibLevel(e.Level)
	if !s.h.Enabled(ctx, level) {
		return
	}
	r := stdslog.NewRecord(e.Time, level, e.Message, 0)
	if len(e.LoggerNames) > 0 {
		r.AddAttrs(stdslog.String("logger", strings.Join(e.LoggerNames, ".")))
	}
	r.AddAttrs(stdlibAttrs(e.Fields)...)
	_ = s.h.Handle(ctx, r)
}

// Sync does nothing: a log/slog handler has no flush.
func (stdlibSink) Sync() {}

// stdlibLevel maps a cdr.dev level onto the standard library's scale, in
// which the named levels are 4 apart.
func stdlibLevel(l slog.Level) stdslog.Level {
	switch l {
	case slog.LevelDebug:
		return stdslog.LevelDebug
	case slog.LevelInfo:
		return stdslog.LevelInfo
	case slog.LevelWarn:
		return stdslog.LevelWarn
	case slog.LevelError:
		return stdslog.LevelError
	case slog.LevelCritical:
		return stdslog.LevelError + 4
	case slog.LevelFatal:
		return stdslog.LevelError + 8
	}
	// Not a named level: keep the distance from Info.
	return stdslog.LevelInfo + 4*stdslog.Level(l-slog.LevelInfo)
}

// stdlibAttrs turns fields into attributes, a nested Map into a group.
func stdlibAttrs(fields slog.Map) []stdslog.Attr {
	attrs := make([]stdslog.Attr, len(fields))
	for i, f := range fields {
		if m, ok := f.Value.(slog.Map); ok {
			attrs[i] = stdslog.Attr{Key: f.Name, Value: stdslog.GroupValue(stdlibAttrs(m)...)}
			continue
		}
		attrs[i] = stdslog.Any(f.Name, f.Value)
	}
	return attrs
}
