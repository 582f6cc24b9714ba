package kube

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ServiceAccountDir holds a pod's ServiceAccount token, CA and namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/"

// Config is where the Kubernetes API is and how to authenticate to it.
type Config struct {
	// Server is the API's base URL (https://host:port).
	Server string
	// Source says where the configuration came from, for messages
	// ("in-cluster ServiceAccount", "kubeconfig /path (context x)").
	Source string
	// CA is the PEM of the certificates that sign the API's; nil means
	// the system's roots.
	CA []byte
	// Insecure skips the check of the API's certificate (a kubeconfig's
	// insecure-skip-tls-verify).
	Insecure bool
	// TokenFile is read for each request (a ServiceAccount token is
	// rotated); Token is used when TokenFile is empty.
	TokenFile string
	Token     string
	// CertPEM and KeyPEM are a client certificate and its key.
	CertPEM, KeyPEM []byte
	// Namespace is the credentials' own namespace: the ServiceAccount's
	// (its namespace file) in a pod, the current context's in a
	// kubeconfig; empty when neither says.
	Namespace string
}

// Load finds the configuration as kubectl does, with the pod first: the
// file KUBECONFIG names (the first of a list) when set; else, in a pod
// (KUBERNETES_SERVICE_HOST and PORT), the ServiceAccount's token and CA
// under saDir; else ~/.kube/config.
func Load(getenv func(string) string, saDir string) (Config, error) {
	if kc := getenv("KUBECONFIG"); kc != "" {
		path, _, _ := strings.Cut(kc, string(os.PathListSeparator))
		return FromKubeconfig(path)
	}
	if getenv("KUBERNETES_SERVICE_HOST") != "" {
		return InCluster(getenv, saDir)
	}
	home := getenv("HOME")
	if home == "" {
		return Config{}, errors.New("no Kubernetes credentials: not in a pod (no KUBERNETES_SERVICE_HOST), no KUBECONFIG and no HOME")
	}
	path := filepath.Join(home, ".kube", "config")
	if _, err := os.Stat(path); err != nil {
		return Config{}, fmt.Errorf("no Kubernetes credentials: not in a pod (no KUBERNETES_SERVICE_HOST), no KUBECONFIG, and %s: %w", path, err)
	}
	return FromKubeconfig(path)
}

// InCluster is the configuration of a pod: the API at
// KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, the ServiceAccount's
// token and CA in saDir (ServiceAccountDir in a pod).
func InCluster(getenv func(string) string, saDir string) (Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, errors.New("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set")
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return Config{}, fmt.Errorf("the ServiceAccount's CA: %w", err)
	}
	tokenFile := filepath.Join(saDir, "token")
	if _, err := os.Stat(tokenFile); err != nil {
		return Config{}, fmt.Errorf("the ServiceAccount's token: %w (is automountServiceAccountToken off?)", err)
	}
	cfg := Config{Server: "https://" + net.JoinHostPort(host, port), Source: "in-cluster ServiceAccount",
		CA: ca, TokenFile: tokenFile}
	if ns, err := readFileMax(filepath.Join(saDir, "namespace"), 1<<10); err == nil {
		cfg.Namespace = strings.TrimSpace(string(ns))
	}
	return cfg, nil
}

// kubeconfig is the part of a kubeconfig file that Config uses.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Contexts       []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster   string `yaml:"cluster"`
			User      string `yaml:"user"`
			Namespace string `yaml:"namespace"`
		} `yaml:"context"`
	} `yaml:"contexts"`
	Clusters []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server   string `yaml:"server"`
			CA       string `yaml:"certificate-authority"`
			CAData   string `yaml:"certificate-authority-data"`
			Insecure bool   `yaml:"insecure-skip-tls-verify"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Token        string         `yaml:"token"`
			TokenFile    string         `yaml:"tokenFile"`
			Cert         string         `yaml:"client-certificate"`
			CertData     string         `yaml:"client-certificate-data"`
			Key          string         `yaml:"client-key"`
			KeyData      string         `yaml:"client-key-data"`
			Exec         map[string]any `yaml:"exec"`
			AuthProvider map[string]any `yaml:"auth-provider"`
		} `yaml:"user"`
	} `yaml:"users"`
}

// maxKubeconfig bounds a kubeconfig file.
const maxKubeconfig = 4 << 20

// FromKubeconfig reads the current context of a kubeconfig file: its
// cluster's server and CA, its user's token or client certificate.
// Exec plugins and auth providers are not supported (they would run
// programs as the delegate).
func FromKubeconfig(path string) (Config, error) {
	b, err := readFileMax(path, maxKubeconfig)
	if err != nil {
		return Config{}, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return Config{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg := Config{Source: fmt.Sprintf("kubeconfig %s (context %s)", path, kc.CurrentContext)}
	dir := filepath.Dir(path)
	var clusterName, userName string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName, found = c.Context.Cluster, c.Context.User, true
			cfg.Namespace = c.Context.Namespace
		}
	}
	if !found {
		return Config{}, fmt.Errorf("kubeconfig %s: no context named %q (current-context)", path, kc.CurrentContext)
	}
	found = false
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		cfg.Server, cfg.Insecure = strings.TrimRight(c.Cluster.Server, "/"), c.Cluster.Insecure
		if cfg.CA, err = dataOrFile(c.Cluster.CAData, c.Cluster.CA, dir); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: cluster %s: certificate authority: %w", path, clusterName, err)
		}
	}
	if !found || cfg.Server == "" {
		return Config{}, fmt.Errorf("kubeconfig %s: no cluster named %q with a server", path, clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		if u.User.Exec != nil || u.User.AuthProvider != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %s authenticates with an exec plugin or auth provider, which legate does not run: use a token or a client certificate", path, userName)
		}
		cfg.Token = u.User.Token
		if u.User.TokenFile != "" {
			cfg.TokenFile = resolve(dir, u.User.TokenFile)
		}
		if cfg.CertPEM, err = dataOrFile(u.User.CertData, u.User.Cert, dir); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %s: client certificate: %w", path, userName, err)
		}
		if cfg.KeyPEM, err = dataOrFile(u.User.KeyData, u.User.Key, dir); err != nil {
			return Config{}, fmt.Errorf("kubeconfig %s: user %s: client key: %w", path, userName, err)
		}
	}
	return cfg, nil
}

// dataOrFile is base64 data when given, else the file (relative to dir),
// else nil.
func dataOrFile(data, file, dir string) ([]byte, error) {
	if data != "" {
		return base64.StdEncoding.DecodeString(strings.TrimSpace(data))
	}
	if file == "" {
		return nil, nil
	}
	return readFileMax(resolve(dir, file), maxKubeconfig)
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func readFileMax(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s has %d bytes: at most %d", path, st.Size(), max)
	}
	b := make([]byte, st.Size())
	_, err = f.ReadAt(b, 0)
	if err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// transport is an HTTP transport for cfg: its CA (or the system's), its
// client certificate, the proxy environment variables, bounded dials.
func (cfg Config) transport() (*http.Transport, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure} //nolint:gosec // the kubeconfig asks for it
	if len(cfg.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, fmt.Errorf("%s: the certificate authority holds no PEM certificate", cfg.Source)
		}
		tlsCfg.RootCAs = pool
	}
	if len(cfg.CertPEM) > 0 || len(cfg.KeyPEM) > 0 {
		cert, err := tls.X509KeyPair(cfg.CertPEM, cfg.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: client certificate: %w", cfg.Source, err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.ResponseHeaderTimeout = time.Minute
	tr.TLSClientConfig = tlsCfg
	return tr, nil
}

// bearer is the token to send: the file's (read now), else Token.
func (cfg Config) bearer() (string, error) {
	if cfg.TokenFile == "" {
		return cfg.Token, nil
	}
	b, err := readFileMax(cfg.TokenFile, 64<<10)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
