package protocol

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDelegateQuery(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		query string
		want  DelegateQuery
		err   string
	}{
		{"", DelegateQuery{}, ""},
		{"all=true&limit=50&page=build-7&name=bu&connected=false&tag=gpu&approval=pending&scope=o1/p1",
			DelegateQuery{All: true, Limit: 50, Page: "build-7", Name: "bu", Connected: &no, Tag: "gpu", Approval: "pending", Org: "o1", Project: "p1"}, ""},
		{"connected=1&scope=o1", DelegateQuery{Connected: &yes, Org: "o1"}, ""},
		{"limit=0", DelegateQuery{}, "limit=\"0\": use a number of delegates from 1 to 1000"},
		{"limit=1001", DelegateQuery{}, "from 1 to 1000"},
		{"limit=x", DelegateQuery{}, "from 1 to 1000"},
		{"connected=maybe", DelegateQuery{}, "connected=\"maybe\": use true or false"},
		{"all=yes", DelegateQuery{}, "all=\"yes\": use true or false"},
		{"approval=later", DelegateQuery{}, "approval=\"later\": use pending, approved or rejected"},
		{"scope=o1/", DelegateQuery{}, "scope=\"o1/\": use ORG or ORG/PROJECT"},
		{"scope=/p1", DelegateQuery{}, "use ORG or ORG/PROJECT"},
		{"scope=o1/p1/x", DelegateQuery{}, "use ORG or ORG/PROJECT"},
		{"name=" + strings.Repeat("a", 64), DelegateQuery{}, "name: at most 63 characters"},
		{"tag=a%0Ab", DelegateQuery{}, "tag: at most 128 characters, no control characters"},
		{"limit=1&limit=2", DelegateQuery{}, "limit is given 2 times"},
	} {
		v, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseDelegateQuery(v)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one with %q", tt.query, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.query, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.query, diff)
		}
		// Values gives the query back.
		again, err := ParseDelegateQuery(got.Values())
		if err != nil || !cmp.Equal(got, again) {
			t.Errorf("%q: Values() parses back to %+v, %v", tt.query, again, err)
		}
		if got.Paged() != (tt.query != "" && tt.query != "all=true") {
			t.Errorf("%q: Paged() = %v", tt.query, got.Paged())
		}
	}
}

// FuzzParseDelegateQuery: any query parses or is refused, never panics,
// and what parses comes back from Values unchanged.
func FuzzParseDelegateQuery(f *testing.F) {
	f.Add("limit=50&page=b&name=x&connected=true&tag=gpu&approval=pending&scope=o/p&all=1")
	f.Add("scope=o1/&limit=-1")
	f.Add("name=%00")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseDelegateQuery(v)
		if err != nil {
			return
		}
		again, err := ParseDelegateQuery(q.Values())
		if err != nil {
			t.Fatalf("Values() of %+v does not parse: %v", q, err)
		}
		if !cmp.Equal(q, again) {
			t.Fatalf("%+v parses back to %+v", q, again)
		}
	})
}

func TestDelegatePerfSummary(t *testing.T) {
	cpu, proc, mem, rss := 12.5, 0.44, 41.0, int64(24<<20)
	for _, tt := range []struct {
		p    DelegatePerf
		want string
	}{
		{DelegatePerf{CPUPercent: &cpu, ProcessCPUPercent: &proc, MemoryPercent: &mem, RSSBytes: &rss, TasksRun: 3, TasksFailed: 1, AcquireMS: 2.5},
			"cpu 12.5% (delegate 0.4%), memory 41.0%, rss 24.0 MiB, 3 tasks run (1 failed), last acquire 2.5 ms"},
		{DelegatePerf{TasksRun: 1}, "1 task run"},
	} {
		if got := tt.p.Summary(); got != tt.want {
			t.Errorf("Summary() = %q, want %q", got, tt.want)
		}
	}
}
