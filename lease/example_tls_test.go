package lease_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// ExampleNew_tls reaches a Redis that takes mutual TLS alone: the client
// trusts the CA that signed the server's certificate and presents a
// certificate of its own. (The test sets REDIS_TLS_ADDR, REDIS_TLS_CA,
// REDIS_TLS_CERT and REDIS_TLS_KEY to a redis-server started with
// --tls-port, --port 0 and --tls-auth-clients yes.) Never set
// InsecureSkipVerify: it accepts any server.
func ExampleNew_tls() {
	ctx := context.Background()
	caPEM, err := os.ReadFile(os.Getenv("REDIS_TLS_CA"))
	if err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		panic("no CA certificate")
	}
	cert, err := tls.LoadX509KeyPair(os.Getenv("REDIS_TLS_CERT"), os.Getenv("REDIS_TLS_KEY"))
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:                  os.Getenv("REDIS_TLS_ADDR"),
		ContextTimeoutEnabled: true,
		TLSConfig: &tls.Config{
			RootCAs:      roots,                   // the server's CA
			Certificates: []tls.Certificate{cert}, // for tls-auth-clients yes
			MinVersion:   tls.VersionTLS12,
		},
	})
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		panic(err)
	}
	l, err := locks.TryAcquire(ctx, "example:tls", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	fmt.Println("holding", l.Name(), "over TLS")
	// Output:
	// holding example:tls over TLS
}

// startTLSExample starts the mutual-TLS Redis of ExampleNew_tls and sets
// its environment; stop closes it.
func startTLSExample(ctx context.Context) (stop func(), err error) {
	r, err := testenv.StartRedis(ctx, testenv.RedisOptions{TLS: testenv.MutualTLS})
	if err != nil {
		return nil, err
	}
	f := r.TLS()
	for k, v := range map[string]string{"REDIS_TLS_ADDR": r.Addr(), "REDIS_TLS_CA": f.CA,
		"REDIS_TLS_CERT": f.ClientCert, "REDIS_TLS_KEY": f.ClientKey} {
		os.Setenv(k, v)
	}
	return func() { r.Close() }, nil
}
