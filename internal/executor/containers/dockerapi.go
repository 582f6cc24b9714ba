package containers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The Docker Engine API backend: a delegate that has no podman or docker
// CLI but a Docker daemon's socket (ECS on EC2 mounts the instance's)
// speaks the daemon's HTTP API over the socket itself. Podman's `podman
// system service` serves the same API.

// Settings and defaults of the Engine API backend.
const (
	// RuntimeDockerAPI is the value of EnvContainerRuntime that selects
	// the Engine API backend, and the runtime name it registers.
	RuntimeDockerAPI = "docker-api"
	// DefaultDockerSocket is where a Docker daemon listens (and where
	// `legate manifest ecs` mounts the instance's socket).
	DefaultDockerSocket = "/var/run/docker.sock"
	// minDockerAPI is the oldest Engine API version the backend speaks
	// (Docker 19.03); every call names it, so a newer daemon answers as
	// that version did.
	minDockerAPI = "1.40"
	// dockerProbeTimeout bounds the version check at the delegate's start.
	dockerProbeTimeout = 10 * time.Second
	// dockerCallTimeout bounds one short API call (create, remove, list).
	dockerCallTimeout = 2 * time.Minute
	// maxPullLines bounds the image pull's progress lines in a task's
	// output; maxPullLine bounds one line.
	maxPullLines = 50
	maxPullLine  = 200
	// logDrain is how long a container's log stream may go on after the
	// container exited before the task stops reading it.
	logDrain = 5 * time.Second
)

// dockerAPI is a minimal Engine API client over a unix socket.
type dockerAPI struct {
	socket string
	hc     *http.Client
}

func newDockerAPI(socket string) *dockerAPI {
	var d net.Dialer
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
		MaxIdleConns:       2,
		IdleConnTimeout:    30 * time.Second,
	}
	return &dockerAPI{socket: socket, hc: &http.Client{Transport: tr}}
}

// apiError is an error status of the API, with the daemon's message.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// isStatus reports whether err is an API error with status code.
func isStatus(err error, code int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == code
}

// send makes one call; the response body is the caller's to close. A
// status of 400 or more is returned as an *apiError (body read and
// closed). Connection errors say what to do about the socket.
func (d *dockerAPI) send(ctx context.Context, method, p string, q url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := "http://docker/v" + minDockerAPI + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, socketError(d.socket, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &m) != nil || m.Message == "" {
			m.Message = strings.TrimSpace(string(b))
		}
		return nil, &apiError{Status: resp.StatusCode, Message: oneLine(m.Message)}
	}
	return resp, nil
}

// call makes one short call, bounded by dockerCallTimeout, and decodes
// its JSON answer into out (nil: discarded).
func (d *dockerAPI) call(ctx context.Context, method, p string, q url.Values, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, dockerCallTimeout)
	defer cancel()
	resp, err := d.send(ctx, method, p, q, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, p, err)
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, p, err)
	}
	return nil
}

// socketError says what to do when the socket cannot be used.
func socketError(socket string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("no Docker API socket at %s: mount the host's %s into the delegate's container (legate manifest ecs does), or set DOCKER_HOST=unix:///path/to/socket", socket, DefaultDockerSocket)
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		owner := ""
		if fi, serr := os.Stat(socket); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				owner = fmt.Sprintf(" (the socket is uid %d gid %d mode %v)", st.Uid, st.Gid, fi.Mode().Perm())
			}
		}
		return fmt.Errorf("permission denied on the Docker API socket %s%s: the delegate runs as uid %d gid %d; give it the socket's group (in an ECS task definition \"user\": \"1000:GID\"; docker run --group-add GID; Kubernetes supplementalGroups) or run it as root (\"user\": \"0\", as legate manifest ecs prints)",
			socket, owner, os.Getuid(), os.Getgid())
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens on the Docker API socket %s: is the Docker daemon (or podman system service) running?", socket)
	}
	return fmt.Errorf("the Docker API socket %s: %w", socket, err)
}

// probe checks that the daemon answers and speaks minDockerAPI or newer.
func (d *dockerAPI) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/version", nil)
	if err != nil {
		return err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return socketError(d.socket, err)
	}
	defer resp.Body.Close()
	var v struct {
		Version    string
		APIVersion string `json:"ApiVersion"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the Docker API socket %s: GET /version: HTTP %d: is it a Docker Engine API?", d.socket, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
		return fmt.Errorf("the Docker API socket %s: GET /version: %w", d.socket, err)
	}
	if !apiVersionAtLeast(v.APIVersion, minDockerAPI) {
		return fmt.Errorf("the Docker daemon on %s speaks API version %q (Docker %s); legate needs %s or newer (Docker 19.03 or newer, podman 3 or newer): upgrade the daemon",
			d.socket, v.APIVersion, v.Version, minDockerAPI)
	}
	return nil
}

// apiVersionAtLeast compares "MAJOR.MINOR" versions.
func apiVersionAtLeast(have, want string) bool {
	parse := func(s string) (int, int, bool) {
		a, b, ok := strings.Cut(s, ".")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		return x, y, ok && err1 == nil && err2 == nil
	}
	hx, hy, ok1 := parse(have)
	wx, wy, _ := parse(want)
	return ok1 && (hx > wx || hx == wx && hy >= wy)
}

// labelFilter is the API's filters parameter for one label.
func labelFilter(label string) url.Values {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	return url.Values{"filters": {string(f)}}
}

// removeContainer kills a container (what asked for a grace had it
// before) and removes it with its anonymous volumes. Not there: nil.
func (d *dockerAPI) removeContainer(ctx context.Context, id string) error {
	_ = d.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/kill", nil, nil, nil)
	err := d.call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
	if isStatus(err, http.StatusNotFound) {
		return nil
	}
	return err
}

// removeVolume removes a volume. Not there: nil.
func (d *dockerAPI) removeVolume(ctx context.Context, name string) error {
	err := d.call(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), url.Values{"force": {"1"}}, nil, nil)
	if isStatus(err, http.StatusNotFound) {
		return nil
	}
	return err
}

// volumeMountpoint is a volume's mount point on the daemon's host; found
// is false when there is no such volume.
func (d *dockerAPI) volumeMountpoint(ctx context.Context, name string) (mountpoint string, found bool, err error) {
	var v struct {
		Mountpoint string
	}
	err = d.call(ctx, http.MethodGet, "/volumes/"+url.PathEscape(name), nil, nil, &v)
	if isStatus(err, http.StatusNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return v.Mountpoint, true, nil
}

// createVolume creates a named volume with labels; exists reports that it
// was there already (Docker answers 201 with the volume that exists;
// podman 409 or 500 saying so).
func (d *dockerAPI) createVolume(ctx context.Context, name string, labels map[string]string) (exists bool, err error) {
	if d.call(ctx, http.MethodGet, "/volumes/"+url.PathEscape(name), nil, nil, nil) == nil {
		return true, nil
	}
	err = d.call(ctx, http.MethodPost, "/volumes/create", nil, map[string]any{"Name": name, "Labels": labels}, nil)
	if err != nil && alreadyExists(err.Error()) {
		return true, nil
	}
	return false, err
}

// sweep removes every container and volume labelled owner=value.
func (d *dockerAPI) sweep(ctx context.Context, label string) (containers, volumes int, err error) {
	var cs []struct {
		ID string `json:"Id"`
	}
	if err := d.call(ctx, http.MethodGet, "/containers/json", mergeQuery(labelFilter(label), url.Values{"all": {"1"}}), nil, &cs); err != nil {
		return 0, 0, err
	}
	var errs []error
	for _, c := range cs {
		if err := d.removeContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		containers++
	}
	var vs struct{ Volumes []struct{ Name string } }
	if err := d.call(ctx, http.MethodGet, "/volumes", labelFilter(label), nil, &vs); err != nil {
		return containers, 0, errors.Join(append(errs, err)...)
	}
	for _, v := range vs.Volumes {
		if err := d.removeVolume(ctx, v.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		volumes++
	}
	return containers, volumes, errors.Join(errs...)
}

func mergeQuery(a, b url.Values) url.Values {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// splitImage splits a reference into the pull's fromImage and tag: a
// reference without a tag or digest is :latest (without a tag the API
// pulls every tag of the repository).
func splitImage(ref string) (image, tag string) {
	if strings.Contains(ref, "@") {
		return ref, ""
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

// ensureImage pulls ref when the daemon does not have it, writing the
// pull's progress to out: one line per layer and status, at most
// maxPullLines.
func (d *dockerAPI) ensureImage(ctx context.Context, ref string, out io.Writer) error {
	for _, seg := range strings.Split(ref, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("container.image %q: not an image reference", ref)
		}
	}
	if d.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, nil) == nil {
		return nil
	}
	image, tag := splitImage(ref)
	q := url.Values{"fromImage": {image}}
	if tag != "" {
		q.Set("tag", tag)
	}
	fmt.Fprintf(out, "[legate: pulling %s]\n", ref)
	resp, err := d.send(ctx, http.MethodPost, "/images/create", q, nil)
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lines, last := 0, map[string]string{}
	for sc.Scan() {
		var m struct {
			Status, ID, Error, Stream string
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Error != "" {
			return fmt.Errorf("pull %s: %s", ref, oneLine(m.Error))
		}
		line := strings.TrimSpace(m.Status + " " + m.ID)
		if line == "" {
			line = strings.TrimSpace(m.Stream)
		}
		if line == "" || last[m.ID] == m.Status && m.Status != "" {
			continue // progress of the same step
		}
		last[m.ID] = m.Status
		if lines++; lines <= maxPullLines {
			if len(line) > maxPullLine {
				line = line[:maxPullLine]
			}
			fmt.Fprintln(out, oneLine(line))
		}
	}
	if lines > maxPullLines {
		fmt.Fprintf(out, "[legate: %d more pull lines not shown]\n", lines-maxPullLines)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	// A daemon may end the stream without an error line and still not
	// have the image.
	if err := d.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, nil); err != nil {
		return fmt.Errorf("pull %s: the image is still missing after the pull: %w", ref, err)
	}
	return nil
}

// demux copies the Engine API's multiplexed log stream (no TTY: frames of
// an 8-byte header, stream and big-endian length, then the payload) to
// out, stdout and stderr alike.
func demux(r io.Reader, out io.Writer) error {
	var hdr [8]byte
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int64(hdr[4])<<24 | int64(hdr[5])<<16 | int64(hdr[6])<<8 | int64(hdr[7])
		if _, err := io.CopyBuffer(out, io.LimitReader(r, n), buf); err != nil {
			return err
		}
	}
}
