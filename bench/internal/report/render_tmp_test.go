package report

import (
	"encoding/json"
	"os"
	"testing"
)

func TestRenderTmp(t *testing.T) {
	b, _ := os.ReadFile(os.Getenv("PERFJSON"))
	var rep Perf
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	WritePerfTable(os.Stdout, &rep)
	if err := WritePerfHTML("/tmp/perf.html", &rep); err != nil {
		t.Fatal(err)
	}
}
