package examples_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeEnv names a Markdown file to check instead of the module's
// README.md, e.g. a draft: FENCELOCK_README=/tmp/README.md go test ./examples -run README
const readmeEnv = "FENCELOCK_README"

// codeBlock is one ```go block of the README.
type codeBlock struct {
	line int    // the line of its first code line, 1-based
	code string // the lines between the fences
	// output is the ```text block that follows it, before any other fenced
	// block: what the program prints (each line must appear in its output).
	output []string
}

// TestREADMECompiles builds every ```go block of README.md that is a whole
// file, that is, one whose first line that is not blank or a // comment is a
// package clause: it must pass go build and go vet as it stands, inside
// this module (so its imports resolve to this code and go.mod's versions).
// Blocks without a package clause are sketches and are not compiled; a
// sketch with a func main is a program that forgot its package clause, and
// fails. A failure names the README line of each compiler message.
func TestREADMECompiles(t *testing.T) {
	path := os.Getenv(readmeEnv)
	if path == "" {
		path = filepath.Join("..", "README.md")
	}
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	blocks := goBlocks(src)
	require.NotEmpty(t, blocks, "%s has no ```go block", path)

	root, err := filepath.Abs("..") // the module root: examples/..
	require.NoError(t, err)
	// Inside the module, so the blocks build against this code. The leading
	// underscore keeps the directory out of ./... in the meantime.
	dir, err := os.MkdirTemp(root, "_readme-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })

	byDir := map[string]codeBlock{}
	for _, b := range blocks {
		if !wholeFile(b.code) {
			if funcMain.MatchString(b.code) {
				t.Errorf("%s:%d: a ```go block with func main but no package clause", path, b.line)
			}
			continue
		}
		name := "line" + strconv.Itoa(b.line)
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "main.go"), []byte(b.code), 0o644))
		byDir[name] = b
	}
	t.Logf("%s: %d ```go blocks, %d compiled as whole files", path, len(blocks), len(byDir))
	if len(byDir) == 0 {
		return
	}

	// Named one by one: a ... pattern skips directories starting with _.
	var pkgs []string
	for _, name := range slices.Sorted(maps.Keys(byDir)) {
		pkgs = append(pkgs, "./"+filepath.Join(filepath.Base(dir), name))
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull}, {"vet"}} {
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err == nil {
			continue
		}
		// Tell each failing block by its README line, and map every
		// compiler position in it to the README's.
		failed := map[string]bool{}
		msgs := position.ReplaceAllStringFunc(string(out), func(m string) string {
			sm := position.FindStringSubmatch(m)
			b, ok := byDir[sm[1]]
			if !ok {
				return m
			}
			failed[sm[1]] = true
			n, _ := strconv.Atoi(sm[2])
			return fmt.Sprintf("%s:%d%s", path, b.line+n-1, sm[3])
		})
		if len(failed) == 0 {
			if strings.Contains(msgs, "updates to go.mod needed") {
				// e.g. pgxpool, whose module (puddle) only the workspace's
				// bench module requires: run with go.work, as scripts/test.sh does.
				msgs += "(a block imports a package whose module go.mod does not require; is go.work in use?)\n"
			}
			t.Errorf("go %s: %v\n%s", args[0], err, msgs)
			return
		}
		for _, name := range slices.Sorted(maps.Keys(failed)) {
			t.Errorf("%s:%d: the ```go block does not pass go %s", path, byDir[name].line, args[0])
		}
		t.Logf("go %s:\n%s", args[0], msgs)
		return // go vet would repeat the compiler's errors
	}
}

// funcMain matches the main function of a program.
var funcMain = regexp.MustCompile(`(?m)^func main\(\)`)

// position matches a compiler position in a block's file, as go build and
// go vet print it: _readme-NNN/lineL/main.go:LINE:COL, or without the column.
var position = regexp.MustCompile(`(?:[^\s:]*/)?(line\d+)/main\.go:(\d+)((?::\d+)?)`)

// goBlocks returns the ```go fenced blocks of a Markdown file.
func goBlocks(src []byte) []codeBlock {
	var blocks []codeBlock
	var cur *codeBlock
	var lines []string
	lastGo := false // the last fenced block was a go block
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(fence, "```"):
			info := strings.TrimSpace(strings.TrimPrefix(fence, "```"))
			if info == "go" {
				cur, lines = &codeBlock{line: n + 1}, nil
				break
			}
			// Another language: skip to its closing fence, keeping a
			// text block as the output of the go block just before it.
			var text []string
			for n++; sc.Scan() && !strings.HasPrefix(strings.TrimSpace(sc.Text()), "```"); n++ {
				text = append(text, sc.Text())
			}
			if info == "text" && lastGo {
				blocks[len(blocks)-1].output = text
			}
			lastGo = false
		case cur != nil && strings.HasPrefix(fence, "```"):
			cur.code = strings.Join(lines, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur, lastGo = nil, true
		case cur != nil:
			lines = append(lines, line)
		}
	}
	return blocks
}

// wholeFile reports whether code starts, after blank and // comment lines,
// with a package clause.
func wholeFile(code string) bool {
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}
