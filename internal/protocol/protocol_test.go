package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMissingSelectors(t *testing.T) {
	tests := []struct {
		name      string
		selectors []string
		tags      []string
		dname     string
		host      string
		want      []string
	}{
		{"no selectors", nil, nil, "d", "h", nil},
		{"tag match", []string{"linux"}, []string{"linux", "docker"}, "d", "h", nil},
		{"case and space", []string{"  LINUX "}, []string{"Linux"}, "d", "h", nil},
		{"implicit name", []string{"Build-Delegate"}, nil, "build-delegate", "h", nil},
		{"implicit hostname", []string{"host-7"}, []string{"x"}, "d", "HOST-7", nil},
		{"all required", []string{"linux", "gpu"}, []string{"linux"}, "d", "h", []string{"gpu"}},
		{"none present", []string{"a", "b"}, []string{"c"}, "d", "h", []string{"a", "b"}},
		{"empty selector ignored", []string{"", " "}, nil, "d", "h", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MissingSelectors(tt.selectors, tt.tags, tt.dname, tt.host)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("MissingSelectors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeSelectors(t *testing.T) {
	got := NormalizeSelectors([]string{" B", "a", "b", "", "A "})
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"aws", "ecs", "production"}, SplitTags("aws, ECS ,production,")); diff != "" {
		t.Errorf("SplitTags (-want +got):\n%s", diff)
	}
	if SplitTags("  ") != nil {
		t.Error("SplitTags of blank should be nil")
	}
}

func TestTerminalAndValid(t *testing.T) {
	for _, s := range []string{StatusSucceeded, StatusFailed, StatusTimedOut, StatusNotAssigned, StatusCancelled} {
		if !Terminal(s) || !ValidStatus(s) {
			t.Errorf("%s should be terminal and valid", s)
		}
	}
	for _, s := range []string{StatusQueued, StatusRunning} {
		if Terminal(s) || !ValidStatus(s) {
			t.Errorf("%s should be valid and not terminal", s)
		}
	}
	if ValidStatus("done") {
		t.Error("unknown status accepted")
	}
}

func TestRecoverableTable(t *testing.T) {
	for code, want := range map[Code]bool{
		CodeUnauthenticated: false, CodeTokenRevoked: false, CodeStaleLease: false, CodeAPIKeyRevoked: false, CodeIdentityConflict: false, CodeDelegateRejected: false, CodeDeploymentLimit: false, CodeDelegateExpired: false, CodeUnknownFrame: false,
		CodeInternal: true, CodeUnavailable: true, CodeSessionExpired: true, CodeNoCapacity: true, CodeRateLimited: true, CodeDuplicateIdentity: true,
		CodeOverloaded:           true,
		Code("some_future_code"): true,
	} {
		if got := code.Recoverable(); got != want {
			t.Errorf("%s.Recoverable() = %v, want %v", code, got, want)
		}
	}
}

// TestDecodeError: an error body is decoded as sent; any other body gives
// CodeUnavailable (worth a retry) for 5xx, 408 and 429, and
// CodeBadRequest for other statuses, with the text as the message.
func TestDecodeError(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   Error
	}{
		{"error body", 409, `{"error":{"code":"stale_lease","message":"old"}}`, Error{Code: CodeStaleLease, Message: "old", Status: 409}},
		{"error body without a message", 500, `{"error":{"code":"internal"}}`, Error{Code: CodeInternal, Message: "HTTP 500", Status: 500}},
		{"5xx page of a proxy", 502, "<html>bad gateway</html>", Error{Code: CodeUnavailable, Message: "<html>bad gateway</html>", Status: 502}},
		{"empty 503", 503, "", Error{Code: CodeUnavailable, Message: "HTTP 503", Status: 503}},
		{"408", 408, "timeout", Error{Code: CodeUnavailable, Message: "timeout", Status: 408}},
		{"429", 429, "slow down", Error{Code: CodeUnavailable, Message: "slow down", Status: 429}},
		{"empty 404", 404, "", Error{Code: CodeBadRequest, Message: "HTTP 404", Status: 404}},
		{"JSON that is not an error body", 400, `{"x":1}`, Error{Code: CodeBadRequest, Message: `{"x":1}`, Status: 400}},
		{"long text is cut", 500, long, Error{Code: CodeUnavailable, Message: long[:200] + "...", Status: 500}},
	} {
		if diff := cmp.Diff(tt.want, *DecodeError(tt.status, []byte(tt.body))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestSupported: a manager serves every client version from MinVersion
// on, newer than its own included.
func TestSupported(t *testing.T) {
	for v, want := range map[int]bool{
		MinVersion - 1: false, MinVersion: true, Version - 1: true, Version: true, Version + 1: true, Version + 100: true,
	} {
		if got := Supported(v); got != want {
			t.Errorf("Supported(%d) = %v, want %v", v, got, want)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	exit := 3
	now := time.Date(2026, 11, 22, 7, 0, 0, 123456000, time.UTC)
	values := []any{
		&RegisterRequest{ProtocolVersion: 1, AccountID: "a", Token: "t", Name: "n", Hostname: "h", IP: "10.0.0.1", Tags: []string{"x"}, Capacity: 2, Running: []RunningTask{{ID: "t1", Epoch: 2}}},
		&Event{Kind: EventHeartbeatAck, Seq: 9, Abort: []string{"t1"}},
		&Frame{Kind: FrameHeartbeat, Heartbeat: &Heartbeat{Seq: 1, Running: []RunningTask{{ID: "t", Epoch: 1}}}},
		&Frame{Kind: FrameStarted, Req: 4, TaskID: "t", Started: &StartedRequest{Epoch: 2}},
		&Frame{Kind: FrameResult, Req: 5, TaskID: "t", Result: &ResultRequest{Epoch: 2, Status: StatusFailed, ExitCode: &exit, Error: "x", LastSeq: 3, Outputs: map[string]string{"K": "v"}}},
		&Frame{Kind: FrameAcquire, Req: 6, TaskIDs: []string{"t1", "t2"}},
		&Event{Kind: EventAck, Req: 4},
		&Event{Kind: EventAck, Req: 5, Error: &Error{Code: CodeStaleLease, Message: "stale"}},
		&Event{Kind: EventAck, Req: 6, Acquired: []AcquireAnswer{
			{TaskID: "t1", Acquired: &AcquireResponse{TaskID: "t1", Epoch: 1, Spec: TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: "true"}}, TimeoutMS: 9, Mask: []string{"s"}}},
			{TaskID: "t2", Error: &Error{Code: CodeAlreadyClaimed, Message: "m"}}}},
		&TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{Method: "POST", URL: "http://x", Headers: map[string]string{"a": "b"}, ExpectStatus: 201}, Selectors: []string{"s"}, TimeoutMS: 5},
		&ResultRequest{Epoch: 2, Status: StatusFailed, ExitCode: &exit, Error: "exit status 3", LastSeq: 7},
		&LogsRequest{Epoch: 1, Chunks: []LogChunk{{Seq: 1, Time: now, Data: "hi\n"}}},
		&Task{ID: "t", Status: StatusSucceeded, ExitCode: &exit, CreatedAt: now, StartedAt: &now},
		&RegisterRequest{ProtocolVersion: 3, Name: "n", Description: "rack 4"},
		&RegisterResponse{InstanceID: "d", Configuration: &AppliedConfiguration{Name: "tools", Version: 2, Script: "echo"}},
		&Heartbeat{Seq: 2, Running: []RunningTask{}, Configuring: "tools v2"},
		&Event{Kind: EventConfigurationChanged},
		&DelegateConfigurationResponse{Configuration: &AppliedConfiguration{Name: "a", Version: 1, Script: "true"}},
		&ConfigurationResult{Name: "tools", Version: 2, ExitCode: &exit, Error: "exit status 3", Output: "x", OutputBytes: 1, StartedAt: now, FinishedAt: now},
		&UpdateConfigurationRequest{Script: ptr("echo"), Selectors: &[]string{}},
		&DelegateDetail{Delegate: Delegate{Name: "d", Tags: []string{}, Description: "x", Configuring: "a v1"},
			ConfigurationApplies: &ConfigurationRef{Name: "a", Version: 1}},
		&CreateAPIKeyRequest{Name: "ci"},
		&RevokeAPIKeyRequest{Force: true},
		&APIKeyList{APIKeys: []APIKey{{Name: "ci", Value: "lgk_x", Status: TokenRevoked, CreatedAt: now, CreatedBy: "admin",
			LastUsedAt: &now, RevokedAt: &now, RevokedBy: "admin", OwnerKind: OwnerAccount, OwnerID: "a", Current: true}}},
	}
	for _, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(b, back); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if diff := cmp.Diff(v, back); diff != "" {
			t.Errorf("%T round trip (-want +got):\n%s", v, diff)
		}
	}
}

// FuzzDecodeWire feeds arbitrary bytes to every wire decoder: none may
// panic, and whatever decodes must encode again.
func FuzzDecodeWire(f *testing.F) {
	f.Add([]byte(`{"kind":"task_available","task_id":"t_1"}`))
	f.Add([]byte(`{"kind":"heartbeat","heartbeat":{"seq":1,"running":[{"id":"t","epoch":2}]}}`))
	f.Add([]byte(`{"kind":"heartbeat","heartbeat":{"seq":2,"running":[],"perf":{"cpu_percent":12.5,"process_cpu_percent":0.4,"memory_percent":41,"rss_bytes":24000000,"tasks_run":3,"tasks_failed":1,"acquire_ms":2.5}}}`))
	f.Add([]byte(`{"kind":"started","req":3,"task_id":"t","started":{"epoch":2}}`))
	f.Add([]byte(`{"kind":"result","req":4,"task_id":"t","result":{"epoch":2,"status":"succeeded","exit_code":0,"last_seq":1}}`))
	f.Add([]byte(`{"kind":"acquire","req":5,"task_ids":["a","b"]}`))
	f.Add([]byte(`{"kind":"ack","req":5,"acquired":[{"task_id":"a","acquired":{"task_id":"a","epoch":1,"spec":{"type":"shell"}}},{"task_id":"b","error":{"code":"already_claimed"}}]}`))
	f.Add([]byte(`{"kind":"ack","req":4,"error":{"code":"stale_lease","message":"m"},"task":{"id":"t"}}`))
	f.Add([]byte(`{"account_id":"a","token":"t","name":"n","hostname":"h","tags":["a"],"running":[{"id":"x"}]}`))
	f.Add([]byte(`{"type":"shell","shell":{"script":"echo"},"env":{"A":"1"},"timeout_ms":-1}`))
	f.Add([]byte(`{"epoch":1,"chunks":[{"seq":1,"time":"2026-11-22T07:00:00Z","data":"x"}]}`))
	f.Add([]byte(`{"error":{"code":"stale_lease","message":"m"}}`))
	f.Add([]byte(`{"configuration":{"name":"tools","version":3,"script":"echo hi"}}`))
	f.Add([]byte(`{"name":"tools","version":2,"exit_code":null,"output":"x","output_bytes":-1,"started_at":"2026-11-22T07:00:00Z"}`))
	f.Add([]byte(`{"script":"echo","selectors":null}`))
	f.Add([]byte(`{"instance_id":"d","configuration_applies":{"name":"a","version":1},"configuration_result":{"exit_code":0}}`))
	f.Add([]byte(`{"api_keys":[{"name":"ci","status":"active","created_at":"2026-11-23T07:00:00Z","owner_kind":"account","current":true}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		targets := []any{
			&RegisterRequest{}, &RegisterResponse{}, &SessionResponse{}, &Event{}, &EventsResponse{},
			&Heartbeat{}, &HeartbeatResponse{}, &Frame{}, &TaskSpec{}, &Task{}, &TaskList{},
			&AcquireResponse{}, &StartedRequest{}, &LogsRequest{}, &ResultRequest{}, &LogStreamLine{},
			&CreateTokenRequest{}, &Token{}, &TokenList{}, &Delegate{}, &DelegateList{}, &WhoAmI{},
			&Configuration{}, &ConfigurationList{}, &CreateConfigurationRequest{}, &UpdateConfigurationRequest{},
			&AppliedConfiguration{}, &DelegateConfigurationResponse{}, &ConfigurationResult{}, &DelegateDetails{},
			&CreateAPIKeyRequest{}, &RevokeAPIKeyRequest{}, &APIKey{}, &APIKeyList{}, &AcquireAnswer{},
		}
		for _, v := range targets {
			if err := json.Unmarshal(data, v); err != nil {
				continue
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("%T decoded but does not encode: %v", v, err)
			}
		}
		e := DecodeError(400+len(data)%200, data)
		if e == nil || e.Code == "" || e.Message == "" {
			t.Fatalf("DecodeError returned an empty error for %q", data)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// Older peers ignore what v3 added, and v3 peers read v2 messages: the
// new fields are all optional.
func TestV3FieldsAreOptional(t *testing.T) {
	for _, v := range []any{&RegisterRequest{}, &RegisterResponse{}, &Heartbeat{}, &Delegate{}, &DelegateDetail{}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"description", "configuration", "configuring", "configuration_applies", "configuration_result"} {
			if strings.Contains(string(b), `"`+field+`"`) {
				t.Errorf("%T: empty %s is sent: %s", v, field, b)
			}
		}
	}
	if MinVersion != 1 || Version < 3 {
		t.Errorf("Version %d, MinVersion %d: v1 and v2 delegates must still be accepted", Version, MinVersion)
	}
}

func TestHasControl(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"", false},
		{"build-01.example.com", false},
		{"rack 4, row 2 (Zürich) 東京 🚀", false},
		{`C:\path with \x1b literally`, false},
		{"tab\there", true},
		{"line\nbreak", true},
		{"carriage\rreturn", true},
		{"esc\x1b[31mred", true},
		{"nul\x00", true},
		{"del\x7f", true},
		{"c1 csi \u009b31m", true},
		{"c1 nel \u0085", true},
		{"bidi override \u202egnp.exe", true},
		{"bidi isolate \u2066x\u2069", true},
		{"zero width\u200bspace", true},
		{"bom\ufeff", true},
		{"line separator\u2028", true},
		{"paragraph separator\u2029", true},
		{"invalid utf-8 \xff", true},
		{"lone continuation \x9b", true},
		{"nbsp\u00a0is fine", false},
	}
	for _, tt := range tests {
		if got := HasControl(tt.s); got != tt.want {
			t.Errorf("HasControl(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

// TestParseRetryAfter: whole seconds are read, anything else is no hint.
func TestParseRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, " 12 ": 12 * time.Second, "0": 0, "-1": 0,
		"Wed, 21 Oct 2026 07:28:00 GMT": 0, "99999": time.Hour} {
		if got := ParseRetryAfter(in); got != want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}
