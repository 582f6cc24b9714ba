package cli

import (
	"crypto/tls"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/certtest"
)

// TestCACert: a manager with a private CA is trusted through
// LEGATE_CA_CERT or --ca-cert; without either the error says what to set.
func TestCACert(t *testing.T) {
	m := newFakeManager(t, outcomeSpec{})
	ca := certtest.NewCA(t, "private CA")
	certPEM, keyPEM := ca.Issue(t, certtest.Leaf{CommonName: "manager"})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(m.srv.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	certtest.WriteFile(t, caFile, ca.PEM)
	env := map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey}

	r := runCLI(t.Context(), env, "", "delegates", "list")
	if r.err == nil {
		t.Fatal("no error without the CA")
	}
	for _, want := range []string{"manager certificate is signed by an unknown authority", "set LEGATE_CA_CERT (or --ca-cert)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not contain %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "is the manager running") {
		t.Errorf("stderr %q blames the network", r.stderr)
	}

	withCA := map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey, EnvCACert: caFile}
	if r := runCLI(t.Context(), withCA, "", "delegates", "list"); r.err != nil {
		t.Errorf("with %s: %v\n%s", EnvCACert, r.err, r.stderr)
	}
	if r := runCLI(t.Context(), env, "", "--ca-cert", caFile, "delegates", "list"); r.err != nil {
		t.Errorf("with --ca-cert: %v\n%s", r.err, r.stderr)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	r = runCLI(t.Context(), env, "", "--ca-cert", missing, "delegates", "list")
	if r.err == nil || !strings.Contains(r.stderr, "--ca-cert") || !strings.Contains(r.stderr, "missing.pem") {
		t.Errorf("missing --ca-cert file: err %v, stderr %q", r.err, r.stderr)
	}
}
