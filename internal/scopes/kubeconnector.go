package scopes

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

// checkKubeConnector checks what a connector request adds for a
// Kubernetes cluster: the URL is its API server (https), the CA is PEM
// certificates, the token is the name of a stored secret. Other types
// carry neither CA nor token secret.
func checkKubeConnector(req *protocol.CreateConnectorRequest) error {
	req.TokenSecret = strings.TrimSpace(req.TokenSecret)
	if req.Type == protocol.ProviderPrometheus {
		return nil // checkPromConnector
	}
	if req.Type != protocol.ConnectorKubernetes {
		if req.CAPEM != "" || req.TokenSecret != "" {
			return fmt.Errorf("a connector of type %q carries no CA and no token secret: only a connector of type %s (its API server's CA and the stored secret with its token) or %s does",
				req.Type, protocol.ConnectorKubernetes, protocol.ProviderPrometheus)
		}
		return nil
	}
	if req.TokenSecret == "" {
		return errors.New("a kubernetes connector needs token_secret, the name of the stored secret that holds the bearer token of the cluster's ServiceAccount (legate secret create NAME; legate connector create --token-secret NAME)")
	}
	if err := secretref.ValidName(req.TokenSecret); err != nil {
		return fmt.Errorf("token_secret: %w", err)
	}
	c := protocol.KubeCluster{Server: strings.TrimSpace(req.URL), CAPEM: req.CAPEM, Token: secretRef(req.TokenSecret)}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("kubernetes connector: %w", err)
	}
	if u, _ := url.Parse(c.Server); u.Path != "" && u.Path != "/" {
		return fmt.Errorf("kubernetes connector url %q has a path: give the API server's URL, https://HOST[:PORT]", c.Server)
	}
	return checkCAPEM(req.CAPEM)
}

// checkCAPEM refuses a CA that holds anything but PEM certificates that
// parse, so that a wrong file is caught when the connector is made, not
// when a deploy fails to trust its cluster.
func checkCAPEM(s string) error {
	rest := []byte(s)
	for n := 0; ; n++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			if strings.TrimSpace(string(rest)) != "" || (n == 0 && s != "") {
				return errors.New("connector CA: not PEM certificates: give the CA certificate file of the API server or provider (-----BEGIN CERTIFICATE----- blocks; the certificate-authority of a kubeconfig, or ca.crt of a ServiceAccount)")
			}
			return nil
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("connector CA: holds a %q block: give certificates only (never a key)", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("connector CA: certificate %d: %w", n+1, err)
		}
	}
}

// secretRef is the reference to the stored secret name.
func secretRef(name string) string { return "${secrets." + name + "}" }

// isKubeConnector reports whether c is a Kubernetes cluster's connector
// whose credentials its tasks get. A connector of type kubernetes made
// before connectors carried a token secret is a label, as it was.
func isKubeConnector(c store.Connector) bool {
	return c.Type == protocol.ConnectorKubernetes && c.TokenSecret != ""
}

// KubeConnectorCluster is the cluster a deploy task that names the
// Kubernetes connector c reaches: its API server, its CA, and its token
// as a reference to the stored secret, which the task's secret bindings
// check for the caller (secret:access) and resolve, masked, when a
// delegate claims the task.
func KubeConnectorCluster(c store.Connector) *protocol.KubeCluster {
	return &protocol.KubeCluster{Server: strings.TrimRight(c.URL, "/"), CAPEM: c.CAPEM, Token: secretRef(c.TokenSecret)}
}

// applyKubeConnector puts the cluster of the Kubernetes connector c into
// the deploy section of s. A task type that deploys to a cluster gets
// one line here; any other type is refused, as is a task that also sets
// its own cluster (which credentials it would use would be a guess).
func applyKubeConnector(s *protocol.TaskSpec, c store.Connector) error {
	cluster := deployCluster(s)
	if cluster == nil {
		return fmt.Errorf("connector %q is a Kubernetes cluster's (its credentials go to deploy tasks): a %s task cannot use it; use a kubernetes or helm task (or step), or name another connector or none",
			c.Name, s.Type)
	}
	if *cluster != nil {
		return fmt.Errorf("the task sets its own kubernetes cluster and names the Kubernetes connector %q: give one or the other", c.Name)
	}
	*cluster = KubeConnectorCluster(c)
	return nil
}

// ApplyConnectorCluster puts into spec the cluster of the Kubernetes
// connector it names, or the provider of the prometheus connector, as
// ResolveTask does (nothing for another connector or none): for the checks made before a pipeline runs, which must see
// the secret that holds the connector's token.
func (svc *Service) ApplyConnectorCluster(ctx context.Context, acct string, spec *protocol.TaskSpec) error {
	if spec.Connector == "" {
		return nil
	}
	c, err := svc.st.GetConnector(ctx, acct, spec.Connector)
	switch {
	case err != nil:
		return err
	case isKubeConnector(c):
		return applyKubeConnector(spec, c)
	case isPromConnector(c):
		return applyPromConnector(spec, c)
	}
	return nil
}

// checkOwnCluster refuses a cluster a task sets itself whose token is
// not a stored secret's reference: a literal token would be stored with
// the task and shown in every answer about it, unmasked.
func checkOwnCluster(s *protocol.TaskSpec) error {
	cluster := deployCluster(s)
	if cluster == nil || *cluster == nil {
		return nil
	}
	tok := strings.TrimSpace((*cluster).Token)
	if names, err := secretref.Names(tok); err != nil || len(names) != 1 || tok != secretRef(names[0]) {
		return fmt.Errorf("a %s task's cluster token must be a stored secret's reference, ${secrets.NAME}: a literal token would be stored and shown with the task (or name a kubernetes connector)", s.Type)
	}
	return nil
}

// deployCluster is where a deploy task's spec holds the cluster it
// reaches (nil for a task type that reaches none): one line per deploy
// task type.
func deployCluster(s *protocol.TaskSpec) **protocol.KubeCluster {
	switch {
	case s.Type == protocol.TaskKubernetes && s.Kubernetes != nil:
		return &s.Kubernetes.Cluster
	case s.Type == protocol.TaskHelm && s.Helm != nil:
		return &s.Helm.Cluster
	}
	return nil
}

// kubeCapability is what a delegate must reach for a Kubernetes
// connector's tasks: a TCP connection to the API server. (An https
// capability would ask for an HTTP answer trusted by the delegate's
// system roots, which a cluster's own CA is not.)
func kubeCapability(c store.Connector) string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return c.URL // refused by normalizeCapability
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return "tcp://" + net.JoinHostPort(u.Hostname(), port)
}
