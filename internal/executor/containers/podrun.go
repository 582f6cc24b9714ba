package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/kube"
)

// podExec is one run of a container task as a pod: the pod (and its
// Secret) are created, the pod's status and events are watched, its log
// is followed once its container started; the container's exit code ends
// the task. Timeout and cancel delete the pod with the task's grace.
type podExec struct {
	c *Runtime
	p *Pods
	t Task

	out  io.Writer
	kc   *kube.Client
	run  podRun
	made bool // the pod was created: Cleanup deletes it

	stopFollow context.CancelFunc
	done       chan struct{} // closed once follow returned (exit set)
	exit       Exit
	deleteErr  error // what Interrupt or Terminate could not delete

	mu           sync.Mutex
	interrupting bool
}

func (c *Runtime) newPodExec(t Task) (Run, error) {
	if err := checkPod(t.Spec); err != nil {
		return nil, err
	}
	return &podExec{c: c, p: c.Pods, t: t}, nil
}

func (e *podExec) Start(ctx context.Context, out io.Writer) error {
	e.out = out
	kc, err := kube.NewClient(e.p.Config)
	if err != nil {
		return faultf("the Kubernetes API (%s): %v", e.p.Config.Source, err)
	}
	e.kc = kc
	var b [8]byte
	_, _ = rand.Read(b[:])
	e.run = newPodRun(e.c.Owner, hex.EncodeToString(b[:]), e.t, e.p.StartDeadline)
	ns := e.p.Namespace
	var pod struct {
		Metadata struct {
			UID             string `json:"uid"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := kc.Create(ctx, podsPath(ns), mustJSON(podManifest(ns, e.t.Spec, e.run)), &pod); err != nil {
		return podAPIError(fmt.Sprintf("create the task's pod in namespace %s", ns), err)
	}
	e.made = true
	if len(e.run.Secret) > 0 {
		// After the pod, to be owned by it; the kubelet waits for a
		// Secret a pod names.
		if err := kc.Create(ctx, secretsPath(ns), mustJSON(secretManifest(ns, pod.Metadata.UID, e.run)), nil); err != nil {
			return podAPIError(fmt.Sprintf("create the Secret of the task's pod in namespace %s", ns), err)
		}
	}
	fmt.Fprintf(out, "[legate: pod %s/%s created; it must start within %s]\n", ns, e.run.Name, e.p.StartDeadline)
	fctx, cancel := context.WithCancel(context.Background())
	e.stopFollow = cancel
	e.done = make(chan struct{})
	f := &podFollower{e: e, rv: pod.Metadata.ResourceVersion}
	go func() {
		defer close(e.done)
		e.exit = f.follow(fctx)
	}()
	return nil
}

func (e *podExec) Done() <-chan struct{} { return e.done }

func (e *podExec) podPath() string { return podsPath(e.p.Namespace) + "/" + e.run.Name }

// Interrupt deletes the pod with the task's grace: the kubelet sends
// SIGTERM, and SIGKILL after the grace. Done is closed once the pod is
// gone.
func (e *podExec) Interrupt() {
	e.mu.Lock()
	e.interrupting = true
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.kc.DeleteNow(ctx, e.podPath(), e.run.Grace); err != nil && !kube.IsNotFound(err) {
		e.deleteErr = err
	}
}

// Terminate deletes the pod at once (the API's force delete) and stops
// following it.
func (e *podExec) Terminate() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.kc.DeleteNow(ctx, e.podPath(), 0); err != nil && !kube.IsNotFound(err) {
		e.deleteErr = err
	}
	e.stopFollow()
}

func (e *podExec) Finish(stopped bool) Exit {
	if !stopped {
		return e.exit
	}
	what := "deleted the pod " + e.run.Name
	if e.deleteErr != nil {
		what = fmt.Sprintf("deleting the pod %s failed (%v)", e.run.Name, e.deleteErr)
	}
	return Exit{Stopped: what}
}

// Cleanup deletes the pod and its Secret (the Secret goes with the pod
// anyway: it is owned by it), whatever happened before.
func (e *podExec) Cleanup() {
	if e.stopFollow != nil {
		e.stopFollow()
		<-e.done
	}
	if e.kc == nil {
		return
	}
	defer e.kc.Close()
	if !e.made {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, p := range []string{e.podPath(), secretsPath(e.p.Namespace) + "/" + e.run.Name} {
		if err := e.kc.DeleteNow(ctx, p, 0); err != nil && !kube.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(e.out, "\n[legate: delete the task's pod: %v]\n", oneLine(err.Error()))
	}
}

// podStatus is what the follower reads of a pod.
type podStatus struct {
	Metadata struct {
		ResourceVersion   string  `json:"resourceVersion"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Reason     string `json:"reason"`
		Message    string `json:"message"`
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			Name  string `json:"name"`
			State struct {
				Waiting *struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"waiting"`
				Running    *struct{} `json:"running"`
				Terminated *struct {
					ExitCode int    `json:"exitCode"`
					Reason   string `json:"reason"`
					Message  string `json:"message"`
				} `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// podFollower follows one pod to its end.
type podFollower struct {
	e  *podExec
	rv string // the pod's last resource version seen

	// mu guards started, waiting and why (the events' goroutine reads
	// started and sets why).
	mu      sync.Mutex
	started bool   // the container ran (running or terminated seen)
	waiting string // the container's last waiting reason, written once
	why     string // why the pod has not started, for the deadline's error
	logs    chan struct{}
	logStop context.CancelFunc
}

// maxWatchRetries bounds consecutive failed watches of a pod (the API
// unreachable) before the task fails as the delegate's fault.
const maxWatchRetries = 30

// follow watches the pod and its events until the pod ended (its
// container's exit), cannot start within the start deadline, was deleted,
// or ctx ends (Terminate, Cleanup), and returns the outcome.
func (f *podFollower) follow(ctx context.Context) Exit {
	e := f.e
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var evs sync.WaitGroup
	evs.Go(func() { f.events(ctx) })
	defer evs.Wait()
	defer cancel()
	deadline := time.NewTimer(e.p.StartDeadline)
	defer deadline.Stop()
	deadlineC := deadline.C
	if e.p.startDeadline != nil {
		deadlineC = e.p.startDeadline()
	}
	type result struct {
		o    Exit
		done bool
	}
	results := make(chan result, 1)
	failures := 0
	for {
		go func() {
			var r result
			err := e.kc.Watch(ctx, podsPath(e.p.Namespace), "metadata.name="+e.run.Name, f.rv, func(ev kube.WatchEvent) error {
				o, done := f.observe(ctx, ev)
				if done {
					r = result{o, true}
					return errStopWatch
				}
				return nil
			})
			if errors.Is(err, kube.ErrWatchExpired) {
				f.rv = "" // from now: the current pod comes as ADDED
				err = nil
				// A pod deleted meanwhile would not come at all.
				if gerr := e.kc.Get(ctx, e.podPath(), nil); kube.IsNotFound(gerr) {
					r.o, r.done = f.observe(ctx, kube.WatchEvent{Type: "DELETED", Object: []byte("{}")})
				}
			}
			if err != nil && !errors.Is(err, errStopWatch) && ctx.Err() == nil {
				r.o = Exit{Err: faultf("watch the task's pod %s: %v", e.run.Name, err)}
			}
			results <- r
		}()
		var r result
		select {
		case r = <-results:
		case <-deadlineC:
			deadlineC = nil
			if f.hasStarted() {
				r = <-results
				break
			}
			cancel()
			<-results
			return f.startFailed()
		}
		if r.done || ctx.Err() != nil {
			f.waitLogs()
			return r.o
		}
		if r.o.Err != nil {
			if failures++; failures >= maxWatchRetries {
				return r.o
			}
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return r.o
			}
			continue
		}
		failures = 0
	}
}

func (f *podFollower) hasStarted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started
}

// errStopWatch ends a watch whose pod has ended.
var errStopWatch = errors.New("stop")

// observe takes in one event of the pod's watch; done when the pod ended.
func (f *podFollower) observe(ctx context.Context, ev kube.WatchEvent) (Exit, bool) {
	e := f.e
	var p podStatus
	if err := json.Unmarshal(ev.Object, &p); err != nil {
		return Exit{}, false
	}
	if p.Metadata.ResourceVersion != "" {
		f.rv = p.Metadata.ResourceVersion
	}
	if ev.Type == "BOOKMARK" {
		return Exit{}, false
	}
	e.mu.Lock()
	interrupting := e.interrupting
	e.mu.Unlock()
	if ev.Type == "DELETED" {
		if interrupting {
			return Exit{}, true // Finish says why
		}
		return Exit{Err: fmt.Errorf("the task's pod %s was deleted (not by this delegate) before its container ended", e.run.Name)}, true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != podContainer {
			continue
		}
		st := cs.State
		switch {
		case st.Terminated != nil:
			f.startLogs(ctx)
			code := st.Terminated.ExitCode
			if code == 0 {
				return Exit{Code: &code}, true
			}
			msg := fmt.Sprintf("exit status %d", code)
			if st.Terminated.Reason != "" && st.Terminated.Reason != "Error" {
				msg += " (" + st.Terminated.Reason + ")"
			}
			return Exit{Code: &code, Err: errors.New(msg)}, true
		case st.Running != nil:
			f.startLogs(ctx)
		case st.Waiting != nil:
			why := st.Waiting.Reason
			if st.Waiting.Message != "" {
				why += ": " + st.Waiting.Message
			}
			f.mu.Lock()
			f.why = why
			changed := why != f.waiting
			f.waiting = why
			f.mu.Unlock()
			if changed {
				fmt.Fprintf(e.out, "[pod] container waiting: %s\n", oneLine(why))
			}
		}
	}
	if p.Status.Phase == "Failed" && !interrupting {
		// Ended without a container status to say how: evicted, past
		// its active deadline.
		return Exit{Err: fmt.Errorf("the task's pod %s failed: %s %s", e.run.Name, p.Status.Reason, oneLine(p.Status.Message))}, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range p.Status.Conditions {
		if c.Type == "PodScheduled" && c.Status == "False" && f.waiting == "" {
			f.why = c.Reason + ": " + c.Message
		}
	}
	return Exit{}, false
}

// startFailed is the outcome of a pod that did not start within the
// start deadline; it deletes the pod at once.
func (f *podFollower) startFailed() Exit {
	e := f.e
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e.mu.Lock()
	e.interrupting = true
	e.mu.Unlock()
	if err := e.kc.DeleteNow(ctx, e.podPath(), 0); err != nil && !kube.IsNotFound(err) {
		fmt.Fprintf(e.out, "[legate: delete the pod: %v]\n", err)
	}
	f.mu.Lock()
	why := f.why
	f.mu.Unlock()
	if why == "" {
		why = "still pending"
	}
	msg := fmt.Sprintf("the task's pod %s did not start within %s (%s): %s", e.run.Name, e.p.StartDeadline, EnvPodStartDeadline, oneLine(why))
	fmt.Fprintf(e.out, "[legate: %s; deleted it]\n", msg)
	return Exit{Err: errors.New(msg)}
}

// startLogs follows the container's log into the task's output, once.
func (f *podFollower) startLogs(ctx context.Context) {
	f.mu.Lock()
	already := f.started
	f.started = true
	f.mu.Unlock()
	if already {
		return
	}
	e := f.e
	lctx, cancel := context.WithCancel(ctx)
	f.logStop = cancel
	f.logs = make(chan struct{})
	q := url.Values{"follow": {"true"}, "container": {podContainer}}
	go func() {
		defer close(f.logs)
		body, err := e.kc.Stream(lctx, e.podPath()+"/log?"+q.Encode())
		if err != nil {
			if lctx.Err() == nil {
				fmt.Fprintf(e.out, "[legate: the pod's log cannot be read: %v]\n", oneLine(err.Error()))
			}
			return
		}
		defer body.Close()
		_, _ = io.Copy(e.out, body)
	}()
}

// waitLogs waits for the log stream to end, podLogDrain at most.
func (f *podFollower) waitLogs() {
	if f.logs == nil {
		return
	}
	t := time.NewTimer(podLogDrain)
	defer t.Stop()
	select {
	case <-f.logs:
	case <-t.C:
		f.logStop()
		<-f.logs
	}
}

// podEvent is what the follower reads of an Event.
type podEvent struct {
	Metadata struct {
		UID string `json:"uid"`
	} `json:"metadata"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// events writes the pod's events (scheduling, image pulls, back-offs) to
// the task's output as they come, until ctx ends; then those it has not
// seen yet (the pod may end before the watch delivered its events).
func (f *podFollower) events(ctx context.Context) {
	e := f.e
	seen := map[string]int{} // count written, by event
	write := func(x podEvent) {
		n := max(x.Count, 1)
		if n <= seen[x.Metadata.UID] {
			return
		}
		seen[x.Metadata.UID] = n
		times := ""
		if n > 1 {
			times = fmt.Sprintf(" (x%d)", n)
		}
		fmt.Fprintf(e.out, "[pod] %s %s: %s%s\n", x.Type, x.Reason, oneLine(x.Message), times)
		if x.Type == "Warning" {
			// Scheduling and pull failures: the start deadline's why when
			// the pod's status says nothing better.
			f.mu.Lock()
			if !f.started && f.why == "" {
				f.why = x.Reason + ": " + oneLine(x.Message)
			}
			f.mu.Unlock()
		}
	}
	path := "/api/v1/namespaces/" + e.p.Namespace + "/events"
	sel := "involvedObject.name=" + e.run.Name
	for ctx.Err() == nil {
		err := e.kc.Watch(ctx, path, sel, "", func(ev kube.WatchEvent) error {
			var x podEvent
			if json.Unmarshal(ev.Object, &x) == nil && (ev.Type == "ADDED" || ev.Type == "MODIFIED") {
				write(x)
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list struct {
		Items []podEvent `json:"items"`
	}
	if e.kc.List(lctx, path, "", sel, &list) == nil {
		for _, x := range list.Items {
			write(x)
		}
	}
}
