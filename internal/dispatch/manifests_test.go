package dispatch

import (
	"strings"
	"testing"
)

// FuzzManifestRequest: the route's decoder and the generator behind it
// never panic, and what they accept generates the same text twice.
func FuzzManifestRequest(f *testing.F) {
	for _, s := range []string{
		`{"kind":"kubernetes","token":"t","name":"a","tags":["x"],"env":[{"name":"A","value":"b"}]}`,
		`{"kind":"fargate","service":true,"subnets":["subnet-1"]}`,
		`{"kind":"systemd","token":"t","replicas":-1}`,
		`{"kind":"docker","compose":true,"token":"t"} {}`,
		`{"kind":"helm","token_secret":"s","rbac":"namespace","cpu":"1.5"}`,
		`{"kind":"ecs","token":"t","region":"us-east-1","unknown":1}`,
	} {
		f.Add([]byte(s))
	}
	m := &Service{cfg: Config{Version: "v1.0.0"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeManifestRequest(body)
		if err != nil {
			return
		}
		out, err := m.manifest(req, "ACCOUNT123456", "http://127.0.0.1:7460")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		again, _ := m.manifest(req, "ACCOUNT123456", "http://127.0.0.1:7460")
		if out != again {
			t.Fatal("two runs gave different output")
		}
	})
}
