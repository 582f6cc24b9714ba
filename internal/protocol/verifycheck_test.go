package protocol

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func goodVerify() *VerifySpec {
	return &VerifySpec{
		Provider: &MetricsProvider{Type: ProviderPrometheus, URL: "http://prometheus:9090"},
		Metrics: []VerifyMetric{
			{Name: "error_rate", Query: `sum(rate(errors[1m]))`, Threshold: &Threshold{Op: "<", Value: 0.01}},
			{Name: "latency", Query: "q1", Baseline: "q2", Tolerance: 0.1},
		},
	}
}

func TestVerifySpecDefaults(t *testing.T) {
	v := goodVerify()
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	if v.DurationMS != DefaultVerifyDurationMS || v.IntervalMS != DefaultVerifyIntervalMS || v.MinPoints != DefaultVerifyMinPoints {
		t.Fatalf("defaults not filled in: %+v", v)
	}
	s := TaskSpec{Verify: goodVerify()}
	if err := s.CheckPayload(); err != nil || s.Type != TaskVerify {
		t.Fatalf("CheckPayload: %v, type %q", err, s.Type)
	}
}

func TestVerifySpecErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(v *VerifySpec)
		want string
	}{
		{"no provider", func(v *VerifySpec) { v.Provider = nil }, "needs a provider"},
		{"provider type", func(v *VerifySpec) { v.Provider.Type = "datadog" }, `provider type "datadog": use prometheus`},
		{"provider scheme", func(v *VerifySpec) { v.Provider.URL = "ftp://x" }, "http:// or https://"},
		{"provider credentials", func(v *VerifySpec) { v.Provider.URL = "http://u:p@x" }, "must not hold credentials"},
		{"provider both auths", func(v *VerifySpec) { v.Provider.BearerToken, v.Provider.Username = "t", "u" }, "not both"},
		{"no metrics", func(v *VerifySpec) { v.Metrics = nil }, "at least one metric"},
		{"too many", func(v *VerifySpec) {
			for i := 0; i < MaxVerifyMetrics; i++ {
				v.Metrics = append(v.Metrics, v.Metrics[0])
			}
		}, "at most 8"},
		{"no query", func(v *VerifySpec) { v.Metrics[0].Query = " " }, "query is empty"},
		{"long query", func(v *VerifySpec) { v.Metrics[0].Query = strings.Repeat("a", MaxVerifyQueryBytes+1) }, "too long"},
		{"control", func(v *VerifySpec) { v.Metrics[0].Query = "a\x00" }, "control"},
		{"neither", func(v *VerifySpec) { v.Metrics[0].Threshold = nil }, "a threshold"},
		{"op", func(v *VerifySpec) { v.Metrics[0].Threshold.Op = "==" }, `threshold operator "=="`},
		{"nan", func(v *VerifySpec) { v.Metrics[0].Threshold.Value = math.NaN() }, "finite"},
		{"tolerance", func(v *VerifySpec) { v.Metrics[1].Tolerance = -1 }, "tolerance"},
		{"tolerance without baseline", func(v *VerifySpec) { v.Metrics[0].Tolerance = 0.1 }, "applies to a baseline"},
		{"dup", func(v *VerifySpec) { v.Metrics[1].Name = "error_rate" }, "given twice"},
		{"name", func(v *VerifySpec) { v.Metrics[0].Name = "a b" }, "letters, digits"},
		{"interval", func(v *VerifySpec) { v.IntervalMS = 10 }, "at least 1000ms"},
		{"interval over duration", func(v *VerifySpec) { v.DurationMS, v.IntervalMS = 2000, 3000 }, "longer than its duration"},
		{"duration", func(v *VerifySpec) { v.DurationMS = MaxVerifyDurationMS + 1 }, "24h"},
		{"min points", func(v *VerifySpec) { v.MinPoints = MaxVerifyPoints + 1 }, "min_points"},
	}
	for _, c := range cases {
		v := goodVerify()
		c.edit(v)
		err := v.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]Threshold{"< 0.01": {"<", 0.01}, "<=5": {"<=", 5}, " > -1e3 ": {">", -1000}, ">= 0": {">=", 0}} {
		got, err := ParseThreshold(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0.01", "< x", "= 1", "< NaN", "< +Inf"} {
		if _, err := ParseThreshold(in); err == nil || !strings.Contains(err.Error(), "threshold") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// FuzzVerifySpec decodes arbitrary JSON as a verify section and validates
// it: no panic, errors name the section, and a spec that passes has its
// defaults and limits, keeps passing, and survives a JSON round trip.
func FuzzVerifySpec(f *testing.F) {
	b, _ := json.Marshal(goodVerify())
	f.Add(string(b))
	f.Add(`{"provider":{"type":"prometheus","url":"https://p:9090/x","ca_pem":"-----BEGIN CERTIFICATE-----","username":"u","password":"p"},"metrics":[{"name":"a","query":"up","threshold":{"op":">=","value":1}}],"duration_ms":60000,"interval_ms":1000,"min_points":2}`)
	f.Add(`{"provider":{"type":"prometheus","url":"http://x"},"metrics":[{"name":"a","query":"up\n","baseline":"up","tolerance":1e308,"higher_is_better":true}],"interval_ms":-1}`)
	f.Fuzz(func(t *testing.T, s string) {
		var v VerifySpec
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		if err := v.Validate(); err != nil {
			if !strings.Contains(err.Error(), "verify") && !strings.Contains(err.Error(), "provider") {
				t.Fatalf("error does not name the section: %v", err)
			}
			return
		}
		if v.DurationMS <= 0 || v.DurationMS > MaxVerifyDurationMS || v.IntervalMS < MinVerifyIntervalMS || v.IntervalMS > v.DurationMS ||
			v.MinPoints <= 0 || v.MinPoints > MaxVerifyPoints || len(v.Metrics) == 0 || len(v.Metrics) > MaxVerifyMetrics {
			t.Fatalf("accepted %+v", v)
		}
		for _, m := range v.Metrics {
			if m.Threshold == nil && m.Baseline == "" || len(m.Query) > MaxVerifyQueryBytes || m.Tolerance < 0 ||
				m.Threshold != nil && (math.IsNaN(m.Threshold.Value) || !isThresholdOp(m.Threshold.Op)) {
				t.Fatalf("accepted metric %+v", m)
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var back VerifySpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, back, v)
		}
	})
}
