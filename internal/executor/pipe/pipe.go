// Package pipe copies a task's output pipe to the task's writer, for the
// task types whose output comes from a child process (a shell task's
// bash, a kubernetes deploy's child, a container runtime's CLI). The
// writer may block (back-pressure); once the task's processes were ended,
// a pipe that a process which was not ended still holds is given up after
// a bounded wait instead of keeping the task from ending.
package pipe

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// Idle is how long the output pipe may stay empty, once the task's
// processes were ended, before the copy stops: a process that was not
// ended (a shell task's background process, without an isolator) still
// holds it.
const Idle = time.Second

// drainMax bounds what is read after the task's processes were ended:
// more than a pipe holds (at most 1 MiB unless root raised the limit)
// means a process that was not ended keeps writing.
const drainMax = 4 << 20

// A Reader copies a task's output pipe to its writer. The writer may
// block (back-pressure): the pipe then fills and the task's writes block
// until the output is taken, which keeps the delegate's memory flat.
type Reader struct {
	r    *os.File
	out  io.Writer
	done chan struct{}
	// draining is set once the script's processes were ended: from then
	// on an empty pipe for Idle, or more than drainMax bytes, ends the
	// copy.
	draining atomic.Bool
	held     bool // the copy ended before EOF (valid after done)
}

// Start starts copying r, the read end of a task's output pipe, to out,
// which must never fail (the executor's writer drops what it cannot
// write).
func Start(r *os.File, out io.Writer) *Reader {
	o := &Reader{r: r, out: out, done: make(chan struct{})}
	go o.loop()
	return o
}

func (o *Reader) loop() {
	defer close(o.done)
	buf := make([]byte, 32<<10)
	var drained int
	for {
		draining := o.draining.Load()
		if draining {
			_ = o.r.SetReadDeadline(time.Now().Add(Idle))
		}
		n, err := o.r.Read(buf)
		if n > 0 {
			_, _ = o.out.Write(buf[:n]) // never fails (see Start)
			if draining {
				if drained += n; drained > drainMax {
					o.held = true
					return
				}
			}
		}
		if err != nil {
			o.held = errors.Is(err, os.ErrDeadlineExceeded)
			return
		}
	}
}

// Finish waits until the copy ends: at EOF, once the pipe stayed empty
// for Idle, or after drainMax more bytes. Call it once the task's
// processes were ended. It reports whether the copy ended before EOF (a
// process still holds the pipe).
func (o *Reader) Finish() bool {
	o.draining.Store(true)
	_ = o.r.SetReadDeadline(time.Now().Add(Idle)) // wakes a Read already waiting
	<-o.done
	return o.held
}
