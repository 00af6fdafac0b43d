package release

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

const (
	coreModule = "github.com/fencelock/fencelock"
	otelModule = coreModule + "/extra/fenceotel"
)

// nested are the nested modules, by directory under the repository root.
var nested = map[string]string{
	"extra/fenceotel": otelModule,
	"bench":           coreModule + "/bench",
}

// release matches a tagged version: no pseudo-version, no prerelease.
var release = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// goTool returns the go command, or skips the test without one.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no go command on PATH or in GOROOT")
	}
	return p
}

// repoRoot is the directory of the core module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module "+coreModule+"\n")) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("core module's go.mod not found above the test's directory")
		}
		dir = up
	}
}

type goModJSON struct {
	Module  struct{ Path string }
	Require []struct{ Path, Version string }
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

func readGoMod(t *testing.T, goBin, file string) goModJSON {
	t.Helper()
	out, err := exec.Command(goBin, "mod", "edit", "-json", file).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", file, err)
	}
	var m goModJSON
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// requiredCore checks the version scheme of docs/RELEASING.md in one nested
// go.mod and returns the core version it requires: a tagged version (what a
// consumer resolves; the replace is ignored outside this repository), and a
// replace, if any, only to the local tree, for development.
func requiredCore(t *testing.T, goBin, root, dir string) string {
	t.Helper()
	m := readGoMod(t, goBin, filepath.Join(root, dir, "go.mod"))
	if want := nested[dir]; m.Module.Path != want {
		t.Errorf("%s/go.mod: module %s, want %s", dir, m.Module.Path, want)
	}
	var v string
	for _, r := range m.Require {
		if r.Path == coreModule {
			v = r.Version
		}
	}
	if !release.MatchString(v) {
		t.Errorf("%s/go.mod requires %s %q, want a tagged release vX.Y.Z (docs/RELEASING.md)", dir, coreModule, v)
	}
	for _, r := range m.Replace {
		if r.Old.Path != coreModule {
			t.Errorf("%s/go.mod replaces %s: only the core may be replaced, by the local tree", dir, r.Old.Path)
			continue
		}
		if r.Old.Version != "" || r.New.Version != "" || !strings.HasPrefix(r.New.Path, ".") {
			t.Errorf("%s/go.mod: replace %s %s => %s %s: want an unversioned replace by the local tree",
				dir, r.Old.Path, r.Old.Version, r.New.Path, r.New.Version)
			continue
		}
		got, _ := filepath.Abs(filepath.Join(root, dir, r.New.Path))
		if got != root {
			t.Errorf("%s/go.mod: replace points at %s, want the repository root %s", dir, got, root)
		}
	}
	return v
}

func TestNestedModulesRequireRelease(t *testing.T) {
	goBin := goTool(t)
	root := repoRoot(t)
	var first string
	for dir := range nested {
		v := requiredCore(t, goBin, root, dir)
		if first == "" {
			first = v
		} else if v != first {
			t.Errorf("nested modules require different core versions (%s, %s): they move in lockstep", first, v)
		}
	}
}

// moduleFiles lists the files of the module rooted at dir, slash-separated
// and relative to dir, as its module zip holds them: the files git tracks or
// would track (ignored ones are left out) when git is at hand, else every
// regular file; never a nested module's directory, nor version control.
func moduleFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	if out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".").Output(); err == nil {
		for f := range strings.SplitSeq(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == ".git" || d.Name() == ".hg") {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				rel, _ := filepath.Rel(dir, p)
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var skip []string
	// Directories holding a go.mod (other than the root) are other modules;
	// directories starting with _ are leave-outs: none is committed, and
	// tests make temporary ones (examples' _readme-*) while this one runs.
	for _, f := range files {
		if strings.HasPrefix(f, "_") || strings.Contains(f, "/_") {
			skip = append(skip, f)
		}
	}
	for _, f := range files {
		if path.Base(f) == "go.mod" && f != "go.mod" {
			skip = append(skip, path.Dir(f)+"/")
		}
	}
	kept := files[:0]
next:
	for _, f := range files {
		for _, n := range skip {
			if strings.HasPrefix(f, n) {
				continue next
			}
		}
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f))); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink: not in a module zip
		}
		kept = append(kept, f)
	}
	return kept
}

// publish writes module mod at version v, from the module rooted at dir, into
// the file proxy at proxy: <mod>/@v/list, v.info, v.mod and v.zip, the zip in
// the module zip format (every path prefixed by mod@v/).
func publish(t *testing.T, proxy, mod, v, dir string) int {
	t.Helper()
	at := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"Version": v, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{"list": []byte(v + "\n"), v + ".info": info, v + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	zf, err := os.Create(filepath.Join(at, v+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	zw := zip.NewWriter(zf)
	files := moduleFiles(t, dir)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(mod + "@" + v + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// TestConsumerOfFenceotel serves the core and fenceotel at the core version
// that extra/fenceotel/go.mod requires, from a file module proxy built from
// this tree (what tagging vX.Y.Z and extra/fenceotel/vX.Y.Z publishes), and
// checks that a module importing only fenceotel passes go mod tidy and go
// build: the nested module's requirement must name a version that exists,
// since a consumer ignores its replace. Third-party modules come from the
// local module cache, then from the Go module proxy for any not there.
func TestConsumerOfFenceotel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a consumer module; skipped with -short")
	}
	goBin := goTool(t)
	root := repoRoot(t)
	v := requiredCore(t, goBin, root, "extra/fenceotel")
	if t.Failed() {
		t.FailNow()
	}
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	n := publish(t, proxy, coreModule, v, root)
	m := publish(t, proxy, otelModule, v, filepath.Join(root, "extra", "fenceotel"))
	t.Logf("file proxy: %s@%s (%d files), %s@%s (%d files)", coreModule, v, n, otelModule, v, m)

	consumer := filepath.Join(tmp, "consumer")
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(consumer, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo 1.26.0\n\nrequire "+otelModule+" "+v+"\n")
	write("main.go", `package main

import (
	"fmt"

	"`+otelModule+`"
)

func main() {
	hooks, err := fenceotel.New()
	fmt.Println(hooks != nil, err)
}
`)

	out, err := exec.Command(goBin, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(cache)+",https://proxy.golang.org",
		"GOSUMDB=off",
		"GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=",
		"GOTOOLCHAIN=local",
		// A module cache of its own: the real one must never hold a copy of
		// this tree under a release version.
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
	)
	run := func(args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = consumer
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s: ok in %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	}
	run("mod", "tidy")
	run("build", "-trimpath", "-o", filepath.Join(tmp, "consumer.bin"), ".")

	got := readGoMod(t, goBin, filepath.Join(consumer, "go.mod"))
	want := map[string]bool{coreModule + "@" + v: false, otelModule + "@" + v: false}
	for _, r := range got.Require {
		if _, ok := want[r.Path+"@"+r.Version]; ok {
			want[r.Path+"@"+r.Version] = true
		}
	}
	for k, ok := range want {
		if !ok {
			b, _ := os.ReadFile(filepath.Join(consumer, "go.mod"))
			t.Errorf("consumer's go.mod does not require %s:\n%s", k, b)
		}
	}
	sum, _ := os.ReadFile(filepath.Join(consumer, "go.sum"))
	sc := bufio.NewScanner(bytes.NewReader(sum))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), coreModule+" ") {
			t.Logf("go.sum: %s", sc.Text())
		}
	}
}
