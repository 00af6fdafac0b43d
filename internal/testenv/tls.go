package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// TLSMode is how a throwaway redis-server takes connections.
type TLSMode int8

const (
	// NoTLS serves plaintext on the port (the default).
	NoTLS TLSMode = iota
	// TLSOnly serves TLS alone on the port (--port 0 --tls-port N); clients
	// need not present a certificate.
	TLSOnly
	// MutualTLS is TLSOnly, and clients must present a certificate signed
	// by the test CA (--tls-auth-clients yes).
	MutualTLS
)

// TLSFiles are the PEM files of a TLS redis-server, made by openssl in its
// directory: a CA, the server's certificate (for 127.0.0.1 and localhost)
// and a client certificate, each signed by the CA.
type TLSFiles struct {
	CA         string // the CA certificate
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// makeCerts makes a CA, a server and a client certificate in dir with
// openssl (P-256 keys, valid for 2 days).
func makeCerts(ctx context.Context, dir string) (*TLSFiles, error) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		return nil, notInstalled("openssl", err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	f := &TLSFiles{CA: p("ca.crt"), ServerCert: p("server.crt"), ServerKey: p("server.key"),
		ClientCert: p("client.crt"), ClientKey: p("client.key")}
	exts := map[string]string{
		"server.ext": "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
		"client.ext": "extendedKeyUsage=clientAuth\n",
	}
	for name, text := range exts {
		if err := os.WriteFile(p(name), []byte(text), 0o600); err != nil {
			return nil, err
		}
	}
	key := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	steps := [][]string{
		append(append([]string{"req", "-x509"}, key...), "-keyout", p("ca.key"), "-out", f.CA, "-days", "2", "-subj", "/CN=testenv-ca"),
		append(append([]string{"req"}, key...), "-keyout", f.ServerKey, "-out", p("server.csr"), "-subj", "/CN=localhost"),
		{"x509", "-req", "-in", p("server.csr"), "-CA", f.CA, "-CAkey", p("ca.key"), "-set_serial", "2",
			"-days", "2", "-extfile", p("server.ext"), "-out", f.ServerCert},
		append(append([]string{"req"}, key...), "-keyout", f.ClientKey, "-out", p("client.csr"), "-subj", "/CN=testenv-client"),
		{"x509", "-req", "-in", p("client.csr"), "-CA", f.CA, "-CAkey", p("ca.key"), "-set_serial", "3",
			"-days", "2", "-extfile", p("client.ext"), "-out", f.ClientCert},
	}
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("testenv: openssl %s: %w\n%s", args[0], err, out)
		}
	}
	return f, nil
}

// tlsArgs are the redis-server arguments that serve TLS alone on port.
func (f *TLSFiles) tlsArgs(port int, mutual bool) []string {
	auth := "no"
	if mutual {
		auth = "yes"
	}
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey,
		"--tls-ca-cert-file", f.CA, "--tls-auth-clients", auth}
}

// ClientConfig returns a client TLS configuration that trusts the test CA
// (for the server at 127.0.0.1) and, with clientCert, presents the client
// certificate.
func (f *TLSFiles) ClientConfig(clientCert bool) (*tls.Config, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("testenv: no certificate in " + f.CA)
	}
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if clientCert {
		cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
