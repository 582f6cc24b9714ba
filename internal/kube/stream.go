package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// Create creates obj (JSON) in the collection at path; the object as the
// API stored it goes into into (unless nil).
func (c *Client) Create(ctx context.Context, path string, obj []byte, into any) error {
	q := url.Values{"fieldManager": {FieldManager}}
	return c.do(ctx, http.MethodPost, path+"?"+q.Encode(), "application/json", obj, into)
}

// DeleteNow deletes the object at path with a grace period in seconds
// (0: at once, the API's force delete; negative: the object's own).
func (c *Client) DeleteNow(ctx context.Context, path string, graceSeconds int64) error {
	q := url.Values{"propagationPolicy": {"Background"}}
	if graceSeconds >= 0 {
		q.Set("gracePeriodSeconds", strconv.FormatInt(graceSeconds, 10))
	}
	return c.do(ctx, http.MethodDelete, path+"?"+q.Encode(), "", nil, nil)
}

// Stream opens the answer of a GET of path (with its query) as a stream
// (a pod's log with follow=true): the caller reads it until its end and
// closes it; ctx ends it.
func (c *Client) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.Server+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "legate")
	token, err := c.cfg.bearer()
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		se := &StatusError{Code: resp.StatusCode, Reason: http.StatusText(resp.StatusCode)}
		var st struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &st) == nil && st.Message != "" {
			se.Message = st.Message
			if st.Reason != "" {
				se.Reason = st.Reason
			}
		}
		return nil, se
	}
	return resp.Body, nil
}

// WatchEvent is one event of a watch: ADDED, MODIFIED, DELETED,
// BOOKMARK or ERROR, and the object.
type WatchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// maxWatchEvent bounds one event of a watch (a pod or an Event).
const maxWatchEvent = 4 << 20

// ErrWatchExpired is a watch's answer that its resourceVersion is too
// old (410 Gone): list again, then watch from the list's version.
var ErrWatchExpired = errors.New("the watch's resource version expired")

// Watch watches the collection at path from resourceVersion (""
// means from now, after the current objects as ADDED) with a field
// selector, calling fn for each event until fn returns an error, the
// stream ends (the API closes watches after a while: nil), or ctx ends.
// An ERROR event ends it with its message (ErrWatchExpired for 410).
func (c *Client) Watch(ctx context.Context, path, fieldSelector, resourceVersion string, fn func(WatchEvent) error) error {
	q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}}
	if fieldSelector != "" {
		q.Set("fieldSelector", fieldSelector)
	}
	if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	body, err := c.Stream(ctx, path+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxWatchEvent)
	for sc.Scan() {
		var ev WatchEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("decode a watch event of %s: %w", path, err)
		}
		if ev.Type == "ERROR" {
			var st struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			if st.Code == http.StatusGone {
				return ErrWatchExpired
			}
			return fmt.Errorf("watch %s: %s", path, st.Message)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	return ctx.Err()
}
