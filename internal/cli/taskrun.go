package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// runFlags are the flags of `legate task run`.
type runFlags struct {
	selectors    []string
	timeout      time.Duration
	queueTimeout time.Duration
	retries      int
	priority     string
	env          []string
	secretEnv    []string
	typ          string
	org          string
	project      string
	capabilities []string
	connector    string

	script  string
	file    string
	command []string // after --, a container task's

	httpURL      string
	method       string
	headers      []string
	body         string
	expectStatus int

	container containerFlags
	kube      kubeFlags

	out    outputFlags
	detach bool
}

func (a *app) taskRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run (--script TEXT | --file PATH | --http-url URL | --image IMAGE [-- COMMAND ARG...] | --namespace NS -f MANIFEST...) [flags]",
		Short: "Run a task on a delegate and show its output live",
		Long: `Submit a task, stream its output as the delegate produces it, and exit with
the task's exit code.

A shell task runs a script (--script, or --file; --file - reads stdin). An
http task (--http-url, or --type http) makes an HTTP call from the
delegate's network. A container task (--image) runs in a container on the
delegate (see below). --selector picks delegates that have all the given tags
(or that name or hostname). A task that no known delegate could run (none
the manager has a record of, connected or not, has its tags and scope)
ends not_assigned after one liveness window; a task that a known delegate
that is not connected could run (scaled to zero, one-shot, restarting)
waits for it up to its queue timeout (--queue-timeout). task run, also
with --detach, says which of the two happens.

--capability names something the delegate must reach or have, checked by
the delegate before it takes the task: an HTTP endpoint (http://… or
https://…; any HTTP answer counts), a TCP port (tcp://HOST:PORT) or a
program on PATH (binary:NAME). --connector NAME makes the task inherit the
connector's selectors (unless --selector is given) and its URL as a
capability. --org (and --project) set the task's scope: only delegates whose
scope covers it may run it.

While the task waits in the queue for more than a second, task run says why
on stderr (what legate task explain ID prints), and again when that
changes. If the manager cannot be reached while it follows the task, it says
so, keeps trying, and says when the manager is back. -o json (or --json) and
-o yaml print only the final task object, not the output.

A container task (--image, or --type container) runs the image with the
delegate's container runtime (podman or docker): --script or --file runs a
script with /bin/sh -c in it, arguments after -- replace the image's
entrypoint (argv, no shell), and with neither the image's own entrypoint
runs. --env and --secret-env are the container's environment (nothing of the
delegate's). --workdir, --cpu, --memory set the working directory and
limits; --privileged, --read-only-root, --run-as-user, --run-as-group,
--add-cap and --drop-cap its security context; --volume mounts volumes:

  empty_dir:/ws[:SIZE_MIB]            scratch space for the task alone
  host_path:/HOST:/PATH[:ro]          a path of the delegate's host
  efs:FS_ID:/PATH[:root=/DIR,tls,iam,ap=FSAP_ID]   an Amazon EFS file system

(NAME= before any of them names the volume; else it is named after its
path.) Only delegates with a container runtime take container tasks; on
Fargate a delegate refuses --privileged, host_path and an empty_dir size
outside 21504..204800 MiB. A stored secret, ${secrets.NAME}, may be used in
the script, the command and --env values as in shell tasks. For a longer
container section, write a pipeline (legate pipeline apply): a step takes
the same fields. See docs/task-containers.md.
` + kubeHelp + `
Exit status: the script's exit code; 1 if the task failed without one,
124 if it timed out, 130 if it was cancelled, 3 if no delegate took it (the
reason for each delegate is printed; see also legate task explain ID).
Ctrl-C stops following but leaves the task running.`,
		Example: `  legate task run --script 'echo hello from $(hostname)'
  legate task run --selector linux --timeout 10m --file ./deploy.sh --env STAGE=prod --secret-env API_TOKEN
  legate task run --http-url https://internal.example.com/health --expect-status 200
  legate task run --capability tcp://db.internal:5432 --capability binary:psql --script 'psql -h db.internal -c "select 1"'
  legate task run --org eng --project web --connector k8s-east --script 'kubectl rollout status deploy/web'
  legate task run --detach --script 'sleep 600'
  legate task run --image localhost/debian-min:bookworm --run-as-user 1000 --read-only-root --drop-cap ALL -- id
  legate task run --image golang:1.23 --workdir /src --volume host_path:/srv/app:/src:ro --volume empty_dir:/tmp \
      --memory 2Gi --cpu 1.5 --script 'go test ./...'
  legate task run --type kubernetes --namespace web -f web.yaml -f service.yaml --rollback auto --timeout 5m
  legate task run --type kubernetes --connector k8s-east --namespace web -f web.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (cmd.ArgsLenAtDash() != 0 || !cmd.Flags().Changed("image")) {
				return usagef("unexpected argument %q: a container task's command goes after --image IMAGE and --, as in --image IMG -- id -u", args[0])
			}
			return nil
		},
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			f.command = args
			spec, err := a.buildSpec(cmd, &f)
			if err != nil {
				return err
			}
			return a.runTask(cmd, spec, &f.out, f.detach)
		}),
	}
	f.register(cmd)
	return cmd
}

// register adds the flags of task run to cmd.
func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.selectors, "selector", nil, "run only on a delegate with this tag, name or hostname (repeatable; all must match)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the task after this long, e.g. 90s or 10m (0 = the manager's default)")
	fl.DurationVar(&f.queueTimeout, "queue-timeout", 0, "give up (not_assigned) if no delegate takes the task within this long (0 = the manager's default)")
	fl.IntVar(&f.retries, "retries", 0, "run again on another delegate this many times if the delegate is lost")
	fl.StringVar(&f.priority, "priority", "", "queue priority: low, normal (the default), high, urgent, or 1 (lowest) to 10 (highest); a task that waits gains one level a minute")
	_ = cmd.RegisterFlagCompletionFunc("priority", fixed("low", "normal", "high", "urgent"))
	fl.StringArrayVar(&f.env, "env", nil, "set an environment variable of the task, KEY=VALUE (repeatable)")
	fl.StringArrayVar(&f.secretEnv, "secret-env", nil, "set a secret environment variable, KEY=VALUE, or KEY to take the value from your environment; masked in the output (repeatable)")
	fl.StringVar(&f.typ, "type", "", "task type: shell, http, container or kubernetes (default: http with --http-url, container with --image, kubernetes with -f, else shell)")
	_ = cmd.RegisterFlagCompletionFunc("type", fixed(protocol.TaskTypes()...))
	fl.StringVar(&f.org, "org", "", "organization of the task (default: account level)")
	fl.StringVar(&f.project, "project", "", "project of the task within --org")
	fl.StringArrayVar(&f.capabilities, "capability", nil, "the delegate must reach or have this: "+capabilityForms+" (repeatable)")
	fl.StringVar(&f.connector, "connector", "", "use this connector: inherit its selectors and its URL as a capability")
	fl.StringVar(&f.script, "script", "", "shell script to run (in a container task: in the container)")
	fl.StringVar(&f.file, "file", "", "file with the shell script to run (- for stdin)")
	f.container.add(fl)
	f.kube.add(fl)
	fl.StringVar(&f.httpURL, "http-url", "", "URL for an http task (--url is the manager's URL)")
	fl.StringVar(&f.method, "method", "GET", "HTTP method of an http task")
	fl.StringArrayVar(&f.headers, "header", nil, "HTTP header of an http task, NAME:VALUE (repeatable)")
	fl.StringVar(&f.body, "body", "", "HTTP request body of an http task")
	fl.IntVar(&f.expectStatus, "expect-status", 0, "HTTP status that counts as success (0 = any 2xx)")
	fl.BoolVar(&f.detach, "detach", false, "print the task ID (with -o: the queued task) and exit at once; the task keeps running")
	f.out.add(cmd, formatJSON, formatYAML)
}

// buildSpec turns the flags into a TaskSpec; every error is a usage error.
func (a *app) buildSpec(cmd *cobra.Command, f *runFlags) (protocol.TaskSpec, error) {
	fl := cmd.Flags()
	spec, err := a.commonSpec(fl, f)
	if err != nil {
		return spec, err
	}
	typ := taskType(fl, f.typ)
	if typ != protocol.TaskContainer {
		if err := checkNoContainerFlags(cmd, typ); err != nil {
			return spec, err
		}
	}
	if typ != protocol.TaskKubernetes {
		if err := checkNoKubeFlags(fl, typ); err != nil {
			return spec, err
		}
	}
	spec.Type = typ
	switch typ {
	case protocol.TaskShell:
		spec.Shell, err = shellSpec(cmd, f)
	case protocol.TaskHTTP:
		spec.HTTP, err = httpSpec(fl, f)
	case protocol.TaskContainer:
		spec.Container, err = containerTaskSpec(cmd, f)
	case protocol.TaskKubernetes:
		spec.Kubernetes, err = kubernetesTaskSpec(cmd, f, &spec)
	default:
		return spec, usagef("--type %q: want shell, http, container or kubernetes", typ)
	}
	return spec, err
}

// commonSpec turns the flags every task type has into a TaskSpec without
// its type: selectors, timeouts, retries, scope, capabilities, connector
// and environment.
func (a *app) commonSpec(fl *pflag.FlagSet, f *runFlags) (protocol.TaskSpec, error) {
	spec := protocol.TaskSpec{Selectors: protocol.NormalizeSelectors(f.selectors)}
	if len(spec.Selectors) == 0 {
		spec.Selectors = nil
	}
	var err error
	if spec.TimeoutMS, err = millis("--timeout", f.timeout); err != nil {
		return spec, err
	}
	if spec.QueueTimeoutMS, err = millis("--queue-timeout", f.queueTimeout); err != nil {
		return spec, err
	}
	if f.retries < 0 || f.retries > protocol.MaxTaskRetries {
		return spec, usagef("--retries %d is out of range: use 0 to %d", f.retries, protocol.MaxTaskRetries)
	}
	spec.Retries = f.retries
	if f.priority != "" {
		if spec.Priority, err = protocol.ParsePriority(f.priority); err != nil {
			return spec, usagef("--priority: %v", err)
		}
	}
	if err := checkScopeFlags(f.org, f.project); err != nil {
		return spec, err
	}
	spec.Org, spec.Project = f.org, f.project
	if spec.Capabilities, err = parseCapabilities(f.capabilities); err != nil {
		return spec, err
	}
	spec.Connector = strings.TrimSpace(f.connector)
	if fl.Changed("connector") && spec.Connector == "" {
		return spec, usagef("--connector: want a connector name")
	}
	if spec.Env, err = parseKV("--env", f.env, nil); err != nil {
		return spec, err
	}
	if spec.SecretEnv, err = parseKV("--secret-env", f.secretEnv, a.getenv); err != nil {
		return spec, err
	}
	return spec, nil
}

// taskType is --type, or when not given the type the other flags imply:
// kubernetes with -f, else container with --image, else http with
// --http-url, else shell.
func taskType(fl *pflag.FlagSet, typ string) string {
	if typ == "" {
		typ = protocol.TaskShell
		if fl.Changed("http-url") {
			typ = protocol.TaskHTTP
		}
		if fl.Changed("image") {
			typ = protocol.TaskContainer
		}
		if fl.Changed("manifest") {
			typ = protocol.TaskKubernetes
		}
	}
	return typ
}

// checkNoHTTPFlags refuses the flags of http tasks in a shell or
// container task.
func checkNoHTTPFlags(fl *pflag.FlagSet) error {
	for _, name := range []string{"http-url", "method", "header", "body", "expect-status"} {
		if fl.Changed(name) {
			return usagef("--%s is for http tasks (--type http)", name)
		}
	}
	return nil
}

// shellSpec turns the flags of a shell task into its spec.
func shellSpec(cmd *cobra.Command, f *runFlags) (*protocol.ShellSpec, error) {
	fl := cmd.Flags()
	if err := checkNoHTTPFlags(fl); err != nil {
		return nil, err
	}
	hasScript, hasFile := fl.Changed("script"), fl.Changed("file")
	if hasScript == hasFile {
		msg := "a shell task needs exactly one of --script or --file"
		if !hasScript && fl.Changed("url") {
			msg += " (for an http task use --http-url; --url is the manager's URL)"
		}
		return nil, usageError{msg}
	}
	script := f.script
	if hasFile {
		var err error
		if script, err = readScript(cmd.InOrStdin(), f.file); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(script) == "" {
		return nil, usagef("the script is empty")
	}
	return &protocol.ShellSpec{Script: script}, nil
}

// httpSpec turns the flags of an http task into its spec.
func httpSpec(fl *pflag.FlagSet, f *runFlags) (*protocol.HTTPSpec, error) {
	for _, name := range []string{"script", "file"} {
		if fl.Changed(name) {
			return nil, usagef("--%s is for shell tasks", name)
		}
	}
	if f.httpURL == "" {
		return nil, usagef("an http task needs --http-url")
	}
	u, err := url.Parse(f.httpURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--http-url %q: want an http:// or https:// URL", f.httpURL)
	}
	method := strings.ToUpper(strings.TrimSpace(f.method))
	if method == "" || strings.ContainsAny(method, " \t/:") {
		return nil, usagef("--method %q: want an HTTP method such as GET or POST", f.method)
	}
	if f.expectStatus != 0 && (f.expectStatus < 100 || f.expectStatus > 599) {
		return nil, usagef("--expect-status %d: want an HTTP status between 100 and 599", f.expectStatus)
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return nil, err
	}
	return &protocol.HTTPSpec{Method: method, URL: f.httpURL, Headers: headers, Body: f.body, ExpectStatus: f.expectStatus}, nil
}

// containerTaskSpec turns the flags of a container task, and the command
// after --, into its spec.
func containerTaskSpec(cmd *cobra.Command, f *runFlags) (*protocol.ContainerSpec, error) {
	fl := cmd.Flags()
	if err := checkNoHTTPFlags(fl); err != nil {
		return nil, err
	}
	hasScript, hasFile := fl.Changed("script"), fl.Changed("file")
	if hasScript && hasFile {
		return nil, usagef("give --script or --file, not both")
	}
	if (hasScript || hasFile) && len(f.command) > 0 {
		return nil, usagef("give a script (--script or --file) or a command after --, not both")
	}
	script := f.script
	if hasFile {
		var err error
		if script, err = readScript(cmd.InOrStdin(), f.file); err != nil {
			return nil, err
		}
	}
	if (hasScript || hasFile) && strings.TrimSpace(script) == "" {
		return nil, usagef("the script is empty")
	}
	return f.container.containerSpec(fl, script, f.command)
}

// parseCapabilities checks --capability values and drops repeats, keeping
// the order given.
func parseCapabilities(vals []string) ([]string, error) {
	var out []string
	seen := make(map[string]bool, len(vals))
	for _, v := range vals {
		c, err := parseCapability(v)
		if err != nil {
			return nil, usagef("--capability %v", err)
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}

func millis(flag string, d time.Duration) (int64, error) {
	if d < 0 || d > protocol.MaxTaskTimeoutMS*time.Millisecond {
		return 0, usagef("%s %s is out of range: use a positive duration up to 168h (7 days), such as 90s or 10m", flag, d)
	}
	ms := d.Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return ms, nil
}

// parseKV parses KEY=VALUE flags. With getenv set, a bare KEY takes its
// value from the environment.
func parseKV(flag string, vals []string, getenv func(string) string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vals))
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		k = strings.TrimSpace(k)
		if k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, usagef("%s %q: want KEY=VALUE", flag, v)
		}
		if !ok {
			if getenv == nil {
				return nil, usagef("%s %q: want KEY=VALUE", flag, v)
			}
			if val = getenv(k); val == "" {
				return nil, usagef("%s %s: %s is not set in your environment (or pass %s=VALUE)", flag, k, k, k)
			}
		}
		m[k] = val
	}
	return m, nil
}

func parseHeaders(vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vals))
	for _, v := range vals {
		k, val, ok := strings.Cut(v, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, usagef("--header %q: want NAME:VALUE", v)
		}
		m[k] = strings.TrimSpace(val)
	}
	return m, nil
}

func readScript(stdin io.Reader, path string) (string, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 8<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", usagef("--file %s: %v", path, err)
	}
	return string(b), nil
}

// runTask submits spec, follows its output and turns its outcome into the
// exit status.
func (a *app) runTask(cmd *cobra.Command, spec protocol.TaskSpec, o *outputFlags, detach bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	out, stderr := cmd.OutOrStdout(), io.Writer(&syncWriter{w: cmd.ErrOrStderr()})
	task, err := c.SubmitTask(ctx, spec)
	if err != nil {
		return err
	}
	asJSON := o.structured() // JSON or YAML: the task object instead of the output
	if detach {
		if asJSON {
			return o.print(out, task)
		}
		if _, err := fmt.Fprintln(out, escape(task.ID)); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		detachedOutlook(ctx, c, task, stderr)
		return nil
	}
	show := rawOutput(out, stderr, task.ID)
	if asJSON {
		show = func(protocol.LogStreamLine) error { return nil }
	}
	// While no output comes, say why the task waits, if it does.
	stopWatch := a.queueWatch(ctx, c, task, stderr)
	defer stopWatch()
	fn := func(l protocol.LogStreamLine) error {
		if l.Chunk != nil {
			stopWatch()
		}
		return show(l)
	}
	final, err := c.StreamLogsWith(ctx, task.ID, client.StreamOptions{Follow: true,
		OnEvent: connectionNotices(stderr, c.BaseURL(), task.ID)}, fn)
	stopWatch()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "legate: stopped following task %s; it keeps running (legate task cancel %s to stop it)\n", escape(task.ID), escape(task.ID))
			return &ExitError{Code: ExitInterrupted}
		}
		return fmt.Errorf("task %s was submitted, but following it failed (legate task logs --follow %s): %w", task.ID, task.ID, err)
	}
	if asJSON {
		if err := o.print(out, final); err != nil {
			return err
		}
	}
	code, reason := outcome(final)
	if reason != "" && !asJSON {
		fmt.Fprintln(stderr, escapeLines(reason)) // the task's error is stored data
	}
	if code == 0 {
		return nil
	}
	return &ExitError{Code: code}
}

// outcome maps a finished task to an exit status and, unless it succeeded,
// an explanation: one line, except for not_assigned, whose error names each
// delegate and why it could not take the task, one per line (indented after
// the first).
func outcome(t protocol.Task) (code int, reason string) {
	switch t.Status {
	case protocol.StatusSucceeded:
		return 0, ""
	case protocol.StatusFailed:
		code = ExitFailure
		if t.ExitCode != nil && *t.ExitCode > 0 && *t.ExitCode < 256 {
			code = *t.ExitCode
		}
	case protocol.StatusTimedOut:
		code = ExitTimedOut
	case protocol.StatusCancelled:
		code = ExitInterrupted
	case protocol.StatusNotAssigned:
		code = ExitNotAssigned
	default:
		return ExitFailure, fmt.Sprintf("legate: task %s is still %s", t.ID, t.Status)
	}
	reason = fmt.Sprintf("legate: task %s %s", t.ID, t.Status)
	if t.ExitCode != nil {
		reason += fmt.Sprintf(" (exit code %d)", *t.ExitCode)
	}
	switch {
	case t.Error == "":
	case t.Status == protocol.StatusNotAssigned:
		reason += ": " + indentLines(t.Error)
	default:
		reason += ": " + strings.ReplaceAll(strings.TrimSpace(t.Error), "\n", " ")
	}
	return code, reason
}

// indentLines trims a multi-line text, drops empty lines and indents every
// line after the first by two spaces.
func indentLines(s string) string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n  ")
}

// detachedOutlook says on w what becomes of a detached task that no
// delegate can run now (it ends not_assigned soon, or waits for a known
// delegate that is not connected); nothing when one can run it, or when
// the manager cannot say (the task is submitted either way).
func detachedOutlook(ctx context.Context, c *client.Client, task protocol.Task, w io.Writer) {
	if task.Status != protocol.StatusQueued {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, client.DefaultRequestTimeout)
	defer cancel()
	e, err := c.ExplainTask(ctx, task.ID)
	if err != nil || e.Status != protocol.StatusQueued || e.Outlook == "" {
		return
	}
	fmt.Fprintf(w, "legate: task %s: %s (legate task explain %s)\n", escape(task.ID), escape(e.Outlook), escape(task.ID))
}
