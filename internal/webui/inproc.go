package webui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// inproc is an http.RoundTripper that serves each request with the
// manager's API handler in this process: the UI is a client of the API
// like the CLI, without a network hop, so it gets exactly the API's
// authentication, rules, audit and masking. Answers stream: the body is a
// pipe the handler writes into while the caller reads.
type inproc struct{ h http.Handler }

type originKey struct{}

// withOrigin carries what the API needs of the browser's request to the
// API requests made for it: its address (sign-in pacing and the audit log
// name it), and the host and TLS state it reached the manager with (what
// the API says its own URL is, in a manifest).
func withOrigin(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, originKey{}, r)
}

func (t inproc) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	r := req.Clone(ctx)
	if o, ok := ctx.Value(originKey{}).(*http.Request); ok {
		r.RemoteAddr, r.Host, r.TLS = o.RemoteAddr, o.Host, o.TLS
	}
	r.RequestURI = req.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				w.send(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("API handler panicked: %v", p))
				return
			}
			w.send(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		pr.CloseWithError(ctx.Err())
		cancel()
		<-done
		return nil, ctx.Err()
	}
	return &http.Response{
		Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &pipeBody{pr: pr, cancel: cancel, done: done}, ContentLength: -1, Request: req,
	}, nil
}

// pipeBody is an answer's body; closing it ends the handler and waits
// for it, so no goroutine outlives the call.
type pipeBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *pipeBody) Close() error {
	b.pr.Close()
	b.cancel()
	<-b.done
	return nil
}

// pipeWriter is the handler's http.ResponseWriter.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed once status and sent are set
	status int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) send(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return
	}
	w.send(code)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.send(http.StatusOK)
	return w.pw.Write(p)
}

// Flush sends the header; the body is not buffered.
func (w *pipeWriter) Flush() { w.send(http.StatusOK) }
