package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/protocol"
)

// errStreamIdle cancels a log stream connection that stayed silent too long.
var errStreamIdle = errors.New("log stream idle")

// errLineTooLong reports a log stream line above MaxBodyBytes.
var errLineTooLong = fmt.Errorf("log stream line longer than %d bytes", MaxBodyBytes)

// streamPos is the last chunk a stream delivered.
type streamPos struct {
	seen    bool
	attempt int
	seq     int64
}

// after reports whether chunk k comes after the position.
func (p streamPos) after(k *protocol.LogChunk) bool {
	if !p.seen {
		return true
	}
	return k.Attempt > p.attempt || (k.Attempt == p.attempt && k.Seq > p.seq)
}

// permanentError marks a stream failure that reconnecting cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// StreamLogs reads the output of task id from the manager's NDJSON log
// stream and calls fn for every line: the chunks in order (attempt by
// attempt), then, last, the line that carries the task. It returns that
// final task.
//
// Without follow the stream ends after the chunks stored so far and the
// task line reflects the task's current state. With follow it lasts until
// the task is terminal and its log complete, and chunks arrive as the
// delegate sends them.
//
// If the stream breaks before the task line, StreamLogs reconnects with
// jittered exponential backoff, asking only for chunks after the last one
// fn saw, and skips any chunk the manager repeats, so fn never sees a chunk
// twice. It keeps reconnecting until ctx ends, except that a failure of
// the very first request and error answers that retrying cannot fix (see
// protocol.Code.Recoverable, e.g. not_found) are returned at once. An error
// returned by fn stops the stream and is returned wrapped.
func (c *Client) StreamLogs(ctx context.Context, id string, follow bool, fn func(protocol.LogStreamLine) error) (protocol.Task, error) {
	return c.StreamLogsWith(ctx, id, StreamOptions{Follow: follow}, fn)
}

// StreamOptions are the options of StreamLogsWith. The zero value reads
// the output stored so far, as StreamLogs without follow does.
type StreamOptions struct {
	// Follow keeps the stream open until the task is terminal and its log
	// complete.
	Follow bool
	// OnEvent, when not nil, is told about the stream's connections: each
	// answer of the manager, each break of an open stream and each failed
	// attempt, before the wait for the next one. It is called on the
	// goroutine of StreamLogsWith, so it must not block for long; a caller
	// uses it to say that the manager is unreachable and when it is back.
	OnEvent func(StreamEvent)
}

// StreamEvent is what happened to a log stream's connection.
type StreamEvent struct {
	// Kind says what happened.
	Kind StreamEventKind
	// Err is why the stream broke or the attempt failed (nil for
	// StreamConnected).
	Err error
	// Retry is the wait before the next attempt (0 for StreamConnected).
	Retry time.Duration
}

// StreamEventKind is the kind of a StreamEvent.
type StreamEventKind int

const (
	// StreamConnected: the manager answered a (re)connection and the
	// stream is open.
	StreamConnected StreamEventKind = iota + 1
	// StreamLost: an open stream broke; a new attempt follows after Retry.
	StreamLost
	// StreamFailed: an attempt got no answer (the manager is unreachable)
	// or an error answer; another follows after Retry.
	StreamFailed
)

// StreamLogsWith is StreamLogs with options.
func (c *Client) StreamLogsWith(ctx context.Context, id string, opts StreamOptions, fn func(protocol.LogStreamLine) error) (protocol.Task, error) {
	op := "stream logs of task " + id
	if err := requireID("stream logs", "task ID", id); err != nil {
		return protocol.Task{}, err
	}
	event := opts.OnEvent
	if event == nil {
		event = func(StreamEvent) {}
	}
	var pos streamPos
	b := backoff.Backoff{Min: c.backoffMin, Max: c.backoffMax}
	for first := true; ; first = false {
		task, st, err := c.streamOnce(ctx, id, opts.Follow, &pos, fn, func() { event(StreamEvent{Kind: StreamConnected}) })
		if err == nil {
			return task, nil
		}
		if ctx.Err() != nil {
			return protocol.Task{}, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return protocol.Task{}, fmt.Errorf("%s: %w", op, perm.err)
		}
		if first && st == notConnected {
			return protocol.Task{}, fmt.Errorf("%s: %w", op, err)
		}
		if st == delivered {
			b.Reset()
		}
		sleep := b.Next()
		kind := StreamFailed
		if st != notConnected {
			kind = StreamLost
		}
		event(StreamEvent{Kind: kind, Err: err, Retry: sleep})
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return protocol.Task{}, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// streamState is how far one stream connection got.
type streamState int

const (
	notConnected    streamState = iota // no 2xx answer
	streamConnected                    // a 2xx answer, no line yet
	delivered                          // at least one line (a keep-alive counts)
)

// streamOnce opens the log stream once and reads it until the task line,
// an error or its end; connected is called when the manager answers with
// the stream.
func (c *Client) streamOnce(ctx context.Context, id string, follow bool, pos *streamPos,
	fn func(protocol.LogStreamLine) error, connected func()) (protocol.Task, streamState, error) {
	q := url.Values{}
	if follow {
		q.Set("follow", "1")
	}
	if pos.seen {
		q.Set("after_attempt", strconv.Itoa(pos.attempt))
		q.Set("after_seq", strconv.FormatInt(pos.seq, 10))
	}
	connCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(c.streamIdle, func() { cancel(errStreamIdle) })
	defer idle.Stop()

	req, err := c.newRequest(connCtx, &call{op: "stream logs", method: http.MethodGet,
		path: protocol.PathTasks + "/" + seg(id) + "/logs", query: q,
		accept: protocol.ContentTypeLogFrames + ", application/x-ndjson;q=0.9"})
	if err != nil {
		return protocol.Task{}, notConnected, permanentError{err}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return protocol.Task{}, notConnected, err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := c.checkStatus(resp); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) && !pe.Code.Recoverable() {
			return protocol.Task{}, notConnected, permanentError{err}
		}
		return protocol.Task{}, notConnected, err
	}
	ct := mediaType(resp)
	if notAPI(resp) && ct != protocol.ContentTypeLogFrames && ct != "application/x-ndjson" && ct != "application/json" {
		return protocol.Task{}, notConnected, permanentError{c.notManager(resp)}
	}
	connected()
	st := streamConnected

	br := bufio.NewReaderSize(resp.Body, 64<<10)
	if ct == protocol.ContentTypeLogFrames {
		return c.readFrames(ctx, connCtx, br, idle, pos, fn)
	}
	for {
		line, rerr := readLine(br)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			if errors.Is(rerr, errLineTooLong) {
				return protocol.Task{}, st, permanentError{rerr}
			}
			if cause := context.Cause(connCtx); cause != nil && ctx.Err() == nil {
				rerr = cause // idle watchdog
			}
			return protocol.Task{}, st, fmt.Errorf("read log stream: %w", rerr)
		}
		complete := rerr == nil // newline-terminated
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 {
			var l protocol.LogStreamLine
			if err := json.Unmarshal(trimmed, &l); err != nil {
				if !complete {
					// The connection broke in the middle of a line.
					return protocol.Task{}, st, fmt.Errorf("read log stream: %w", io.ErrUnexpectedEOF)
				}
				return protocol.Task{}, st, permanentError{fmt.Errorf("decode log stream line: %w", err)}
			}
			st = delivered
			idle.Reset(c.streamIdle)
			if l.Chunk != nil {
				if !pos.after(l.Chunk) {
					continue // a repeat after a reconnect
				}
				if err := fn(protocol.LogStreamLine{Chunk: l.Chunk}); err != nil {
					return protocol.Task{}, st, permanentError{err}
				}
				*pos = streamPos{seen: true, attempt: l.Chunk.Attempt, seq: l.Chunk.Seq}
			}
			if l.Task != nil {
				if err := fn(protocol.LogStreamLine{Task: l.Task}); err != nil {
					return protocol.Task{}, st, permanentError{err}
				}
				return *l.Task, st, nil
			}
		} else if complete {
			st = delivered // keep-alive
			idle.Reset(c.streamIdle)
		}
		if !complete {
			return protocol.Task{}, st, fmt.Errorf("read log stream: ended before the task line: %w", io.ErrUnexpectedEOF)
		}
	}
}

// readFrames reads a log stream of log frames (the manager's answer to a
// client that accepts them: output is not escaped into JSON) as streamOnce
// reads NDJSON.
func (c *Client) readFrames(ctx, connCtx context.Context, br *bufio.Reader, idle *time.Timer, pos *streamPos,
	fn func(protocol.LogStreamLine) error) (protocol.Task, streamState, error) {
	st := streamConnected
	var buf []byte
	for {
		kind, p, err := protocol.ReadLogFrame(br, buf)
		switch {
		case errors.Is(err, protocol.ErrLogFrame):
			return protocol.Task{}, st, permanentError{fmt.Errorf("read log stream: %w", err)}
		case errors.Is(err, io.EOF):
			return protocol.Task{}, st, fmt.Errorf("read log stream: ended before the task line: %w", io.ErrUnexpectedEOF)
		case err != nil:
			if cause := context.Cause(connCtx); cause != nil && ctx.Err() == nil {
				err = cause // idle watchdog
			}
			return protocol.Task{}, st, fmt.Errorf("read log stream: %w", err)
		}
		buf = p[:0] // a chunk's data is copied out of it
		st = delivered
		idle.Reset(c.streamIdle)
		switch kind {
		case protocol.FrameChunk:
			ch, err := protocol.ParseChunkFrame(p)
			if err != nil {
				return protocol.Task{}, st, permanentError{fmt.Errorf("read log stream: %w", err)}
			}
			if !pos.after(&ch) {
				continue // a repeat after a reconnect
			}
			if err := fn(protocol.LogStreamLine{Chunk: &ch}); err != nil {
				return protocol.Task{}, st, permanentError{err}
			}
			*pos = streamPos{seen: true, attempt: ch.Attempt, seq: ch.Seq}
		case protocol.FrameLine:
			var l protocol.LogStreamLine
			if err := json.Unmarshal(p, &l); err != nil {
				return protocol.Task{}, st, permanentError{fmt.Errorf("decode log stream line: %w", err)}
			}
			if l.Task != nil {
				if err := fn(protocol.LogStreamLine{Task: l.Task}); err != nil {
					return protocol.Task{}, st, permanentError{err}
				}
				return *l.Task, st, nil
			}
		}
	}
}

// readLine reads one line including its '\n'. At the end of the stream it
// returns what is left and io.EOF; a line longer than MaxBodyBytes is an
// error. The result is valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		switch {
		case err == nil && buf == nil:
			return frag, nil
		case err == nil:
			return append(buf, frag...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, frag...)
			if len(buf) > MaxBodyBytes {
				return nil, errLineTooLong
			}
		default:
			return append(buf, frag...), err
		}
	}
}
