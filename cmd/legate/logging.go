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

// devDelegateLogger is the logger of the delegate of `legate dev`: what
// the terminal shows (term, at the --log-level) and, in the delegate's
// log file, at least info, so the file explains what the delegate did.
func devDelegateLogger(term *slog.Logger, termLevel slog.Level, file *logfile.Writer) *slog.Logger {
	fh := slog.NewTextHandler(file, &slog.HandlerOptions{Level: min(termLevel, slog.LevelInfo)})
	return slog.New(slog.NewMultiHandler(term.Handler(), fh))
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
