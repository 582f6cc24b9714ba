package cli

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestYAMLDocuments compares the writer's output with hand-written
// documents.
func TestYAMLDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		json string
		want string
	}{
		{"scalars keep their JSON order", `{"z":1,"a":"x","m":true,"n":null,"f":-1.5,"e":1e5,"E":2.5E-3}`,
			"z: 1\na: x\nm: true\n\"n\": null\nf: -1.5\ne: 1.0e+5\nE: 2.5E-3\n"},
		{"words YAML would misread are quoted", `["yes","No","ON","off","y","N","true","False","null","~","Null"]`,
			"- \"yes\"\n- \"No\"\n- \"ON\"\n- \"off\"\n- \"y\"\n- \"N\"\n- \"true\"\n- \"False\"\n- \"null\"\n- \"~\"\n- \"Null\"\n"},
		{"numbers, times and special starts are quoted",
			`["12","1.5","0x1f","1_000","2026-11-22","1:20",".inf","-1","+1","","-",":x","?","@x","*a","&a","!t","%d","#c","|","'q'","[a]","{a}",",x"," lead","trail ","=","<<"]`,
			"- \"12\"\n- \"1.5\"\n- \"0x1f\"\n- \"1_000\"\n- \"2026-11-22\"\n- \"1:20\"\n- \".inf\"\n- \"-1\"\n- \"+1\"\n- \"\"\n- \"-\"\n" +
				"- \":x\"\n- \"?\"\n- \"@x\"\n- \"*a\"\n- \"&a\"\n- \"!t\"\n- \"%d\"\n- \"#c\"\n- \"|\"\n- \"'q'\"\n- \"[a]\"\n- \"{a}\"\n" +
				"- \",x\"\n- \" lead\"\n- \"trail \"\n- \"=\"\n- \"<<\"\n"},
		{"colons and hashes", `{"url":"http://h:7460/x","kv":"a: b","end":"a:","hash":"a #b","tag":"a#b"}`,
			"url: http://h:7460/x\nkv: \"a: b\"\nend: \"a:\"\nhash: \"a #b\"\ntag: \"a#b\"\n"},
		{"plain text with spaces and punctuation", `{"summary":"no delegate can run this task (eligible: 0)","path":"/usr/bin","v":"v0.1.0-dirty","name":"héllo wörld"}`,
			"summary: \"no delegate can run this task (eligible: 0)\"\npath: /usr/bin\nv: v0.1.0-dirty\nname: héllo wörld\n"},
		{"multi-line strings become literal blocks", `{"one":"a\nb\n","none":"a\nb","more":"a\n\n","lead":"\na"}`,
			"one: |\n  a\n  b\nnone: |-\n  a\n  b\nmore: |+\n  a\n\nlead: \"\\na\"\n"},
		{"multi-line strings that a block would change are quoted", `["  indented\nx","\n\n","a\r\nb","tab\n\tx","\tx\ny"]`,
			"- \"  indented\\nx\"\n- \"\\n\\n\"\n- \"a\\r\\nb\"\n- |-\n  tab\n  \tx\n- \"\\tx\\ny\"\n"},
		{"control and format characters are escaped", `["a\u001b[31mred","bidi\u202eevil","nel\u0085","del\u007f","bom\ufeff","ls\u2028"]`,
			"- \"a\\e[31mred\"\n- \"bidi\\u202eevil\"\n- \"nel\\N\"\n- \"del\\x7F\"\n- \"bom\\uFEFF\"\n- \"ls\\L\"\n"},
		{"quotes and backslashes", `{"q":"say \"hi\"","b":"C:\\dir"}`,
			"q: \"say \\\"hi\\\"\"\nb: \"C:\\\\dir\"\n"},
		{"nesting", `{"list":[{"a":1,"b":[2,3]},[4,[5]],{},[]],"obj":{"x":{"y":"z"}},"e":{},"l":[]}`,
			"list:\n  - a: 1\n    b:\n      - 2\n      - 3\n  - - 4\n    - - 5\n  - {}\n  - []\nobj:\n  x:\n    \"y\": z\ne: {}\nl: []\n"},
		{"keys are quoted like values", `{"yes":1,"a b":2,"":3,"k: v":4,"x\ny":5}`,
			"\"yes\": 1\na b: 2\n\"\": 3\n\"k: v\": 4\n? \"x\\ny\"\n: 5\n"},
		{"literal block in a sequence", `[{"script":"echo hi\nexit 3\n"}]`, "- script: |\n    echo hi\n    exit 3\n"},
		{"top-level scalars", `"just text"`, "just text\n"},
		{"top-level literal", `"a\nb"`, "|-\n  a\n  b\n"},
		{"top-level empty", `{}`, "{}\n"},
		{"repeated key: first position, last value", `{"a":1,"b":2,"a":3}`, "a: 3\nb: 2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := yamlFromJSON([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, string(got)); d != "" {
				t.Errorf("YAML of %s (-want +got):\n%s", tt.json, d)
			}
			checkRoundTrip(t, []byte(tt.json), got)
		})
	}
}

// checkRoundTrip reads doc back and compares it with the JSON value.
func checkRoundTrip(t *testing.T, jsonText, doc []byte) {
	t.Helper()
	want, err := decodeOrdered(jsonText)
	if err != nil {
		t.Fatalf("decode %s: %v", jsonText, err)
	}
	got, err := readYAML(string(doc))
	if err != nil {
		t.Fatalf("read back:\n%s\nerror: %v", doc, err)
	}
	if d := cmp.Diff(normalizeNumbers(want), got, cmp.AllowUnexported(member{})); d != "" {
		t.Errorf("read back (-want +got):\n%s\ndocument:\n%s", d, doc)
	}
}

// normalizeNumbers rewrites the numbers of v as the writer writes them
// (yamlNumber keeps their value: TestYAMLNumber).
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return json.Number(yamlNumber(string(x)))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeNumbers(e)
		}
		return out
	case object:
		out := make(object, len(x))
		for i, m := range x {
			out[i] = member{m.key, normalizeNumbers(m.val)}
		}
		return out
	}
	return v
}

func TestYAMLNumber(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"0", "-0", "12", "-1.5", "1e5", "1E5", "1e-7", "1.5e+10", "-2E-3", "12345678901234567890123", "1e400", "4.9e-324"} {
		y := yamlNumber(n)
		if !jsonNumber.MatchString(y) || !strings.ContainsAny(y, ".") && strings.ContainsAny(y, "eE") {
			t.Errorf("yamlNumber(%s) = %s: not a JSON number with a '.' before its exponent", n, y)
		}
		a, _, err1 := big.ParseFloat(n, 10, 1000, big.ToNearestEven)
		b, _, err2 := big.ParseFloat(y, 10, 1000, big.ToNearestEven)
		if err1 != nil || err2 != nil || a.Cmp(b) != 0 {
			t.Errorf("yamlNumber(%s) = %s: value changed (%v, %v)", n, y, err1, err2)
		}
	}
}

// TestYAMLOfAPIObjects writes real API objects and reads them back.
func TestYAMLOfAPIObjects(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	values := []any{
		protocol.Task{ID: "t_1", Status: protocol.StatusFailed, ExitCode: intp(3), Error: "no delegate acquired the task\n  d1 (h1): selectors: missing selectors: gpu",
			Selectors: []string{"linux", "on"}, Env: map[string]string{"A": "yes", "B": "1"}, Shell: &protocol.ShellSpec{Script: "echo hi\nexit 3\n"},
			CreatedAt: at, StartedAt: &at},
		protocol.DelegateList{Delegates: []protocol.Delegate{{Name: "d1", Tags: []string{"true", "x:y"}, LastHeartbeat: &at, Description: "rack #4: top"}}},
		protocol.Explanation{TaskID: "t_1", Status: "queued", Summary: "no delegate can run this task: no delegates", Delegates: []protocol.DelegateVerdict{}},
	}
	for _, v := range values {
		var b bytes.Buffer
		if err := printYAML(&b, v); err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, j, b.Bytes())
	}
}

// TestYAMLReaderRefuses makes sure the reader used above is strict enough
// to catch a writer mistake.
func TestYAMLReaderRefuses(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		"a: yes\n", "a: 0x1f\n", "a: 2026-11-22\n", "a: .inf\n", "a: b: c\n", "a: b #c\n", "- @x\n", "a: 1\na: 2\n",
		"a:\n\t- x\n", "a:  b\n", "a: \"x\n", "\"a\"b: 1\n", "a: |\nb: 1\n", "a: x\n b: y\n", "- a\n-b\n", "a: \"\x1b\"\n",
	} {
		if v, err := readYAML(doc); err == nil {
			t.Errorf("readYAML(%q) = %#v, want an error", doc, v)
		}
	}
}

// FuzzYAML writes random JSON values, and random strings as values and
// keys, and reads them back: the document must be valid to the strict
// reader and hold the same value.
func FuzzYAML(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,{"b":"c\nd\n"}],"e":"yes"}`, `"x"`, `[[],{}]`, `{"k: v":"#"}`, `1e5`, `"\n\n a"`, "no\n\n", "a\r\nb",
		"  x\ny", "\u202e", "\x85", "- a", "a: b", "|", "\"'", "\ufeffx", "x\n\ty\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := decodeOrdered(data); err == nil {
			y, err := yamlFromJSON(data)
			if err != nil {
				t.Fatalf("%q: %v", data, err)
			}
			checkRoundTrip(t, data, y)
		}
		// The bytes as a string (JSON strings are valid UTF-8), in every
		// position: a value, a key, an item.
		s := strings.ToValidUTF8(string(data), "\uFFFD")
		j, err := json.Marshal(map[string]any{"s": s, "x" + s: []any{s, map[string]any{s: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		y, err := yamlFromJSON(j)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readYAML(string(y))
		if err != nil {
			t.Fatalf("read back:\n%s\nerror: %v", y, err)
		}
		want, err := decodeOrdered(j)
		if err != nil {
			t.Fatal(err)
		}
		// json.Marshal of a map sorts the keys: compare as sorted objects.
		if d := cmp.Diff(sortObjects(want), sortObjects(got), cmp.AllowUnexported(member{})); d != "" {
			t.Errorf("read back (-want +got):\n%s\ndocument:\n%s", d, y)
		}
	})
}

// sortObjects sorts the members of every object by key.
func sortObjects(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = sortObjects(e)
		}
		return out
	case object:
		out := make(object, len(x))
		for i, m := range x {
			out[i] = member{m.key, sortObjects(m.val)}
		}
		for i := 1; i < len(out); i++ {
			for j := i; j > 0 && out[j].key < out[j-1].key; j-- {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
		return out
	}
	return v
}
