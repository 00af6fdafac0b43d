//go:build unix

package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// tlsUsage is the TLS part of the global flags' help text.
const tlsUsage = `  --tls-ca FILE  PEM CA certificate(s) that sign the servers' certificates, for
                 rediss:// URLs (default: $FENCELOCK_TLS_CA; with neither, the system's
                 roots, or the file $SSL_CERT_FILE names). Never use ?skip_verify=true:
                 it accepts any server, so anyone on the path can read the password.
  --tls-cert FILE, --tls-key FILE
                 PEM client certificate and its key, for servers that require one
                 (tls-auth-clients yes) (default: $FENCELOCK_TLS_CERT, $FENCELOCK_TLS_KEY)
`

// tlsFlags are the --tls-ca, --tls-cert and --tls-key flags; an empty one
// falls back to its environment variable.
type tlsFlags struct{ ca, cert, key string }

// register adds the TLS flags to fs.
func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.ca, "tls-ca", t.ca, "CA certificate file")
	fs.StringVar(&t.cert, "tls-cert", t.cert, "client certificate file")
	fs.StringVar(&t.key, "tls-key", t.key, "client key file")
}

// config returns the TLS settings the flags or FENCELOCK_TLS_CA,
// FENCELOCK_TLS_CERT and FENCELOCK_TLS_KEY give: nil when none is set.
// Unreadable files, or a certificate without its key, are a usage error.
func (t tlsFlags) config() (*tls.Config, error) {
	pick := func(flagVal, env string) string {
		if flagVal != "" {
			return flagVal
		}
		return strings.TrimSpace(os.Getenv(env))
	}
	ca, cert, key := pick(t.ca, "FENCELOCK_TLS_CA"), pick(t.cert, "FENCELOCK_TLS_CERT"), pick(t.key, "FENCELOCK_TLS_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	bad := func(err error) error { return &badURLError{err} }
	c := &tls.Config{}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, bad(fmt.Errorf("--tls-ca: %w", err))
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, bad(fmt.Errorf("--tls-ca: no PEM certificate in %s", ca))
		}
	}
	if (cert == "") != (key == "") {
		return nil, bad(errors.New("--tls-cert and --tls-key go together (or FENCELOCK_TLS_CERT and FENCELOCK_TLS_KEY)"))
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, bad(fmt.Errorf("--tls-cert, --tls-key: %w", err))
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// withTLS puts the CA and client certificate of extra (nil for none) into
// the TLS configuration a URL gave (nil for a plaintext URL): TLS files
// with a plaintext URL are a usage error, not a silent plaintext link.
func withTLS(fromURL, extra *tls.Config, raw string) (*tls.Config, error) {
	switch {
	case extra == nil:
		return fromURL, nil
	case fromURL == nil:
		return nil, &badURLError{fmt.Errorf("Redis URL %q is not TLS: --tls-ca, --tls-cert and --tls-key (FENCELOCK_TLS_*) need rediss://", redactURL(raw))}
	}
	c := fromURL.Clone()
	if extra.RootCAs != nil {
		c.RootCAs = extra.RootCAs
	}
	c.Certificates = extra.Certificates
	return c, nil
}

// tlsHint tells how to fix a TLS failure that msg reports, "" for none.
func tlsHint(msg string) string {
	switch {
	case strings.Contains(msg, "tls: certificate required"):
		return " (the server requires a client certificate: pass --tls-cert and --tls-key, or set FENCELOCK_TLS_CERT and FENCELOCK_TLS_KEY)"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return " (pass the CA that signed the server's certificate with --tls-ca or FENCELOCK_TLS_CA)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return " (the server speaks plaintext: use redis://)"
	case strings.HasSuffix(msg, ": EOF"):
		return " (the server closed the connection; if it takes TLS only, use rediss://)"
	}
	return ""
}
