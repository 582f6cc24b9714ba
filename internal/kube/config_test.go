package kube

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromKubeconfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "ca.pem", "CA")
	writeFile(t, dir, "tok", "file-token\n")
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	head := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: other\n  context: {cluster: x, user: x}\n- name: c\n  context: {cluster: k, user: u}\n"
	tests := []struct {
		name string
		text string
		want Config
		err  string
	}{
		{"token and CA file", head + "clusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:6443/', certificate-authority: ca.pem}\nusers:\n- name: u\n  user: {token: abc}\n",
			Config{Server: "https://127.0.0.1:6443", CA: []byte("CA"), Token: "abc"}, ""},
		{"client certificate data", head + "clusters:\n- name: k\n  cluster: {server: 'https://h', certificate-authority-data: " + b64("CA2") + "}\nusers:\n- name: u\n  user: {client-certificate-data: " + b64("CERT") + ", client-key-data: " + b64("KEY") + "}\n",
			Config{Server: "https://h", CA: []byte("CA2"), CertPEM: []byte("CERT"), KeyPEM: []byte("KEY")}, ""},
		{"token file", head + "clusters:\n- name: k\n  cluster: {server: 'https://h', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {tokenFile: tok}\n",
			Config{Server: "https://h", Insecure: true, TokenFile: filepath.Join(dir, "tok")}, ""},
		{"exec plugin", head + "clusters:\n- name: k\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n  user: {exec: {command: aws}}\n",
			Config{}, "exec plugin or auth provider, which legate does not run"},
		{"no context", "current-context: nope\n", Config{}, `no context named "nope"`},
		{"no cluster", head + "clusters: []\n", Config{}, `no cluster named "k" with a server`},
		{"missing CA file", head + "clusters:\n- name: k\n  cluster: {server: 'https://h', certificate-authority: none.pem}\n", Config{}, "certificate authority"},
		{"not YAML", "{", Config{}, "kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, t.TempDir(), "config", tt.text)
			if strings.Contains(tt.text, "ca.pem") || strings.Contains(tt.text, "tokenFile") || strings.Contains(tt.text, "none.pem") {
				path = writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "-"), tt.text)
			}
			got, err := FromKubeconfig(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.Source = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	sa := t.TempDir()
	writeFile(t, sa, "ca.crt", "CA")
	writeFile(t, sa, "token", "sa-token\n")
	kc := writeFile(t, t.TempDir(), "config", "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://kc'}}]\nusers: [{name: u, user: {token: t}}]\n")

	pod := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	got, err := Load(env(pod), sa)
	if err != nil {
		t.Fatal(err)
	}
	if got.Server != "https://10.0.0.1:443" || got.TokenFile != filepath.Join(sa, "token") || string(got.CA) != "CA" {
		t.Fatalf("in a pod: %+v", got)
	}
	if tok, err := got.bearer(); err != nil || tok != "sa-token" {
		t.Fatalf("bearer = %q, %v", tok, err)
	}
	pod["KUBECONFIG"] = kc + string(os.PathListSeparator) + "/nonexistent"
	if got, err := Load(env(pod), sa); err != nil || got.Server != "https://kc" {
		t.Fatalf("KUBECONFIG wins: %+v %v", got, err)
	}
	if _, err := Load(env(map[string]string{"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}), t.TempDir()); err == nil || !strings.Contains(err.Error(), "ServiceAccount's CA") {
		t.Fatalf("no ServiceAccount files: %v", err)
	}
	if _, err := Load(env(map[string]string{"HOME": t.TempDir()}), sa); err == nil || !strings.Contains(err.Error(), "no Kubernetes credentials") {
		t.Fatalf("nothing: %v", err)
	}
}
