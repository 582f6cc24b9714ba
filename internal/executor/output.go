package executor

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// pipeIdle is how long the output pipe may stay empty, once the script's
// processes were ended, before Run stops reading it: a process that was
// not ended (see Options.Isolator) still holds it.
const pipeIdle = time.Second

// drainMax bounds what Run reads after the script's processes were ended:
// more than a pipe holds (at most 1 MiB unless root raised the limit)
// means a process that was not ended keeps writing.
const drainMax = 4 << 20

// outputReader copies a task's output pipe to its writer. The writer may
// block (back-pressure): the pipe then fills and the task's writes block
// until the output is taken, which keeps the delegate's memory flat.
type outputReader struct {
	r    *os.File
	out  io.Writer
	done chan struct{}
	// draining is set once the script's processes were ended: from then
	// on an empty pipe for pipeIdle, or more than drainMax bytes, ends the
	// copy.
	draining atomic.Bool
	held     bool // the copy ended before EOF (valid after done)
}

func startOutputReader(r *os.File, out io.Writer) *outputReader {
	o := &outputReader{r: r, out: out, done: make(chan struct{})}
	go o.loop()
	return o
}

func (o *outputReader) loop() {
	defer close(o.done)
	buf := make([]byte, 32<<10)
	var drained int
	for {
		draining := o.draining.Load()
		if draining {
			_ = o.r.SetReadDeadline(time.Now().Add(pipeIdle))
		}
		n, err := o.r.Read(buf)
		if n > 0 {
			_, _ = o.out.Write(buf[:n]) // a syncWriter: never fails
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

// finish waits until the copy ends: at EOF, once the pipe stayed empty
// for pipeIdle, or after drainMax more bytes. Call it once the script's
// processes were ended. It reports whether the copy ended before EOF (a
// process still holds the pipe).
func (o *outputReader) finish() bool {
	o.draining.Store(true)
	_ = o.r.SetReadDeadline(time.Now().Add(pipeIdle)) // wakes a Read already waiting
	<-o.done
	return o.held
}
