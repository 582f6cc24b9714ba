package config

import (
	"log/slog"
	"strings"
	"testing"
)

func TestLoggingLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		value   string // "\x00unset": not set
		want    slog.Level
		wantErr bool
	}{
		{value: "\x00unset", want: slog.LevelInfo},
		{value: "", want: slog.LevelInfo},
		{value: "   ", want: slog.LevelInfo},
		{value: "info", want: slog.LevelInfo},
		{value: "INFO", want: slog.LevelInfo},
		{value: "debug", want: slog.LevelDebug},
		{value: " Debug ", want: slog.LevelDebug},
		{value: "TRACE", want: slog.LevelDebug},
		{value: "warn", want: slog.LevelWarn},
		{value: "WARNING", want: slog.LevelWarn},
		{value: "error", want: slog.LevelError},
		{value: "ERROR", want: slog.LevelError},
		{value: "verbose", wantErr: true},
		{value: "info+2", wantErr: true},
		{value: "4", wantErr: true},
		{value: "<LOGGING_LEVEL>", wantErr: true},
		{value: "debug\ninfo", wantErr: true},
	}
	for _, tc := range tests {
		d, err := ReadEnv(env(with(gen1, "LOGGING_LEVEL", tc.value)))
		if tc.wantErr {
			if err == nil {
				t.Errorf("LOGGING_LEVEL=%q: no error", tc.value)
				continue
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "LOGGING_LEVEL=") || strings.Contains(msg, "\n") {
				t.Errorf("LOGGING_LEVEL=%q: error %q; want one line that starts with the variable", tc.value, msg)
			}
			continue
		}
		if err != nil {
			t.Errorf("LOGGING_LEVEL=%q: %v", tc.value, err)
			continue
		}
		if d.LogLevel != tc.want {
			t.Errorf("LOGGING_LEVEL=%q: level %v, want %v", tc.value, d.LogLevel, tc.want)
		}
	}
}

func FuzzParseLogLevel(f *testing.F) {
	for _, s := range []string{"", "debug", "TRACE", "Warning", "error", "info+1", "\xff", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lvl, err := ParseLogLevel("LOGGING_LEVEL", v)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "LOGGING_LEVEL=") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line naming LOGGING_LEVEL", err)
			}
			return
		}
		switch lvl {
		case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
		default:
			t.Fatalf("ParseLogLevel(%q) = %v", v, lvl)
		}
	})
}
