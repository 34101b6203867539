module github.com/procvisor/proc/bench

go 1.24.0

replace github.com/procvisor/proc => ../

require (
	github.com/go-cmd/cmd v1.4.4
	github.com/procvisor/proc v0.0.0-00010101000000-000000000000
	golang.org/x/sys v0.38.0
)

require (
	cdr.dev/slog/v3 v3.0.0-rc1 // indirect
	github.com/coder/quartz v0.3.1 // indirect
	github.com/creack/pty v1.1.24 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/otel v1.16.0 // indirect
	go.opentelemetry.io/otel/trace v1.16.0 // indirect
	golang.org/x/xerrors v0.0.0-20240903120638-7835f813f4da // indirect
)
