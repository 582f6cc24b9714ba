package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ServerFiles are the manager's TLS files: its certificate (chain) and key,
// and optionally the CA whose client certificates it requires.
type ServerFiles struct {
	Cert, Key, ClientCA string
}

// ServerTLS loads the manager's TLS configuration. Errors name the flag
// (--tls-cert, --tls-key, --tls-client-ca) to fix. The manager speaks
// HTTP/1.1 only, which WebSocket upgrades need.
func ServerTLS(f ServerFiles) (*tls.Config, error) {
	switch {
	case f.Cert == "" && f.Key == "":
		if f.ClientCA != "" {
			return nil, fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key: client certificates are only checked over TLS")
		}
		return nil, nil
	case f.Cert == "":
		return nil, fmt.Errorf("--tls-key is set but --tls-cert is not: set both")
	case f.Key == "":
		return nil, fmt.Errorf("--tls-cert is set but --tls-key is not: set both")
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	if _, err := ParsePEMCertificates(certPEM); err != nil {
		return nil, fmt.Errorf("--tls-cert %s: %w", f.Cert, err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("--tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s do not form a key pair: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	if f.ClientCA != "" {
		b, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cas, err := ParsePEMCertificates(b)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca %s: %w", f.ClientCA, err)
		}
		pool := x509.NewCertPool()
		for _, c := range cas {
			pool.AddCert(c)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
