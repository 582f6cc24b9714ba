package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Log frames: a binary form of task output, used where output moves in
// bulk (a delegate's log upload, a follower's log stream) so that its
// bytes are copied, not escaped into JSON and parsed back. A sender uses
// it only when the receiver asked for it (the stream: Accept) or can read
// it (an upload: a manager that cannot answers 400 or 415, and the
// delegate sends JSON instead).
//
// A body is a sequence of frames; each frame is
//
//	kind    1 byte
//	length  uvarint, the payload's length (at most MaxLogFramePayload)
//	payload length bytes
//
// Kinds:
//
//	FrameChunk     one LogChunk: uvarint Seq, uvarint Attempt, varint Time
//	               (Unix nanoseconds; 0 = unset), then Data (the rest)
//	FrameLine      one LogStreamLine as JSON (the stream's final task line)
//	FrameKeepAlive nothing: the stream is alive
//
// An upload carries FrameChunk frames only, with Attempt 0; the epoch they
// belong to is the HeaderLogEpoch header.
const (
	ContentTypeLogFrames = "application/vnd.legate.log-frames"
	// HeaderLogEpoch carries the lease epoch of an upload of log frames.
	HeaderLogEpoch = "Legate-Log-Epoch"

	FrameChunk     byte = 'c'
	FrameLine      byte = 'j'
	FrameKeepAlive byte = 'k'

	// MaxLogFramePayload bounds one frame: a chunk of output (at most
	// 1 MiB; a delegate sends 256 KiB) and its header, or a task line.
	MaxLogFramePayload = 2 << 20
)

// AppendLogFrame appends a frame of kind with payload to b.
func AppendLogFrame(b []byte, kind byte, payload []byte) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// AppendChunkFrame appends c as a FrameChunk to b.
func AppendChunkFrame(b []byte, c LogChunk) []byte {
	return append(AppendChunkFrameHeader(b, c), c.Data...)
}

// AppendChunkFrameHeader appends the frame of c without its data (which
// is to follow it) to b.
func AppendChunkFrameHeader(b []byte, c LogChunk) []byte {
	return appendChunkHeader(b, c.Seq, c.Attempt, c.Time, len(c.Data))
}

// AppendUploadFrame appends the frame of an uploaded chunk (attempt 0)
// numbered seq, taken at t, with data, to b: what AppendChunkFrame makes,
// from bytes.
func AppendUploadFrame(b []byte, seq int64, t time.Time, data []byte) []byte {
	return append(appendChunkHeader(b, seq, 0, t, len(data)), data...)
}

func appendChunkHeader(b []byte, seq int64, attempt int, t time.Time, size int) []byte {
	var hdr [3 * binary.MaxVarintLen64]byte
	h := binary.AppendUvarint(hdr[:0], uint64(seq))
	h = binary.AppendUvarint(h, uint64(max(attempt, 0)))
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	h = binary.AppendVarint(h, ns)
	b = append(b, FrameChunk)
	b = binary.AppendUvarint(b, uint64(len(h)+size))
	return append(b, h...)
}

// ErrLogFrame is wrapped by every error about a malformed frame.
var ErrLogFrame = errors.New("malformed log frame")

// ReadLogFrame reads the next frame from r into buf (grown as needed) and
// returns its kind and payload (which aliases buf). At the end of r
// between frames it returns io.EOF; a frame cut short is
// io.ErrUnexpectedEOF; a frame too large or of an unknown kind wraps
// ErrLogFrame.
func ReadLogFrame(r *bufio.Reader, buf []byte) (kind byte, payload []byte, err error) {
	kind, err = r.ReadByte()
	if err != nil {
		return 0, nil, err // io.EOF between frames
	}
	switch kind {
	case FrameChunk, FrameLine, FrameKeepAlive:
	default:
		return 0, nil, fmt.Errorf("%w: unknown kind %#x", ErrLogFrame, kind)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: length: %v", ErrLogFrame, err)
		}
		return 0, nil, err
	}
	if n > MaxLogFramePayload {
		return 0, nil, fmt.Errorf("%w: payload of %d bytes, at most %d", ErrLogFrame, n, MaxLogFramePayload)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	payload = buf[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return kind, payload, nil
}

// ParseChunkFrame decodes the payload of a FrameChunk.
func ParseChunkFrame(p []byte) (LogChunk, error) {
	seq, n := binary.Uvarint(p)
	if n <= 0 || seq > 1<<62 {
		return LogChunk{}, fmt.Errorf("%w: chunk seq", ErrLogFrame)
	}
	p = p[n:]
	attempt, n := binary.Uvarint(p)
	if n <= 0 || attempt > 1<<30 {
		return LogChunk{}, fmt.Errorf("%w: chunk attempt", ErrLogFrame)
	}
	p = p[n:]
	ns, n := binary.Varint(p)
	if n <= 0 {
		return LogChunk{}, fmt.Errorf("%w: chunk time", ErrLogFrame)
	}
	c := LogChunk{Seq: int64(seq), Attempt: int(attempt), Data: string(p[n:])}
	if ns != 0 {
		c.Time = time.Unix(0, ns).UTC()
	}
	return c, nil
}

// DecodeChunkFrames decodes an upload: a body of FrameChunk frames only.
func DecodeChunkFrames(body []byte) ([]LogChunk, error) {
	var out []LogChunk
	for len(body) > 0 {
		if body[0] != FrameChunk {
			return nil, fmt.Errorf("%w: kind %#x in an upload, want chunks only", ErrLogFrame, body[0])
		}
		n, k := binary.Uvarint(body[1:])
		if k <= 0 {
			return nil, fmt.Errorf("%w: length", ErrLogFrame)
		}
		body = body[1+k:]
		if n > MaxLogFramePayload || n > uint64(len(body)) {
			return nil, fmt.Errorf("%w: payload of %d bytes, %d left in the body (at most %d)", ErrLogFrame, n, len(body), MaxLogFramePayload)
		}
		c, err := ParseChunkFrame(body[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		body = body[n:]
	}
	return out, nil
}
