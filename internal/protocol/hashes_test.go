package protocol_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScriptHashesInStep: the SHA-1 luagen wrote beside each script, which
// the package runs it by (EVALSHA) without computing SHA-1 at run time, is
// the one Redis gives the script (SCRIPT LOAD). No Go SHA-1 here either:
// the test passes under GODEBUG=fips140=only.
func TestScriptHashesInStep(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join("scripts", "*.lua"))
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	for _, f := range scripts {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		sha, err := os.ReadFile(strings.TrimSuffix(f, ".lua") + ".sha1")
		require.NoError(t, err, "%s has no hash beside it: run go generate ./internal/protocol", f)
		got, err := rdb.ScriptLoad(t.Context(), string(src)).Result()
		require.NoError(t, err)
		assert.Equal(t, got+"\n", string(sha), "%s: the hash beside it is not Redis's", f)
	}
}
