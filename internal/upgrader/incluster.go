package upgrader

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// serviceAccountDir holds a pod's ServiceAccount token and CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/"

// KubernetesAPI finds the Kubernetes API, its client (trusting its CA)
// and the ServiceAccount's token: in a pod, from KUBERNETES_SERVICE_HOST
// and PORT and the ServiceAccount's files; UPGRADER_KUBERNETES_API,
// UPGRADER_KUBERNETES_TOKEN_FILE and UPGRADER_KUBERNETES_CA_FILE override
// them (an http:// API needs no CA).
func KubernetesAPI(getenv func(string) string) (api string, hc *http.Client, bearer string, err error) {
	api = getenv("UPGRADER_KUBERNETES_API")
	if api == "" {
		host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return "", nil, "", errors.New("not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST): set UPGRADER_KUBERNETES_API")
		}
		api = "https://" + net.JoinHostPort(host, port)
	}
	tokenFile := envOr(getenv, "UPGRADER_KUBERNETES_TOKEN_FILE", serviceAccountDir+"token")
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", nil, "", fmt.Errorf("the ServiceAccount token: %w", err)
	}
	bearer = strings.TrimSpace(string(b))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	caFile := envOr(getenv, "UPGRADER_KUBERNETES_CA_FILE", serviceAccountDir+"ca.crt")
	if strings.HasPrefix(api, "https://") {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return "", nil, "", fmt.Errorf("the Kubernetes API's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return "", nil, "", fmt.Errorf("%s: no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return api, &http.Client{Transport: tr}, bearer, nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
