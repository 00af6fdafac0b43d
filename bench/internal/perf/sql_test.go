package perf

import (
	"strings"
	"testing"

	"github.com/fencelock/fencelock/bench/internal/serial"
)

// TestPerfDatabasesQuick runs the pg and sql scenarios against throwaway
// PostgreSQL and MariaDB servers: every write shape of every database has
// figures, the table shows them, and the guard-overhead targets are
// judged.
func TestPerfDatabasesQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and MariaDB")
	}
	serial.Heavy(t)
	rep, stdout := runPerf(t, "-quick", "-locks", "raw", "-scenarios", "pg,sql")
	got := map[string]bool{}
	for _, r := range rep.Results {
		if r.P50us == nil || *r.P50us <= 0 || r.OpsPerSec == nil || *r.OpsPerSec <= 0 {
			t.Errorf("%s %s: no figures: %+v", r.Lock, r.Scenario, r)
		}
		if len(r.PerRound) != quickSizes.pgRounds {
			t.Errorf("%s %s: %d rounds, want %d: %v", r.Lock, r.Scenario, len(r.PerRound), quickSizes.pgRounds, r.PerRound)
		}
		got[r.Lock+" "+r.Scenario] = true
	}
	for _, want := range []string{
		"postgres pg_unguarded", "postgres pg_guarded", "postgres pg_guarded_withtx", "postgres pg_perrow",
		"mariadb sql_unguarded", "mariadb sql_guarded", "mariadb sql_guarded_withtx", "mariadb sql_perrow",
		"postgres-sql sql_unguarded", "postgres-sql sql_guarded", "postgres-sql sql_guarded_withtx", "postgres-sql sql_perrow",
	} {
		if !got[want] {
			t.Errorf("no result for %s", want)
		}
	}
	if rep.Machine.MySQL == "" || rep.Machine.Postgres == "" {
		t.Errorf("server versions missing: %+v", rep.Machine)
	}
	judged := 0
	for _, tg := range rep.Targets {
		if (strings.HasPrefix(tg.Name, "sql_") || strings.HasPrefix(tg.Name, "pg_")) && tg.Met != nil {
			judged++
			if !strings.Contains(tg.Measured, "paired rounds") {
				t.Errorf("%s: not paired by round: %s", tg.Name, tg.Measured)
			}
		}
	}
	if judged != 6 { // pg_guarded, pg_perrow; sql_guarded and sql_perrow on both databases
		t.Errorf("%d database targets judged, want 6: %+v", judged, rep.Targets)
	}
	for _, s := range []string{"mariadb", "sql_guarded_withtx", "postgres-sql", "sql_perrow", "pg_perrow"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, stdout)
		}
	}
}
