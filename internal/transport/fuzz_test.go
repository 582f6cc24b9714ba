package transport

import (
	"testing"

	"github.com/legate-dev/legate/internal/certtest"
)

// FuzzParsePEMCertificates: any file content either yields at least one
// certificate or an error, never a panic.
func FuzzParsePEMCertificates(f *testing.F) {
	f.Add(certtest.NewCA(f, "seed").PEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte("not PEM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		certs, err := ParsePEMCertificates(b)
		if err == nil && len(certs) == 0 {
			t.Fatal("no error and no certificate")
		}
		if err != nil && certs != nil {
			t.Fatal("certificates and an error")
		}
	})
}
