package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
)

// Hints say how the user of a client fixes certificate problems.
type Hints struct {
	// AddCA: how to trust one more certificate authority.
	AddCA string
	// ClientCert: how to configure a client certificate ("" = the
	// client cannot show one).
	ClientCert string
}

// CertError is a TLS failure explained: what failed and how to fix it.
// It wraps the original error.
type CertError struct {
	Problem string
	Fix     string
	Err     error
}

func (e *CertError) Error() string {
	return e.Problem + " (" + e.Err.Error() + "): " + e.Fix
}

func (e *CertError) Unwrap() error { return e.Err }

// Explain returns err as a *CertError when it is a certificate failure
// talking to the peer called what ("manager", "proxy"), else err itself.
func Explain(err error, what string, h Hints) error {
	if err == nil {
		return nil
	}
	var ce *CertError
	if errors.As(err, &ce) {
		return err
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &unknown):
		return &CertError{Problem: what + " certificate is signed by an unknown authority", Fix: h.AddCA, Err: err}
	case errors.As(err, &hostname):
		host := hostname.Host
		fix := "connect with a host name the certificate lists"
		if hostname.Certificate != nil {
			names := append(append([]string{}, hostname.Certificate.DNSNames...), ipStrings(hostname.Certificate.IPAddresses)...)
			if len(names) > 0 {
				fix += " (" + strings.Join(names, ", ") + ")"
			}
		}
		fix += ", or reissue the " + what + "'s certificate with " + host + " in its subject alternative names"
		return &CertError{Problem: what + " certificate is not valid for " + host, Fix: fix, Err: err}
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return &CertError{Problem: what + " certificate has expired or is not valid yet",
				Fix: "renew the " + what + "'s certificate (legate manager --tls-cert), or correct this machine's clock", Err: err}
		}
		return &CertError{Problem: what + " certificate is not acceptable", Fix: "reissue it as a TLS server certificate, or " + h.AddCA, Err: err}
	case errors.As(err, &record):
		return &CertError{Problem: what + " does not speak TLS at this address", Fix: "use an http:// URL for it, or start it with TLS", Err: err}
	case errors.As(err, &op) && op.Op == "remote error":
		msg := op.Err.Error()
		switch {
		case strings.Contains(msg, "certificate required"):
			fix := h.ClientCert
			if fix == "" {
				fix = "this client cannot show one; connect to a " + what + " that does not require client certificates"
			}
			return &CertError{Problem: what + " requires a client certificate", Fix: fix, Err: err}
		case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"),
			strings.Contains(msg, "certificate expired"), strings.Contains(msg, "certificate revoked"),
			strings.Contains(msg, "unsupported certificate"), strings.Contains(msg, "certificate unknown"):
			fix := h.ClientCert
			if fix == "" {
				fix = "check the " + what + "'s client certificate settings"
			}
			return &CertError{Problem: what + " refused the client certificate", Fix: fix, Err: err}
		}
	}
	return err
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// explainer explains the certificate failures of the requests it sends.
type explainer struct {
	rt    http.RoundTripper
	hints Hints
}

func (e *explainer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(r)
	if err != nil {
		return nil, Explain(err, "manager", e.hints)
	}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// underlying transport.
func (e *explainer) CloseIdleConnections() {
	if c, ok := e.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
