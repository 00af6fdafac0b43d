package doctor

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// serverState is what one server says of itself: INFO, and the CONFIG
// parameters that INFO does not show.
type serverState struct {
	info map[string]string
	// conf holds the CONFIG GET answers; confErr is set when the server
	// refused CONFIG GET (disabled or renamed, as on managed services).
	conf    map[string]string
	confErr error
}

// configParams are read one by one: Redis before 7 takes one per call.
var configParams = []string{"save", "appendfsync", "min-replicas-to-write", "min-replicas-max-lag"}

// parseInfo reads INFO's "field:value" lines.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// readConfig reads configParams in one pipeline. An error (CONFIG
// refused, or an I/O error that the next call meets again) is kept in
// confErr and leaves the parameter out of conf.
func (s *serverState) readConfig(ctx context.Context, n *redis.Client) {
	p := n.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(configParams))
	for i, name := range configParams {
		cmds[i] = p.ConfigGet(ctx, name)
	}
	_, _ = p.Exec(ctx)
	s.conf = make(map[string]string)
	for i, c := range cmds {
		v, err := c.Result()
		if err != nil {
			if s.confErr == nil {
				s.confErr = err
			}
			continue
		}
		if val, ok := v[configParams[i]]; ok {
			s.conf[configParams[i]] = val
		}
	}
}

// config returns a CONFIG parameter and whether the server told it.
func (s serverState) config(name string) (string, bool) {
	v, ok := s.conf[name]
	return v, ok
}

// infoInt returns an INFO field as an integer, 0 when missing.
func (s serverState) infoInt(name string) int64 {
	n, _ := strconv.ParseInt(s.info[name], 10, 64)
	return n
}
