package bootstrap_test

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"cardshop/bootstrap"
)

// TestMakeRelease runs `make release` for this machine's architecture into a folder of its own,
// with a version, and checks what a release promises: a static binary of each command (no
// dynamic section, no interpreter: it runs in an image FROM scratch), `cardshop version` naming
// the version, and SHA256SUMS that match the files.
func TestMakeRelease(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the release is for Linux")
	}
	dist := t.TempDir()
	cmd := exec.Command("make", "-C", "..", "release", "RELEASE_ARCHES="+runtime.GOARCH, "DIST="+dist, "VERSION=v0.0.0-releasetest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	for _, name := range []string{"cardshop", "cardshopctl"} {
		bin := filepath.Join(dist, name+"-linux-"+runtime.GOARCH)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is not static: it has a %s program header", name, p.Type)
			}
		}
		f.Close()
	}
	out, err := exec.Command(filepath.Join(dist, "cardshop-linux-"+runtime.GOARCH), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "cardshop v0.0.0-releasetest (commit ") || !strings.Contains(string(out), runtime.Version()) {
		t.Fatalf("cardshop version: %q, %v", out, err)
	}
	sums, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	seen := 0
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		want, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		f, err := os.Open(filepath.Join(dist, file))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil || hex.EncodeToString(h.Sum(nil)) != want {
			t.Errorf("%s: the sum does not match (%v)", file, err)
		}
		seen++
	}
	if seen != 2 {
		t.Fatalf("SHA256SUMS lists %d files, want 2", seen)
	}
}

// TestVersionCommand: `cardshop version` prints one line naming the release, the commit and the
// Go release, and exits 0.
func TestVersionCommand(t *testing.T) {
	var out, errOut strings.Builder
	if code := bootstrap.Main([]string{"version"}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	line := out.String()
	if !strings.HasPrefix(line, "cardshop ") || !strings.Contains(line, "(commit ") || !strings.Contains(line, runtime.Version()) ||
		strings.Count(line, "\n") != 1 {
		t.Fatalf("cardshop version = %q", line)
	}
	if want := bootstrap.ReadBuildInfo().String() + "\n"; line != want {
		t.Fatalf("cardshop version = %q, want %q", line, want)
	}
}

// TestHealthcheckCommand: `cardshop healthcheck` exits 0 against a ready service (its
// CARDSHOP_HTTP_ADDR, a wildcard host asked on 127.0.0.1) and 1 when nothing answers.
func TestHealthcheckCommand(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	runService(t, cfg, io.Discard)
	_, port, _ := strings.Cut(cfg.HTTPAddr, ":")
	t.Setenv("CARDSHOP_HTTP_ADDR", "0.0.0.0:"+port)
	var out, errOut strings.Builder
	if code := bootstrap.Main([]string{"healthcheck"}, &out, &errOut); code != 0 || out.String() != "ready\n" {
		t.Fatalf("against a ready service: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := bootstrap.Main([]string{"healthcheck", "-url", "http://" + freeAddr(t) + "/readyz", "-timeout", "1s"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "not reachable") {
		t.Fatalf("against nothing: exit %d, stderr %q", code, errOut.String())
	}
}
