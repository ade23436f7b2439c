package bootstrap_test

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

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
	t.Run("image", func(t *testing.T) { buildAndRunImage(t, dist) })
}

// buildAndRunImage builds the container image from the release with `make image-only` and
// podman, in a store of its own (vfs, nothing of the machine's), runs it on the in-memory
// adapters, and checks what the image promises: the service answers /readyz, the image's own
// HEALTHCHECK passes, it runs as user 65534, and it has no shell. The run flags are this
// sandbox's (runc, cgroupfs, limits no higher than the machine's), not the image's.
func buildAndRunImage(t *testing.T, dist string) {
	podman, err := exec.LookPath("podman")
	if err == nil {
		_, err = exec.LookPath("runc")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("podman and runc are needed to build and run the image, and CI=true (.ci/services.sh installs them): %v", err)
		}
		t.Skipf("no podman or runc (set CI=true to fail instead): %v", err)
	}
	store := t.TempDir()
	base := []string{"--storage-driver", "vfs", "--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"),
		"--cgroup-manager", "cgroupfs", "--runtime", "runc"}
	pod := func(args ...string) (string, error) {
		out, err := exec.Command(podman, append(append([]string(nil), base...), args...)...).CombinedOutput()
		return string(out), err
	}
	const image = "localhost/cardshop:imagetest"
	container := strings.Join(append([]string{podman}, base...), " ")
	build := exec.Command("make", "-C", "..", "image-only", "DIST="+dist, "IMAGE="+image, "IMAGE_ARCH="+runtime.GOARCH,
		"CONTAINER="+container, "IMAGE_BUILD_FLAGS=--format docker --isolation chroot")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image-only: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = pod("rmi", "-f", image) })

	addr := freeAddr(t)
	name := "cardshop-imagetest-" + strings.ReplaceAll(strings.TrimPrefix(addr, "127.0.0.1:"), ":", "")
	nproc := "1024:1024" // at most the machine's: a container may not raise its limits
	out, err := pod("run", "-d", "--name", name, "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc="+nproc,
		"-e", "CARDSHOP_HTTP_ADDR="+addr, "-e", "CARDSHOP_ADMIN_TOKEN=dev-admin-token-change-me",
		"-e", "CARDSHOP_PAYMENT_SECRET=dev-payment-secret-change-me", "-e", "CARDSHOP_TOKEN_SECRET=dev-token-secret-change-me",
		image)
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = pod("rm", "-f", "-t", "2", name) })

	ready := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = true
				break
			}
		}
	}
	if !ready {
		logs, _ := pod("logs", name)
		t.Fatalf("the container did not answer /readyz 200 within 30 s; its log:\n%s", logs)
	}
	if out, err := pod("healthcheck", "run", name); err != nil {
		t.Errorf("the image's HEALTHCHECK failed: %v\n%s", err, out)
	}
	if out, err := pod("inspect", "--format", "{{.Config.User}}", name); err != nil || lastLine(strings.TrimSpace(out)) != "65534:65534" {
		t.Errorf("the container's user: %q, %v; want 65534:65534", out, err)
	}
	if out, err := pod("top", name, "user"); err != nil || !strings.Contains(out, "65534") || strings.Contains(out, "root") {
		t.Errorf("the service's process user: %q, %v; want 65534, never root", out, err)
	}
	if out, err := pod("exec", name, "/bin/sh", "-c", "true"); err == nil {
		t.Errorf("the image has a shell: /bin/sh ran (%s)", out)
	}
	if out, err := pod("exec", name, "/cardshop", "version"); err != nil || !strings.HasPrefix(lastLine(strings.TrimSpace(out)), "cardshop v0.0.0-releasetest ") {
		t.Errorf("cardshop version in the image: %q, %v", out, err)
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
