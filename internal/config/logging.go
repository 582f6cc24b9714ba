package config

import (
	"fmt"
	"log/slog"
	"strings"
)

// envLoggingLevel sets the delegate's log level.
const envLoggingLevel = "LOGGING_LEVEL"

// readLogging reads the logging settings of the environment into d.
func readLogging(d *Delegate, get func(string) string) error {
	lvl, err := ParseLogLevel(envLoggingLevel, get(envLoggingLevel))
	if err != nil {
		return err
	}
	d.LogLevel = lvl
	return nil
}

// ParseLogLevel reads a log level given as the setting name (used in the
// error): debug, info, warn (or warning) or error in any case, and TRACE
// as debug for configurations written for logback. Empty means info.
func ParseLogLevel(name, v string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug", "trace":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("%s=%q: must be debug, info, warn or error", name, v)
}
