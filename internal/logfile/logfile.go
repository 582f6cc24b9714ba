// Package logfile is a rotating log file: an io.Writer, safe for
// concurrent use, that appends to one file (delegate.log) in a directory,
// rolls it daily and when it would pass a size limit, and deletes old rolled
// files by age and by total size.
//
// Rolled files are named after the day of the lines they hold, in the
// local time of the clock: the first roll of a day is NAME.YYYY-MM-DD, the
// next ones (size rolls on the same day) NAME.YYYY-MM-DD.1, .2, and so on.
// Ordered by (date, number), with no number before 1, they are in the order
// they were written; Rolled returns them in that order. The file being
// written is always NAME.
//
// Rules, applied when the writer opens and after every roll:
//   - a file dated more than KeepDays days before today is deleted (today
//     and the previous KeepDays days are kept);
//   - rolled files are deleted oldest first until they and a full current
//     file (MaxSize) fit in MaxTotal, so all the files together never pass
//     MaxTotal. Only a single write larger than MaxSize can pass it.
//
// A day roll happens at the first write of a new day. A write is never
// lost: when a roll fails, the writer keeps appending to the current file,
// reports the error once to Fallback and tries again a minute later.
package logfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults.
const (
	DefaultName     = "delegate.log"
	DefaultMaxSize  = 50 << 20
	DefaultKeepDays = 10
	DefaultMaxTotal = 1 << 30
)

// retryAfter is how long the writer waits, by its clock, before it tries
// again a roll that failed.
const retryAfter = time.Minute

// dateLayout is the date part of rolled file names.
const dateLayout = "2006-01-02"

// Options configures a Writer. Zero values mean the defaults.
type Options struct {
	// Dir is the directory of the log files; it is created (0700) if
	// missing. Required.
	Dir string
	// Name of the current file; default DefaultName.
	Name string
	// MaxSize is the size a file may reach before it is rolled.
	MaxSize int64
	// KeepDays is the number of days before today whose files are kept.
	KeepDays int
	// MaxTotal bounds the size of all log files together; it must be at
	// least MaxSize.
	MaxTotal int64
	// Now is the clock; default time.Now. Days are those of local time.
	Now func() time.Time
	// Fallback receives a line for the first of a run of failures (roll,
	// delete or write); default os.Stderr.
	Fallback io.Writer
}

// Writer is a rotating log file. Create it with Open.
type Writer struct {
	dir, name, path string
	maxSize         int64
	keepDays        int
	maxTotal        int64
	now             func() time.Time
	fallback        io.Writer

	mu   sync.Mutex
	f    *os.File
	size int64
	day  string // the date of the lines in the current file
	// renamed is true when the current file was rolled but the new one
	// could not be opened: f is the rolled file and writes go on there.
	renamed bool
	retryAt time.Time // no roll before this time after a failure
	// Failures reported since the last success, by kind.
	rollFailed, pruneFailed, writeFail bool
}

// Open opens (or creates) the current file for appending, applies the
// retention rules and returns the writer. The lines of an existing file
// are taken to be from the day it was last modified.
func Open(opts Options) (*Writer, error) {
	if opts.Dir == "" {
		return nil, errors.New("logfile: no directory")
	}
	w := &Writer{
		dir: opts.Dir, name: opts.Name, maxSize: opts.MaxSize, keepDays: opts.KeepDays,
		maxTotal: opts.MaxTotal, now: opts.Now, fallback: opts.Fallback,
	}
	if w.name == "" {
		w.name = DefaultName
	}
	if strings.ContainsRune(w.name, filepath.Separator) {
		return nil, fmt.Errorf("logfile: name %q must not contain a path separator", w.name)
	}
	if w.maxSize <= 0 {
		w.maxSize = DefaultMaxSize
	}
	if w.keepDays <= 0 {
		w.keepDays = DefaultKeepDays
	}
	if w.maxTotal <= 0 {
		w.maxTotal = DefaultMaxTotal
	}
	if w.maxTotal < w.maxSize {
		return nil, fmt.Errorf("logfile: total size limit %d is below the file size limit %d", w.maxTotal, w.maxSize)
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.fallback == nil {
		w.fallback = os.Stderr
	}
	w.path = filepath.Join(w.dir, w.name)
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	f, err := openFile(w.path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("log file %s: %w", w.path, err)
	}
	w.f, w.size = f, st.Size()
	w.day = dateOf(w.now())
	if w.size > 0 {
		w.day = dateOf(st.ModTime())
	}
	if err := w.prune(); err != nil {
		w.report(&w.pruneFailed, err)
	}
	return w, nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

func dateOf(t time.Time) string { return t.Local().Format(dateLayout) }

// Write appends p to the current file, rolling it first when the day
// changed or p would take it past MaxSize. It never drops p because a roll
// failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, fmt.Errorf("log file %s: %w", w.path, os.ErrClosed)
	}
	now := w.now()
	if today := dateOf(now); w.size == 0 && !w.renamed {
		w.day = today // nothing to roll
	} else if (w.renamed || today != w.day || w.size+int64(len(p)) > w.maxSize) && !now.Before(w.retryAt) {
		if err := w.roll(today); err != nil {
			w.retryAt = now.Add(retryAfter)
			w.report(&w.rollFailed, fmt.Errorf("%w; still writing to %s", err, w.f.Name()))
		} else {
			w.retryAt, w.rollFailed = time.Time{}, false
			if err := w.prune(); err != nil {
				w.report(&w.pruneFailed, err)
			} else {
				w.pruneFailed = false
			}
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		w.report(&w.writeFail, fmt.Errorf("write log file: %w", err))
		return n, err
	}
	w.writeFail = false
	return n, nil
}

// roll renames the current file after its day and opens a new one dated
// today.
func (w *Writer) roll(today string) error {
	if !w.renamed {
		target, err := w.nextName(w.day)
		if err != nil {
			return err
		}
		err = os.Rename(w.path, target)
		// A current file deleted by someone else is simply replaced.
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("roll log file: %w", err)
		}
		w.renamed = true
	}
	f, err := openFile(w.path)
	if err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		w.report(&w.writeFail, fmt.Errorf("close rolled log file: %w", err))
	}
	w.f, w.size, w.day, w.renamed = f, 0, today, false
	return nil
}

// File is one rolled log file.
type File struct {
	Name string // base name, such as delegate.log.2026-11-21.1
	Date string // YYYY-MM-DD
	N    int    // 0 for the first roll of the day, then 1, 2, ...
	Size int64
}

// Rolled lists the rolled files of name in dir, oldest first.
func Rolled(dir, name string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list log directory: %w", err)
	}
	var out []File
	for _, e := range entries {
		date, n, ok := parseName(name, e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		f := File{Name: e.Name(), Date: date, N: n}
		if info, err := e.Info(); err == nil {
			f.Size = info.Size()
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int {
		if c := strings.Compare(a.Date, b.Date); c != 0 {
			return c
		}
		return a.N - b.N
	})
	return out, nil
}

// parseName recognizes NAME.YYYY-MM-DD and NAME.YYYY-MM-DD.N.
func parseName(name, file string) (date string, n int, ok bool) {
	rest, ok := strings.CutPrefix(file, name+".")
	if !ok || len(rest) < len(dateLayout) {
		return "", 0, false
	}
	date, rest = rest[:len(dateLayout)], rest[len(dateLayout):]
	if _, err := time.Parse(dateLayout, date); err != nil {
		return "", 0, false
	}
	if rest == "" {
		return date, 0, true
	}
	num, ok := strings.CutPrefix(rest, ".")
	if !ok || num == "" || num[0] == '0' || strings.Trim(num, "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return "", 0, false
	}
	return date, n, true
}

// nextName is the path of the next rolled file of day date.
func (w *Writer) nextName(date string) (string, error) {
	files, err := Rolled(w.dir, w.name)
	if err != nil {
		return "", err
	}
	next := 0
	for _, f := range files {
		if f.Date == date {
			next = f.N + 1
		}
	}
	base := w.name + "." + date
	if next > 0 {
		base += "." + strconv.Itoa(next)
	}
	return filepath.Join(w.dir, base), nil
}

// prune deletes rolled files older than KeepDays days, then the oldest
// until the rest and a full current file fit in MaxTotal.
func (w *Writer) prune() error {
	files, err := Rolled(w.dir, w.name)
	if err != nil {
		return err
	}
	t := w.now().Local()
	cutoff := time.Date(t.Year(), t.Month(), t.Day()-w.keepDays, 12, 0, 0, 0, time.Local).Format(dateLayout)
	budget := w.maxTotal - max(w.maxSize, w.size)
	var total int64
	for _, f := range files {
		total += f.Size
	}
	var errs []error
	for _, f := range files {
		if f.Date >= cutoff && total <= budget {
			break // files are oldest first: the rest stay too
		}
		if err := os.Remove(filepath.Join(w.dir, f.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete old log file: %w", err))
			continue
		}
		total -= f.Size
	}
	return errors.Join(errs...)
}

// report writes err to the fallback writer unless *once says it was
// reported already.
func (w *Writer) report(once *bool, err error) {
	if *once {
		return
	}
	*once = true
	fmt.Fprintf(w.fallback, "logfile: %v\n", err)
}

// Close syncs and closes the current file. Later writes fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f = nil
	return errors.Join(f.Sync(), f.Close())
}
