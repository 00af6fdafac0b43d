package doctor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A real server's clock cannot be set from a test: the thresholds are
// checked here, the measurement against real servers in doctor_test.go.
func TestClockThreshold(t *testing.T) {
	cfg, err := newConfig([]Option{WithTTL(10 * time.Second)}) // allowance 102ms
	require.NoError(t, err)
	for _, tc := range []struct {
		skew, uncertainty time.Duration
		want              Severity
	}{
		{0, time.Millisecond, Info},
		{100 * time.Millisecond, time.Millisecond, Info},
		{-105 * time.Millisecond, 5 * time.Millisecond, Info}, // may be within the allowance
		{-110 * time.Millisecond, 5 * time.Millisecond, Warn},
		{2 * time.Second, time.Millisecond, Warn},
	} {
		f := clockFinding(tc.skew, tc.uncertainty, cfg)
		assert.Equal(t, tc.want, f.Severity, "skew %v ± %v", tc.skew, tc.uncertainty)
		if f.Severity == Warn {
			assert.Contains(t, f.Finding, "the drift allowance of a 10s lease, 102ms")
			assert.NotEmpty(t, f.Consequence)
			assert.NotEmpty(t, f.Fix)
		}
	}
	f := clockFinding(-2*time.Second, time.Millisecond, cfg)
	assert.Contains(t, f.Finding, "2s behind this host's")

	// Without a ttl: 100ms.
	cfg, _ = newConfig(nil)
	assert.Equal(t, Info, clockFinding(90*time.Millisecond, 0, cfg).Severity)
	assert.Equal(t, Warn, clockFinding(110*time.Millisecond, 0, cfg).Severity)
}

func TestLatencyThreshold(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var d []time.Duration
		for _, n := range ns {
			d = append(d, time.Duration(n)*time.Millisecond)
		}
		return d
	}
	cfg, _ := newConfig([]Option{WithTTL(10 * time.Second)}) // allowance 102ms, Warn above 51ms
	assert.Equal(t, Info, latencyFinding(ms(1, 1, 1, 50), cfg).Severity)
	f := latencyFinding(ms(1, 1, 1, 52), cfg)
	assert.Equal(t, Warn, f.Severity, "p99 of a few PINGs is the slowest")
	assert.Contains(t, f.Finding, "median 1ms, p99 52ms")
	cfg, _ = newConfig(nil)
	assert.Equal(t, Info, latencyFinding(ms(900), cfg).Severity, "no ttl, nothing to hold it against")
}

// Old servers cannot be started here: the version rule is checked on INFO
// text, the finding on a real server in doctor_test.go.
func TestVersionFindings(t *testing.T) {
	for _, tc := range []struct {
		info map[string]string
		want Severity
		says string
	}{
		{map[string]string{"redis_version": "7.0.15"}, Info, "redis 7.0.15"},
		{map[string]string{"redis_version": "6.2.0"}, Info, "redis 6.2.0"},
		{map[string]string{"redis_version": "6.0.16"}, Danger, "redis 6.0.16 is older than 6.2"},
		{map[string]string{"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"}, Info, "valkey 8.0.1"},
		{map[string]string{"redis_version": "7.2.4", "valkey_version": "7.1.0"}, Danger, "valkey 7.1.0 is older than 7.2"},
		{map[string]string{}, Warn, "does not show"},
		{map[string]string{"redis_version": "7.x"}, Warn, "does not show"},
	} {
		fs := versionFindings(serverState{info: tc.info})
		require.Len(t, fs, 1)
		assert.Equal(t, tc.want, fs[0].Severity, "%v", tc.info)
		assert.Contains(t, fs[0].Finding, tc.says)
	}
}
