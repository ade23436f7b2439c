package bootstrap_test

import (
	"bufio"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cardshop/bootstrap"
)

var envName = regexp.MustCompile(`\bCARDSHOP_[A-Z0-9_]+\b`)

// TestDeployKitNamesOnlyRealSettings: every CARDSHOP_ variable the deploy kit sets or names (the
// compose file, the systemd unit, the container image) is a setting of the configuration
// table: a misspelt one would be ignored silently by the service.
func TestDeployKitNamesOnlyRealSettings(t *testing.T) {
	known := bootstrap.EnvNames()
	for _, f := range []string{"../scripts/deploy/compose.yaml", "../scripts/deploy/cardshop.service", "../scripts/deploy/Containerfile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names := envName.FindAllString(string(b), -1)
		if len(names) == 0 {
			t.Errorf("%s names no setting", f)
		}
		for _, n := range names {
			if !slices.Contains(known, n) {
				t.Errorf("%s names %s, which is not a setting (docs/CONFIGURATION.md)", f, n)
			}
		}
	}
}

// TestComposeTrustsCaddyOnly: the compose file's cardshop trusts exactly the fixed address it
// gives Caddy, inside the network's range, and the service accepts the setting; so behind the
// kit's Caddy the per-IP limit is on (not set to 0) and counts each buyer.
func TestComposeTrustsCaddyOnly(t *testing.T) {
	b, err := os.ReadFile("../scripts/deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	compose := string(b)
	trusted := regexp.MustCompile(`(?m)^\s+CARDSHOP_TRUSTED_PROXIES: (\S+)$`).FindStringSubmatch(compose)
	caddy := regexp.MustCompile(`(?m)^\s+shop: \{ipv4_address: (\S+)\}$`).FindStringSubmatch(compose)
	subnet := regexp.MustCompile(`subnet: ([0-9./]+)\}`).FindStringSubmatch(compose)
	if trusted == nil || caddy == nil || subnet == nil || trusted[1] != caddy[1] {
		t.Fatalf("compose.yaml: trusted proxies %q, Caddy's address %q, subnet %q; want Caddy's fixed address trusted", trusted, caddy, subnet)
	}
	if !netip.MustParsePrefix(subnet[1]).Contains(netip.MustParseAddr(caddy[1])) {
		t.Fatalf("Caddy's address %s is outside the network %s", caddy[1], subnet[1])
	}
	if _, err := bootstrap.LoadConfig(env("CARDSHOP_TRUSTED_PROXIES=" + trusted[1])); err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?m)^\s+CARDSHOP_RATE_PER_IP:`).MatchString(compose) {
		t.Fatal("compose.yaml sets CARDSHOP_RATE_PER_IP: behind the trusted Caddy the default per-IP limit applies")
	}
}

// TestSystemdUnitParses reads the unit as systemd does: sections [Unit], [Service] and
// [Install], every other line a comment or Key=Value; it runs `cardshop serve` from the path
// docs/PRODUCTION.md installs it to, with both environment files, restarts on failure and is
// enabled for multi-user.target.
func TestSystemdUnitParses(t *testing.T) {
	f, err := os.Open("../scripts/deploy/cardshop.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	values := map[string][]string{}
	var sections []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			sections = append(sections, line)
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || key == "" || strings.ContainsAny(key, " \t") || len(sections) == 0 {
				t.Fatalf("line %d: %q is not Key=Value in a section", n, line)
			}
			key = sections[len(sections)-1] + key
			values[key] = append(values[key], value)
		}
	}
	if !slices.Equal(sections, []string{"[Unit]", "[Service]", "[Install]"}) {
		t.Fatalf("sections %v", sections)
	}
	want := map[string][]string{
		"[Service]ExecStart":       {"/usr/local/bin/cardshop serve"},
		"[Service]EnvironmentFile": {"/etc/cardshop/cardshop.env", "/etc/cardshop/secrets.env"},
		"[Service]Restart":         {"on-failure"},
		"[Service]DynamicUser":     {"yes"},
		"[Install]WantedBy":        {"multi-user.target"},
	}
	for k, v := range want {
		if !slices.Equal(values[k], v) {
			t.Errorf("%s = %q, want %q", k, values[k], v)
		}
	}
	// And systemd's own reading, where the machine has it, of a copy whose command exists here.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: the unit is checked by the reading above only")
		return
	}
	b, err := os.ReadFile("../scripts/deploy/cardshop.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "cardshop.service")
	if err := os.WriteFile(unit, []byte(strings.Replace(string(b), "ExecStart=/usr/local/bin/cardshop serve", "ExecStart=/bin/true serve", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", unit).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestContainerfile: the image runs the release's static binary as a non-root user, from no
// shell, with its health check being `cardshop healthcheck` (the image has no curl).
func TestContainerfile(t *testing.T) {
	b, err := os.ReadFile("../scripts/deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		"\nFROM scratch\n",
		"COPY cardshop-linux-${ARCH} /cardshop\n", // what make release writes (the context is dist/)
		"\nUSER 65534:65534\n",
		`CMD ["/cardshop", "healthcheck"]`,
		"\nENTRYPOINT [\"/cardshop\"]\n",
		"/etc/ssl/certs/ca-certificates.crt", // HTTPS to the payment providers
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the Containerfile lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^USER\s+(0|root)\b`).MatchString(s) {
		t.Error("the image runs as root")
	}
}
