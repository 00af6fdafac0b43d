// Package servers names the Redis-protocol servers the bench runs on:
// which kinds it can start (redis-server, valkey-server), and what a
// running server is, read from its INFO rather than from its
// redis_version, which Valkey keeps at 7.2.4 for compatibility.
package servers

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Kinds is every kind of server the bench can start, in the order -servers
// lists them by default.
var Kinds = []string{"redis", "valkey"}

// Binary is the program that runs a server of kind: "redis-server",
// "valkey-server".
func Binary(kind string) string { return kind + "-server" }

// Installed reports whether kind's binary is in PATH.
func Installed(kind string) bool {
	_, err := exec.LookPath(Binary(kind))
	return err == nil
}

// Server is what a running server says it is.
type Server struct {
	Name    string // "redis", "valkey"
	Version string // its own version: "7.0.15", "8.0.1"
}

// String is "valkey 8.0.1", or "unknown" when INFO did not say.
func (s Server) String() string {
	if s.Name == "" || s.Version == "" {
		return "unknown"
	}
	return s.Name + " " + s.Version
}

// Identify reads INFO server of c's server.
func Identify(ctx context.Context, c redis.UniversalClient) (Server, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return Server{}, fmt.Errorf("servers: INFO server: %w", err)
	}
	return Parse(info), nil
}

// Parse reads the server's name and version from the text of INFO server:
// server_name and <name>_version where the server gives them (Valkey),
// else redis and redis_version.
func Parse(info string) Server {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if name := fields["server_name"]; name != "" && fields[name+"_version"] != "" {
		return Server{Name: name, Version: fields[name+"_version"]}
	}
	return Server{Name: "redis", Version: fields["redis_version"]}
}
