module github.com/procvisor/proc

go 1.24.0

require (
	cdr.dev/slog/v3 v3.0.0-rc1
	github.com/coder/quartz v0.3.1
	github.com/creack/pty v1.1.24
	github.com/google/uuid v1.6.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.38.0
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da
)

require (
	go.opentelemetry.io/otel v1.16.0 // indirect
	go.opentelemetry.io/otel/trace v1.16.0 // indirect
)
