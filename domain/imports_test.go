package domain_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDomainImportsOnlyStdlib keeps the domain pure: no module outside the standard library,
// not even one of cardshop's own packages, may appear among its dependencies.
func TestDomainImportsOnlyStdlib(t *testing.T) {
	// go test puts GOROOT/bin first on the PATH of the test binary.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the dependencies: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "cardshop/domain")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line = strings.TrimSpace(line); line != "" && line != "cardshop/domain" {
			t.Errorf("domain depends on %s; it may import the standard library only", line)
		}
	}
}
