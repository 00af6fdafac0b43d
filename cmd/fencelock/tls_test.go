//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// TestTLS: the command reaches a TLS-only Redis given its CA (--tls-ca, or
// FENCELOCK_TLS_CA), and a mutual-TLS one given the client certificate too
// (flags or environment); without the certificate the mutual-TLS server
// refuses, and the error says what to pass. TLS flags with a plaintext
// URL are a usage error.
func TestTLS(t *testing.T) {
	only := testenv.NewRedis(t, testenv.RedisOptions{TLS: testenv.TLSOnly})
	mutual := testenv.NewRedis(t, testenv.RedisOptions{TLS: testenv.MutualTLS})
	f := only.TLS()

	name := lockName(t)
	r := fl(t, "", "--redis", only.URL(), "--tls-ca", f.CA, "run", name, "--", "true")
	assert.Equal(t, 0, r.code, r.stderr)
	r = fl(t, "", "--redis", only.URL(), "inspect", name)
	assert.Equal(t, exitFailure, r.code, "without the CA the server's certificate is unknown")
	assert.Contains(t, r.stderr, "--tls-ca")

	r = fl(t, "", "--redis", "redis://"+only.Addr()+"/0", "inspect", name)
	assert.Equal(t, exitFailure, r.code, "plaintext to a TLS-only server")
	assert.Contains(t, r.stderr, "use rediss://")

	m := mutual.TLS()
	r = fl(t, "", "--redis", mutual.URL(), "--tls-ca", m.CA, "--tls-cert", m.ClientCert, "--tls-key", m.ClientKey,
		"run", name, "--", "true")
	assert.Equal(t, 0, r.code, r.stderr)
	r = fl(t, "", "--redis", mutual.URL(), "--tls-ca", m.CA, "inspect", name)
	assert.Equal(t, exitFailure, r.code, "mutual TLS without a client certificate")
	assert.Contains(t, r.stderr, "certificate required")
	assert.Contains(t, r.stderr, "--tls-cert")

	// The same from the environment (start passes this process's on).
	t.Setenv("FENCELOCK_TLS_CA", m.CA)
	t.Setenv("FENCELOCK_TLS_CERT", m.ClientCert)
	t.Setenv("FENCELOCK_TLS_KEY", m.ClientKey)
	r = fl(t, "", "--redis", mutual.URL(), "inspect", "--json", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.Contains(r.stdout, `"counter": 1`), r.stdout)

	r = fl(t, "", "--redis", redisURL, "inspect", name)
	assert.Equal(t, exitUsage, r.code, "TLS files with a plaintext URL")
	t.Setenv("FENCELOCK_TLS_KEY", "")
	r = fl(t, "", "--redis", only.URL(), "--tls-cert", m.ClientCert, "inspect", name)
	assert.Equal(t, exitUsage, r.code, "a certificate without its key")
}
