// Package mask hides secret values in task output on the delegate, before
// the output leaves it.
//
// Every occurrence of a secret, and of its encoded forms, becomes
// Replacement. The encoded forms are base64 (standard and URL alphabets,
// padded and unpadded, at each of the three byte offsets at which the
// secret can start inside encoded data, so that base64("user:" + secret)
// of HTTP Basic auth is caught), the contents of a JSON string (with the
// escapes of common encoders) and percent-encoding (query, path and strict
// RFC 3986, upper- and lower-case hex); see forms for the details, such as
// the base64 characters at a secret's ends that mix its bits with its
// neighbours' and stay, and MinEncodedLen for the forms too short to mask.
//
// Occurrences that overlap are masked together: the masked region runs
// from the first byte of the first occurrence to the last byte of the last
// overlapping one, so when one secret is a prefix of another the longest
// match wins and no part of any occurrence is shown. Occurrences that
// merely touch are replaced one by one.
//
// A Writer masks a stream that may split a secret across Write calls in any
// way; it holds back only bytes that may still turn out to be the start of
// a secret and emits everything else at once. String masks a whole string.
// For any chunking of the same input, a Writer followed by Flush produces
// exactly what String produces.
package mask

import (
	"fmt"
	"io"
)

// Replacement is what a secret becomes in output.
const Replacement = "**************"

// Writer copies to an underlying writer with secrets masked. It is not safe
// for concurrent use; serialize calls to Write and Flush.
type Writer struct {
	dst io.Writer
	m   *matcher
	// buf holds bytes received but not yet decided (a possible secret start).
	buf []byte
	// inMask is how many bytes from the start of buf still lie inside a
	// masked region whose Replacement was already written.
	inMask int
	out    []byte
}

// New returns a Writer that copies to dst with every occurrence of each
// secret, and of its encoded forms (see the package comment), replaced by
// Replacement. Empty secrets are ignored.
func New(dst io.Writer, secrets []string) *Writer {
	return &Writer{dst: dst, m: newMatcher(secrets)}
}

// Write masks p and writes what can be decided to the underlying writer.
// Bytes that may be the beginning of a secret are held back until more
// input (or Flush) decides them. It returns len(p) on success.
func (w *Writer) Write(p []byte) (int, error) {
	if w.m.empty() {
		if _, err := w.dst.Write(p); err != nil {
			return 0, fmt.Errorf("mask: write: %w", err)
		}
		return len(p), nil
	}
	data := p
	if len(w.buf) > 0 {
		w.buf = append(w.buf, p...)
		data = w.buf
	}
	var consumed int
	w.out, consumed, w.inMask = w.m.process(w.out[:0], data, w.inMask, false)
	rest := data[consumed:]
	// rest may alias w.buf; copy moves it to the front safely.
	w.buf = append(w.buf[:0], rest...)
	if err := w.emit(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes any bytes held back (a trailing partial match). Call it when
// the stream ends.
func (w *Writer) Flush() error {
	if len(w.buf) == 0 {
		w.inMask = 0
		return nil
	}
	w.out, _, _ = w.m.process(w.out[:0], w.buf, w.inMask, true)
	w.buf = w.buf[:0]
	w.inMask = 0
	return w.emit()
}

func (w *Writer) emit() error {
	if len(w.out) == 0 {
		return nil
	}
	if _, err := w.dst.Write(w.out); err != nil {
		return fmt.Errorf("mask: write: %w", err)
	}
	return nil
}

// String masks s in one go (for error messages and results).
func String(s string, secrets []string) string {
	m := newMatcher(secrets)
	if m.empty() {
		return s
	}
	out, _, _ := m.process(nil, []byte(s), 0, true)
	return string(out)
}

// patterns returns the strings masked for secrets: each non-empty secret
// and its distinct encoded forms.
func patterns(secrets []string) []string {
	var ps []string
	for _, s := range secrets {
		ps = append(ps, forms(s)...)
	}
	return ps
}

// matcher is a byte trie of all patterns.
type matcher struct {
	// root maps a first byte to its node index; 0 means no pattern starts
	// with that byte (node 0 is the root itself).
	root  [256]int32
	nodes []node
	// pairs is a bit set of the first two bytes (c<<8 | d) of every
	// pattern, and single marks the bytes that are a whole pattern: a
	// quick filter of the positions where no pattern can start.
	pairs  [1024]uint64
	single [256]bool
}

type node struct {
	// first is the first child (next 0: none); most nodes have at most
	// one, so more, the others, is rarely allocated.
	first    edge
	more     []edge
	terminal bool // a pattern ends here
	// maxLen is the length of the longest pattern in this subtree.
	maxLen int32
}

type edge struct {
	b    byte
	next int32
}

func newMatcher(secrets []string) *matcher {
	ps := patterns(secrets)
	size := 1
	for _, p := range ps {
		size += len(p)
	}
	m := &matcher{nodes: make([]node, 1, size)}
	for _, p := range ps {
		m.insert(p)
	}
	return m
}

func (m *matcher) empty() bool { return len(m.nodes) == 1 }

func (m *matcher) insert(p string) {
	if len(p) == 1 {
		m.single[p[0]] = true
	} else {
		k := int(p[0])<<8 | int(p[1])
		m.pairs[k>>6] |= 1 << (k & 63)
	}
	n := int32(0)
	l := int32(len(p))
	for i := 0; i < len(p); i++ {
		m.nodes[n].maxLen = max(m.nodes[n].maxLen, l)
		n = m.child(n, p[i], true)
	}
	m.nodes[n].terminal = true
	m.nodes[n].maxLen = max(m.nodes[n].maxLen, l)
}

// child returns the child of n for byte b, creating it if create is set;
// it returns 0 when there is none.
func (m *matcher) child(n int32, b byte, create bool) int32 {
	if n == 0 {
		if c := m.root[b]; c != 0 || !create {
			return c
		}
	} else {
		nd := &m.nodes[n]
		if nd.first.b == b && nd.first.next != 0 {
			return nd.first.next
		}
		for _, e := range nd.more {
			if e.b == b {
				return e.next
			}
		}
		if !create {
			return 0
		}
	}
	c := int32(len(m.nodes))
	m.nodes = append(m.nodes, node{})
	switch nd := &m.nodes[n]; {
	case n == 0:
		m.root[b] = c
	case nd.first.next == 0:
		nd.first = edge{b: b, next: c}
	default:
		nd.more = append(nd.more, edge{b: b, next: c})
	}
	return c
}

// at reports the length of the longest pattern that is a prefix of b
// (full, 0 if none) and, when b itself is a proper prefix of some longer
// pattern, the length of the longest such pattern (partial, else 0).
func (m *matcher) at(b []byte) (full, partial int) {
	n := m.root[b[0]]
	depth := 1
	for n != 0 {
		nd := &m.nodes[n]
		if nd.terminal {
			full = depth
		}
		if depth == len(b) {
			if nd.first.next != 0 {
				partial = int(nd.maxLen)
			}
			return full, partial
		}
		n = m.child(n, b[depth], false)
		depth++
	}
	return full, 0
}

// skip returns the first position from i on where a pattern may start,
// or len(buf).
func (m *matcher) skip(buf []byte, i int) int {
	for ; i+1 < len(buf); i++ {
		c := buf[i]
		if m.root[c] == 0 {
			continue
		}
		k := uint(c)<<8 | uint(buf[i+1])
		if m.pairs[k>>6]&(1<<(k&63)) != 0 || m.single[c] {
			return i
		}
	}
	if i < len(buf) && m.root[buf[i]] == 0 {
		i++
	}
	return i
}

// process masks buf and appends the result to out. inMask is how many bytes
// at the start of buf belong to a masked region already replaced. Unless
// final is set, it stops at the first byte whose fate depends on input not
// yet seen. It returns the extended out, how many bytes of buf it decided,
// and how many bytes after those still belong to the current masked region.
func (m *matcher) process(out, buf []byte, inMask int, final bool) ([]byte, int, int) {
	end := inMask // masked region is buf[:end) (relative to buf)
	run := 0      // start of literal bytes not yet appended
	i := 0
	for i < len(buf) {
		if i >= end {
			// Fast path: skip the bytes where no pattern starts.
			if i = m.skip(buf, i); i == len(buf) {
				break
			}
		}
		full, partial := m.at(buf[i:])
		if final {
			partial = 0
		}
		if i >= end {
			if full == 0 {
				if partial > 0 {
					break // may become a secret: hold back from here
				}
				i++
				continue
			}
			out = append(out, buf[run:i]...)
			out = append(out, Replacement...)
			run = i
			end = i + full
		}
		// Inside a masked region: wait if a longer match could extend it.
		if partial > 0 && i+partial > end {
			break
		}
		if i+full > end {
			end = i + full
		}
		i++
		run = i
	}
	out = append(out, buf[run:i]...)
	rest := end - i
	if rest < 0 {
		rest = 0
	}
	return out, i, rest
}
