package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/legate-dev/legate/internal/logfile"
)

// openDelegateLog opens the delegate's rotating log file, WORKDIR/delegate.log.
// Failures to roll it are reported on stderr.
func openDelegateLog(workDir string) (*logfile.Writer, error) {
	lf, err := logfile.Open(logfile.Options{Dir: workDir, Fallback: os.Stderr})
	if err != nil {
		return nil, fmt.Errorf("delegate log file in %s: %w", workDir, err)
	}
	return lf, nil
}

// delegateLogger is the logger of `legate delegate`: each line goes, the
// same, to stdout (for containers) and to the log file.
func delegateLogger(level slog.Level, stdout io.Writer, file *logfile.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(tee{stdout, file}, &slog.HandlerOptions{Level: level}))
}

// tee writes each write to every writer, even when an earlier one fails.
type tee []io.Writer

func (t tee) Write(p []byte) (int, error) {
	var errs []error
	for _, w := range t {
		if _, err := w.Write(p); err != nil {
			errs = append(errs, err)
		}
	}
	return len(p), errors.Join(errs...)
}
