module github.com/procvisor/proc/screen

go 1.24.0

replace github.com/procvisor/proc => ../

require (
	github.com/mattn/go-runewidth v0.0.23
	github.com/procvisor/proc v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da
)

require (
	cdr.dev/slog/v3 v3.0.0-rc1 // indirect
	github.com/clipperhouse/uax29/v2 v2.2.0 // indirect
	github.com/coder/quartz v0.3.1 // indirect
	github.com/creack/pty v1.1.24 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/otel v1.16.0 // indirect
	go.opentelemetry.io/otel/trace v1.16.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
)
