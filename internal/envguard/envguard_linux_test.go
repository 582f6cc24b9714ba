package envguard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The test binary doubles as the program under test: with ENVGUARD_HELPER
// set, TestMain runs one of the helpers below instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("ENVGUARD_HELPER") {
	case "":
		os.Exit(m.Run())
	case "reexec":
		helperReexec()
	case "harden":
		helperHarden()
	case "dumpable":
		d, err := dumpable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(d)
	case "hold":
		helperHold()
	case "seal":
		helperSeal()
	case "fds":
		_ = json.NewEncoder(os.Stdout).Encode(openFDs())
	default:
		fmt.Fprintln(os.Stderr, "unknown ENVGUARD_HELPER")
		os.Exit(1)
	}
	os.Exit(0)
}

func dumpable() (int, error) {
	r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// report is what the reexec helper prints, as JSON, from the image that
// ends up running.
type report struct {
	PID       int
	Exe       string // the program running, from /proc/self/exe
	Received  bool
	Values    map[string]string
	ReexecErr string
	// ProcEnviron and ProcCmdline are /proc/self/environ and cmdline:
	// what the other processes of the user see.
	ProcEnviron, ProcCmdline string
	// Environ is os.Environ(): what children would inherit.
	Environ []string
	// FDs maps the process's open file descriptors to what they are, and
	// FDsBefore those of the first image before Reexec (not reported by a
	// second image).
	FDs, FDsBefore map[int]string
}

func openFDs() map[int]string {
	fds := map[int]string{}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		n, _ := strconv.Atoi(e.Name())
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			fds[n] = link
		}
	}
	return fds
}

// helperReexec is a program that hides the SECRET_* variables and the
// --token flag: its first image re-executes itself, the second receives
// the values and reports.
func helperReexec() {
	values, received, err := Receive()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	r := report{PID: os.Getpid(), Received: received, Values: values}
	r.Exe, _ = os.Readlink("/proc/self/exe")
	if !received {
		r.FDsBefore = openFDs()
		err := Reexec(Request{
			Secret:      func(name, _ string) bool { return strings.HasPrefix(name, "SECRET_") },
			SecretFlags: []string{"token"},
			Executable:  os.Getenv("ENVGUARD_EXE"),
		})
		if err != nil {
			r.ReexecErr = err.Error()
		}
	}
	env, _ := os.ReadFile("/proc/self/environ")
	cmdline, _ := os.ReadFile("/proc/self/cmdline")
	r.ProcEnviron, r.ProcCmdline, r.Environ = string(env), string(cmdline), os.Environ()
	r.FDs = openFDs()
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func runReexecHelper(t *testing.T, env []string, args ...string) (report, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append([]string{"ENVGUARD_HELPER=reexec", "PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v\nstderr: %s", err, stderr.String())
	}
	var r report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("helper output %q: %v\nstderr: %s", stdout.String(), err, stderr.String())
	}
	return r, cmd.Process.Pid
}

// TestReexecHidesCredentials runs a program that re-executes itself with
// credentials in its environment and on its command line, as a delegate
// does, and checks what the other processes of its user can see then.
func TestReexecHidesCredentials(t *testing.T) {
	t.Parallel()
	const multi = "line one\nline two = with 'quotes' and \"more\""
	r, pid := runReexecHelper(t, []string{"SECRET_A=alpha-secret-1", "SECRET_B=" + multi, "PLAIN=visible"},
		"--keep", "k", "--token", "flag-secret-2", "--", "--token", "after-dashes")
	if r.PID != pid {
		t.Errorf("the new image runs as PID %d, want the same process %d", r.PID, pid)
	}
	if !r.Received || r.ReexecErr != "" {
		t.Fatalf("received %v, re-exec error %q: the program did not re-execute itself", r.Received, r.ReexecErr)
	}
	want := map[string]string{"SECRET_A": "alpha-secret-1", "SECRET_B": multi, "--token": "flag-secret-2"}
	if d := cmp.Diff(want, r.Values); d != "" {
		t.Errorf("values handed over (-want +got):\n%s", d)
	}
	for _, secret := range []string{"alpha-secret-1", "line one", "flag-secret-2"} {
		if strings.Contains(r.ProcEnviron, secret) || strings.Contains(r.ProcCmdline, secret) {
			t.Errorf("/proc/PID/environ or cmdline still shows %q:\nenviron %q\ncmdline %q", secret, r.ProcEnviron, r.ProcCmdline)
		}
		if strings.Contains(strings.Join(r.Environ, "\n"), secret) {
			t.Errorf("os.Environ() shows %q", secret)
		}
	}
	args := strings.Split(strings.TrimSuffix(r.ProcCmdline, "\x00"), "\x00")[1:]
	if d := cmp.Diff([]string{"--keep", "k", "--", "--token", "after-dashes"}, args); d != "" {
		t.Errorf("command line of the new image (-want +got):\n%s", d)
	}
	if !strings.Contains(r.ProcEnviron, "PLAIN=visible") {
		t.Errorf("the other variables must stay: environ %q", r.ProcEnviron)
	}
	// The pipe is closed and FDEnv is gone from what children inherit.
	var fd int
	for _, kv := range strings.Split(r.ProcEnviron, "\x00") {
		if v, ok := strings.CutPrefix(kv, FDEnv+"="); ok {
			fd, _ = strconv.Atoi(v)
		}
	}
	if fd < 3 {
		t.Fatalf("%s not in the new image's initial environment: %q", FDEnv, r.ProcEnviron)
	}
	if link, open := r.FDs[fd]; open && strings.HasPrefix(link, "pipe:") {
		t.Errorf("hand-over pipe (fd %d) still open: %v", fd, r.FDs)
	}
	for _, kv := range r.Environ {
		if strings.HasPrefix(kv, FDEnv+"=") {
			t.Errorf("os.Environ() still has %s", kv)
		}
	}
}

func TestReexecWithNothingToHide(t *testing.T) {
	t.Parallel()
	r, _ := runReexecHelper(t, []string{"PLAIN=visible"}, "--keep")
	if r.Received || r.ReexecErr != "" {
		t.Errorf("received %v, re-exec error %q; want no re-execution and no error", r.Received, r.ReexecErr)
	}
}

// TestReexecIntoAnotherProgram: with Executable set, Reexec executes
// that program even when there is nothing to take out (as a delegate
// switches to its delegate-only binary), and hands over what there is.
func TestReexecIntoAnotherProgram(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other-program")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		env  []string
		want map[string]string
	}{
		{"nothing to take out", []string{"PLAIN=visible"}, map[string]string{}},
		{"a credential", []string{"SECRET_A=alpha"}, map[string]string{"SECRET_A": "alpha"}},
	} {
		r, pid := runReexecHelper(t, append(tt.env, "ENVGUARD_EXE="+other), "--keep")
		if !r.Received || r.ReexecErr != "" || r.PID != pid {
			t.Fatalf("%s: received %v, re-exec error %q, PID %d (want %d): the program was not executed", tt.name, r.Received, r.ReexecErr, r.PID, pid)
		}
		if r.Exe != other {
			t.Errorf("%s: the new image runs %s, want %s", tt.name, r.Exe, other)
		}
		if d := cmp.Diff(tt.want, r.Values, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s: values handed over (-want +got):\n%s", tt.name, d)
		}
	}
}

// TestReexecImpossible: when the program cannot be executed again, Reexec
// says why and the process goes on unchanged, without a leaked pipe.
func TestReexecImpossible(t *testing.T) {
	t.Parallel()
	r, _ := runReexecHelper(t, []string{"SECRET_A=alpha", "ENVGUARD_EXE=/nonexistent/legate"}, "--token", "tok")
	if r.Received || !strings.Contains(r.ReexecErr, "/nonexistent/legate") {
		t.Fatalf("received %v, re-exec error %q; want an error naming the program", r.Received, r.ReexecErr)
	}
	if !slicesContains(r.Environ, "SECRET_A=alpha") {
		t.Errorf("the environment of a process that could not re-execute changed: %q", r.Environ)
	}
	// The readdir of /proc/self/fd opens one descriptor more or less: compare pipes.
	pipes := func(fds map[int]string) map[int]string {
		out := map[int]string{}
		for fd, link := range fds {
			if strings.HasPrefix(link, "pipe:") {
				out[fd] = link
			}
		}
		return out
	}
	if d := cmp.Diff(pipes(r.FDsBefore), pipes(r.FDs)); d != "" {
		t.Errorf("pipes open before and after a failed Reexec (-before +after): the hand-over pipe leaked\n%s", d)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestReceiveRefusesABadDescriptor(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ value, want string }{
		{"x", "not the number of an inherited file descriptor"},
		{"1", "not the number of an inherited file descriptor"},
		{"99", "no such open file descriptor"},
	} {
		cmd := exec.Command(exe)
		cmd.Env = []string{"ENVGUARD_HELPER=reexec", FDEnv + "=" + tt.value}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "unset it") {
			t.Errorf("%s=%s: %v, output %q; want a failure saying %q", FDEnv, tt.value, err, out, tt.want)
		}
	}
	// A regular file is not a hand-over pipe.
	f, err := os.CreateTemp(t.TempDir(), "notapipe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(exe)
	cmd.Env = []string{"ENVGUARD_HELPER=reexec", FDEnv + "=3"}
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not a pipe") {
		t.Errorf("a regular file as fd 3: %v, output %q", err, out)
	}
}

// helperHarden prints its dumpable flag, marks itself not dumpable, prints
// it again and then the flag of a program it executes.
func helperHarden() {
	before, _ := dumpable()
	if err := Harden(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	after, _ := dumpable()
	exe, _ := os.Executable()
	child := exec.Command(exe)
	child.Env = []string{"ENVGUARD_HELPER=dumpable"}
	out, err := child.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d %d %s", before, after, out)
}

func TestHardenIsNotInherited(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{"ENVGUARD_HELPER=harden"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "1 0 1" {
		t.Errorf("dumpable before Harden, after, in a program it runs = %q, want \"1 0 1\"", got)
	}
}

// helperHold marks itself not dumpable when ENVGUARD_HARDEN=1, says ready
// and waits for its stdin to close.
func helperHold() {
	if os.Getenv("ENVGUARD_HARDEN") == "1" {
		if err := Harden(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// The process can still read the /proc files about itself that a
		// delegate reads (metrics, the performance line, cgroups). Not
		// environ: it is owned by root now, and nothing reads it.
		for _, f := range []string{"/proc/self/stat", "/proc/self/statm", "/proc/self/status", "/proc/self/cgroup", "/proc/self/mountinfo"} {
			if _, err := os.ReadFile(f); err != nil {
				fmt.Fprintln(os.Stderr, "read own", f+":", err)
				os.Exit(1)
			}
		}
		if _, err := os.ReadDir("/proc/self/fd"); err != nil {
			fmt.Fprintln(os.Stderr, "list own fds:", err)
			os.Exit(1)
		}
		if _, err := os.Readlink("/proc/self/exe"); err != nil {
			fmt.Fprintln(os.Stderr, "own exe:", err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestHardenStopsSameUserReads runs a process as an unprivileged user and
// reads its environment from another process of that user, as a task
// would read its delegate's: it works until the process calls Harden.
func TestHardenStopsSameUserReads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the processes as another user")
	}
	const nobody = 65534
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the test binary that the unprivileged user may execute.
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "envguard.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	for _, harden := range []bool{false, true} {
		holder := exec.Command(bin)
		holder.Env = []string{"ENVGUARD_HELPER=hold", "ENVGUARD_HARDEN=" + map[bool]string{false: "0", true: "1"}[harden],
			"SECRET_TOKEN=s3cr3t-t0ken"}
		holder.SysProcAttr = cred
		holder.Dir = dir
		stdin, err := holder.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		holder.Stderr = &stderr
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			stdin.Close()
			_ = holder.Wait()
			t.Fatalf("holder said %q; stderr: %s", line, stderr.String())
		}
		reader := exec.Command("cat", fmt.Sprintf("/proc/%d/environ", holder.Process.Pid))
		reader.SysProcAttr = cred
		out, readErr := reader.CombinedOutput()
		stdin.Close()
		if err := holder.Wait(); err != nil {
			t.Fatalf("holder: %v; stderr: %s", err, stderr.String())
		}
		leaked := readErr == nil && strings.Contains(string(out), "s3cr3t-t0ken")
		if leaked == harden {
			t.Errorf("Harden %v: a process of the same user read the environment: %v (output %q)", harden, leaked, out)
		}
	}
}

// helperSeal calls SealDescriptors when ENVGUARD_SEAL=1 and prints, as
// JSON, its open descriptors and those of a program it starts.
func helperSeal() {
	if os.Getenv("ENVGUARD_SEAL") == "1" {
		if err := SealDescriptors(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	exe, _ := os.Executable()
	child := exec.Command(exe)
	child.Env = []string{"ENVGUARD_HELPER=fds"}
	out, err := child.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var childFDs map[int]string
	if err := json.Unmarshal(out, &childFDs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]map[int]string{"own": openFDs(), "child": childFDs})
}

// TestSealDescriptors: a descriptor the process inherited reaches the
// programs it starts, unless it called SealDescriptors; it stays open in
// the process itself.
func TestSealDescriptors(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inherited, err := os.Create(filepath.Join(t.TempDir(), "inherited-descriptor"))
	if err != nil {
		t.Fatal(err)
	}
	defer inherited.Close()
	has := func(fds map[int]string) bool {
		for _, link := range fds {
			if link == inherited.Name() {
				return true
			}
		}
		return false
	}
	for _, seal := range []bool{false, true} {
		cmd := exec.Command(exe)
		cmd.Env = []string{"ENVGUARD_HELPER=seal", "ENVGUARD_SEAL=" + map[bool]string{false: "0", true: "1"}[seal]}
		cmd.ExtraFiles = []*os.File{inherited} // fd 3, not close-on-exec in the helper
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("seal=%v: %v", seal, err)
		}
		var got map[string]map[int]string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("seal=%v: %q: %v", seal, out, err)
		}
		if !has(got["own"]) {
			t.Errorf("seal=%v: the process lost its inherited descriptor: %v", seal, got["own"])
		}
		if has(got["child"]) == seal {
			t.Errorf("seal=%v: a program it starts has the inherited descriptor: %v; its descriptors: %v", seal, has(got["child"]), got["child"])
		}
	}
}
