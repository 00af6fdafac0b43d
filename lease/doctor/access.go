package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrRefused is wrapped by a [*RefusedError]: a check that the server
// refused to answer.
var ErrRefused = errors.New("doctor: check refused by the server")

// RefusedError is a check that could not run because the server refused
// one of its commands (NOPERM: the user's ACL lacks the permission). Check
// returns it, in a [*ServerError], so that a refusal is never read as
// health.
type RefusedError struct {
	Check   string // the check that could not run, one of the Check constants
	Command string // the refused command: "INFO", "CONFIG GET", "PING", "TIME", "SCAN", "GET", ...
	Err     error  // the server's reply

	keys string // the key pattern refused, when the reply is about keys
}

func (e *RefusedError) Error() string {
	grant := permission(e.Command)
	if e.keys != "" {
		grant = "access to the keys " + e.keys
	}
	return fmt.Sprintf("%s check not run: the server refused %s (%v); grant the user %s", e.Check, e.Command, e.Err, grant)
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Unwrap returns the server's reply.
func (e *RefusedError) Unwrap() error { return e.Err }

// permission is the ACL rule that allows command.
func permission(command string) string {
	return "+" + strings.ReplaceAll(strings.ToLower(command), " ", "|")
}

// isNoPerm reports whether err is the server's NOPERM reply.
func isNoPerm(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOPERM")
}

// refusedKeys is refused for a command on keys matching pattern: a NOPERM
// that names keys asks for access to them, not for the command.
func refusedKeys(check, command, pattern string, err error) error {
	var re *RefusedError
	if errors.As(refused(check, command, err), &re) {
		if strings.Contains(strings.ToLower(err.Error()), "key") {
			re.keys = pattern
		}
		return re
	}
	return err
}

// refused wraps err in a *RefusedError for check when it is NOPERM, and
// returns it unchanged otherwise.
func refused(check, command string, err error) error {
	if isNoPerm(err) {
		return &RefusedError{Check: check, Command: command, Err: err}
	}
	return err
}

// The oldest servers fencelock supports: its scripts use SET ... KEEPTTL
// (Redis 6.0) and it reads CLIENT INFO (6.2); Valkey began at 7.2.
var (
	minRedis  = [3]int{6, 2, 0}
	minValkey = [3]int{7, 2, 0}
)

// versionFindings: the server's name and version (INFO server), and
// whether fencelock supports it.
func versionFindings(s serverState) []Finding {
	name, v, minV := "redis", s.info["redis_version"], minRedis
	if s.info["server_name"] == "valkey" || s.info["valkey_version"] != "" {
		name, v, minV = "valkey", s.info["valkey_version"], minValkey
	}
	got, ok := parseVersion(v)
	switch {
	case !ok:
		return []Finding{{Check: CheckVersion, Severity: Warn,
			Finding:     fmt.Sprintf("INFO server does not show a %s version (%q)", name, v),
			Consequence: "The doctor cannot tell whether the server runs fencelock's scripts.",
			Fix:         fmt.Sprintf("Check that the server is Redis %s or later, or Valkey %s or later.", vstr(minRedis), vstr(minValkey))}}
	case less(got, minV):
		return []Finding{{Check: CheckVersion, Severity: Danger,
			Finding: fmt.Sprintf("%s %s is older than %s, the oldest %s fencelock supports", name, v, vstr(minV), name),
			Consequence: "fencelock's scripts and calls (SET ... KEEPTTL, CLIENT INFO) fail or behave otherwise " +
				"on it: acquires and refreshes can fail, and tokens are not checked against a server it was tested with.",
			Fix: fmt.Sprintf("Upgrade to Redis %s or later, or Valkey %s or later.", vstr(minRedis), vstr(minValkey))}}
	}
	return []Finding{{Check: CheckVersion, Severity: Info, Finding: name + " " + v}}
}

// parseVersion reads "MAJOR.MINOR.PATCH" (a missing part is 0).
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) == 0 || len(parts) > 3 || parts[0] == "" {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func vstr(v [3]int) string { return fmt.Sprintf("%d.%d", v[0], v[1]) }

// authFinding: whether a client without credentials is served (the
// default user has no password). It asks on a connection of its own,
// without the client's user and password; an I/O error yields no finding
// (the other checks report it).
func authFinding(ctx context.Context, n *redis.Client) []Finding {
	o := *n.Options()
	o.Username, o.Password = "", ""
	o.CredentialsProvider, o.CredentialsProviderContext, o.StreamingCredentialsProvider = nil, nil, nil
	o.OnConnect = nil
	o.PoolSize, o.MinIdleConns, o.MaxRetries = 1, 0, -1
	anon := redis.NewClient(&o)
	defer anon.Close()
	err := anon.Ping(ctx).Err()
	var rerr redis.Error
	switch {
	case err == nil:
		return []Finding{{Check: CheckAuth, Severity: Warn,
			Finding: "the default user has no password: a client without credentials is served",
			Consequence: "Whoever reaches the port can take, release or hold any lock, and lift or delete its " +
				"counter: write access to fencelock's keys is full trust over those locks.",
			Fix: "Give the default user a password or turn it off (ACL SETUSER default off, or requirepass), and " +
				"give fencelock a user of its own with the minimal ACL (docs/operating.md)."}}
	case isNoPerm(err):
		return []Finding{{Check: CheckAuth, Severity: Warn,
			Finding: "the default user has no password: a client without credentials is served with its ACL (PING " +
				"was refused with NOPERM, not NOAUTH)",
			Consequence: "Whoever reaches the port gets what the default user may do; if that includes fencelock's " +
				"keys, they can take, release or hold any lock.",
			Fix: "Give the default user a password or turn it off (ACL SETUSER default off, or requirepass)."}}
	case errors.As(err, &rerr):
		return []Finding{{Check: CheckAuth, Severity: Info,
			Finding: "a client without credentials is refused (" + firstWord(rerr.Error()) + ")"}}
	}
	return nil
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// transportFinding: whether the connection to addr is encrypted. A
// plaintext connection is fine on the host itself (loopback, a Unix
// socket), not across a network.
func transportFinding(addr string, o *redis.Options) Finding {
	f := Finding{Check: CheckTransport, Severity: Info}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	local := o.Network == "unix" || host == "localhost" || (ip != nil && ip.IsLoopback())
	switch {
	case o.TLSConfig != nil && o.TLSConfig.InsecureSkipVerify:
		f.Severity = Warn
		f.Finding = "TLS without certificate verification (skip_verify, InsecureSkipVerify)"
		f.Consequence = "Any server is accepted: whoever is on the path can pose as Redis, read the password and every token, and answer for it."
		f.Fix = "Verify the server: give its CA (fencelock --tls-ca, or tls.Config.RootCAs) and drop skip_verify."
	case o.TLSConfig != nil:
		f.Finding = "TLS, server certificate verified"
	case local:
		f.Finding = "plaintext, on this host (" + host + ")"
	default:
		f.Severity = Warn
		f.Finding = "plaintext to " + host + ", which is not on this host"
		f.Consequence = "The password (AUTH) and every token cross the network readable, and whoever is on the " +
			"path can change the replies: hand out a lock that is held, or report a lock lost."
		f.Fix = "Turn TLS on at the server (tls-port) and use a rediss:// URL (fencelock --tls-ca, --tls-cert, " +
			"--tls-key; a tls.Config in redis.Options for the library)."
	}
	return f
}
