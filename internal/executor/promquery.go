package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxPromAnswerBytes bounds the body of one Prometheus answer a verify
// task reads: one series of at most protocol.MaxVerifyQueryPoints points
// is far less; more is many series (which the task refuses anyway).
const MaxPromAnswerBytes = 2 << 20

// promSeries is one series of a range query's answer: its labels and its
// points, [Unix ms, value], NaN and infinite values left out (JSON cannot
// carry them: they count as missing data).
type promSeries struct {
	Labels  map[string]string
	Points  [][2]float64
	Dropped int // NaN or infinite values left out
}

// promError is an answer of Prometheus with status "error": the query's
// fault (bad_data: a syntax error) unless Transient.
type promError struct {
	Type, Msg string
	HTTP      int
}

func (e *promError) Error() string {
	return fmt.Sprintf("Prometheus answered %d (%s): %s", e.HTTP, e.Type, e.Msg)
}

// Transient reports whether the same query may work later: a timeout, an
// overloaded or unavailable server; not a bad query or a refused login.
func (e *promError) Transient() bool {
	switch e.Type {
	case "bad_data", "auth":
		return false
	}
	return e.HTTP >= 500 || e.Type == "timeout" || e.Type == "canceled" || e.Type == "unavailable"
}

// decodeQueryRange decodes the body of a /api/v1/query_range answer with
// HTTP status code: its series (a matrix), or a promError.
func decodeQueryRange(code int, body []byte) ([]promSeries, error) {
	var a struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string    `json:"metric"`
				Values [][2]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &a); err != nil || a.Status == "" {
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			return nil, &promError{Type: "auth", Msg: "the provider refused the credentials: check its bearer token or username and password", HTTP: code}
		}
		if code/100 != 2 {
			msg := strings.TrimSpace(oneLine(excerpt(cut(body, 300))))
			if msg == "" {
				msg = http.StatusText(code)
			}
			return nil, &promError{Type: "http", Msg: msg, HTTP: code}
		}
		return nil, fmt.Errorf("the provider's answer is not Prometheus's JSON (is the URL Prometheus's base URL?): %s", oneLine(excerpt(cut(body, 200))))
	}
	if a.Status != "success" {
		return nil, &promError{Type: a.ErrorType, Msg: oneLine(a.Error), HTTP: code}
	}
	if a.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("the provider answered a %q, not a matrix", a.Data.ResultType)
	}
	out := make([]promSeries, 0, len(a.Data.Result))
	for _, r := range a.Data.Result {
		s := promSeries{Labels: r.Metric, Points: make([][2]float64, 0, len(r.Values))}
		for _, v := range r.Values {
			var ts float64
			var text string
			if err := json.Unmarshal(v[0], &ts); err != nil {
				return nil, fmt.Errorf("a point's time %s is not a number", cut(v[0], 40))
			}
			if err := json.Unmarshal(v[1], &text); err != nil {
				return nil, fmt.Errorf("a point's value %s is not a quoted number", cut(v[1], 40))
			}
			f, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, fmt.Errorf("a point's value %q is not a number", cut([]byte(text), 40))
			}
			if math.IsNaN(f) || math.IsInf(f, 0) || math.IsNaN(ts) || math.IsInf(ts, 0) {
				s.Dropped++
				continue
			}
			s.Points = append(s.Points, [2]float64{math.Round(ts * 1000), f})
		}
		out = append(out, s)
	}
	return out, nil
}

func cut(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// promClient sends range queries to one Prometheus.
type promClient struct {
	base                       *url.URL
	client                     *http.Client
	bearer, username, password string
	timeout                    time.Duration
}

// queryRange asks for q's series from start to end at step. A network
// error is returned as is (the caller decides whose fault it is).
func (p *promClient) queryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]promSeries, error) {
	u := *p.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/query_range"
	form := url.Values{
		"query": {q},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// POST: a long query does not fit every proxy's URL limit.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	switch {
	case p.bearer != "":
		req.Header.Set("Authorization", "Bearer "+p.bearer)
	case p.username != "":
		req.SetBasicAuth(p.username, p.password)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPromAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the provider's answer: %w", err)
	}
	if len(body) > MaxPromAnswerBytes {
		return nil, errors.New("the provider's answer is larger than 2 MiB: the query yields many series; aggregate it to one (sum(...), max(...))")
	}
	return decodeQueryRange(resp.StatusCode, body)
}
