package config

import (
	"fmt"
	"strings"
)

// TLS is how the delegate trusts the manager and proves itself to it. The
// files are read by package transport when the delegate starts; besides
// SharedCAPath, every PEM file in WORKDIR/ca-bundle/ is trusted.
type TLS struct {
	// SharedCAPath is SHARED_CA_CERTS_PATH: a PEM file, or a directory of
	// PEM files, trusted in addition to the system roots.
	SharedCAPath string
	// ClientCertPath and ClientKeyPath are DELEGATE_CLIENT_CERTIFICATE_PATH
	// and DELEGATE_CLIENT_CERTIFICATE_KEY_PATH: the client certificate shown
	// to a manager that requires one. Both or neither.
	ClientCertPath, ClientKeyPath string
	// TrustAll is TRUST_ALL_CERTIFICATES: do not verify the manager's
	// certificate at all (logged as a warning at every start).
	TrustAll bool
}

// Environment variables of the TLS settings.
const (
	EnvSharedCA   = "SHARED_CA_CERTS_PATH"
	EnvClientCert = "DELEGATE_CLIENT_CERTIFICATE_PATH"
	EnvClientKey  = "DELEGATE_CLIENT_CERTIFICATE_KEY_PATH"
	EnvTrustAll   = "TRUST_ALL_CERTIFICATES"
)

// readTLS reads the TLS variables.
func readTLS(lookup func(string) (string, bool)) (TLS, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	t := TLS{
		SharedCAPath:   get(EnvSharedCA),
		ClientCertPath: get(EnvClientCert),
		ClientKeyPath:  get(EnvClientKey),
	}
	var err error
	if t.TrustAll, err = parseBool(EnvTrustAll, get(EnvTrustAll)); err != nil {
		return TLS{}, err
	}
	for _, v := range []struct{ name, val string }{{EnvSharedCA, t.SharedCAPath}, {EnvClientCert, t.ClientCertPath}, {EnvClientKey, t.ClientKeyPath}} {
		if placeholder(v.val) {
			return TLS{}, placeholderErr(v.name, v.val, "a file path, or leave it unset")
		}
	}
	if err := t.Validate(); err != nil {
		return TLS{}, err
	}
	return t, nil
}

// Validate checks that the client certificate and key come together.
func (t TLS) Validate() error {
	switch {
	case t.ClientCertPath != "" && t.ClientKeyPath == "":
		return fmt.Errorf("%s is set but %s is not: set both (the certificate and its private key) or neither", EnvClientCert, EnvClientKey)
	case t.ClientCertPath == "" && t.ClientKeyPath != "":
		return fmt.Errorf("%s is set but %s is not: set both (the certificate and its private key) or neither", EnvClientKey, EnvClientCert)
	}
	return nil
}
