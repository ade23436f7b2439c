package bootstrap_test

import (
	"bufio"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/fx"

	"cardshop/bootstrap"
)

const freshHint = `run "cardshop secrets" to generate fresh values`

// freshSecrets runs "cardshop secrets" and returns its lines, in order, as KEY=value pairs:
// every line is a comment, blank, or KEY=value of a variable the service reads.
func freshSecrets(t *testing.T) []string {
	t.Helper()
	code, out, errOut := runMain("secrets")
	if code != 0 || errOut != "" {
		t.Fatalf("cardshop secrets: exit %d, stderr %q", code, errOut)
	}
	var kvs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if _, known := bootstrap.EnvDefault(k); !ok || !known || v == "" || strings.TrimSpace(v) != v ||
			strings.ContainsAny(v, "\"'$` \\") {
			t.Fatalf("cardshop secrets printed %q: want KEY=value of a known variable, nothing a shell would expand or split", line)
		}
		kvs = append(kvs, k+"="+v)
	}
	return kvs
}

// realEnv is a configuration of the real adapters with fresh secrets, then extra.
func realEnv(t *testing.T, extra ...string) []string {
	return append(append([]string{"CARDSHOP_ADAPTERS=real"}, freshSecrets(t)...), extra...)
}

// refused checks that LoadConfig refuses environ naming name, with the way out, and that the
// error shows no value of the configuration.
func refused(t *testing.T, environ []string, name string) {
	t.Helper()
	_, err := bootstrap.LoadConfig(environ)
	if err == nil {
		t.Fatalf("%s: accepted", name)
	}
	if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), freshHint) {
		t.Fatalf("%s: the error %q does not name it or say how to make fresh values", name, err)
	}
	for _, kv := range environ {
		_, v, _ := strings.Cut(kv, "=")
		for _, part := range append(strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ':' }), v) {
			if len(part) >= 12 && strings.Contains(err.Error(), part) {
				t.Fatalf("%s: the error shows a value: %q", name, err)
			}
		}
	}
}

// "cardshop secrets" prints an env file of every secret cardshop makes itself; its values are
// fresh each run and start the real adapters (LoadConfig and the wiring accept them).
func TestSecretsCommandPrintsFreshValuesTheRealAdaptersAccept(t *testing.T) {
	first, second := freshSecrets(t), freshSecrets(t)
	var names []string
	for i, kv := range first {
		k, v, _ := strings.Cut(kv, "=")
		names = append(names, k)
		if _, v2, _ := strings.Cut(second[i], "="); v2 == v {
			t.Errorf("%s is the same in two runs", k)
		}
	}
	want := []string{"CARDSHOP_ADMIN_TOKEN", "CARDSHOP_PAYMENT_SECRET", "CARDSHOP_TOKEN_SECRET", "CARDSHOP_WEBHOOK_SECRET",
		"CARDSHOP_CODE_KEYS", "CARDSHOP_CODE_HASH_KEY"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("cardshop secrets printed %v, want %v", names, want)
	}
	cfg, err := bootstrap.LoadConfig(realEnv(t))
	if err != nil {
		t.Fatalf("the real adapters refuse fresh secrets: %v", err)
	}
	if err := fx.ValidateApp(bootstrap.Module(cfg), fx.NopLogger); err != nil {
		t.Fatalf("the real adapter set does not wire with fresh secrets: %v", err)
	}
	for _, kv := range first {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "CARDSHOP_CODE_KEYS":
			kid, key, ok := strings.Cut(v, ":")
			if raw, err := base64.StdEncoding.DecodeString(key); !ok || kid == "" || err != nil || len(raw) != 32 {
				t.Errorf("%s is not kid:base64 of 32 bytes", k)
			}
		case "CARDSHOP_CODE_HASH_KEY":
			if raw, err := base64.StdEncoding.DecodeString(v); err != nil || len(raw) != 32 {
				t.Errorf("%s is not base64 of 32 bytes", k)
			}
		default:
			if raw, err := base64.RawURLEncoding.DecodeString(v); err != nil || len(raw) != 32 {
				t.Errorf("%s is not base64url of 32 bytes", k)
			}
		}
	}
	if code, _, errOut := runMain("secrets", "now"); code != 1 || !strings.Contains(errOut, "Usage: cardshop secrets") {
		t.Fatalf("an argument: exit %d, %q", code, errOut)
	}
}

// The development values the Makefile and the README print run the memory adapters and are
// refused by the real ones, each named in the error with the way out.
func TestRealAdaptersRefuseThePublishedDevelopmentSecrets(t *testing.T) {
	published := map[string]string{
		"CARDSHOP_ADMIN_TOKEN":    "dev-admin-token-change-me",
		"CARDSHOP_PAYMENT_SECRET": "dev-payment-secret-change-me",
		"CARDSHOP_TOKEN_SECRET":   "dev-token-secret-change-me",
		"CARDSHOP_CODE_KEYS":      "1:uZV/T0DKC0hvayBUi9pqlPrt+dudhiCsjzvNkVCcF8Q=",
		"CARDSHOP_CODE_HASH_KEY":  "bXZjr1kVuZF/4eIYy/o1Uy8qfvT5cZSpqIHyiV1fbfY=",
	}
	var dev []string
	for name, v := range published {
		t.Run(name, func(t *testing.T) {
			refused(t, realEnv(t, name+"="+v), name)
		})
		dev = append(dev, name+"="+v)
	}
	// `make run`: the memory adapters with every development value.
	cfg, err := bootstrap.LoadConfig(append([]string{"CARDSHOP_DEV_PAYMENTS=true"}, dev...))
	if err != nil {
		t.Fatalf("the memory adapters refuse the development values: %v", err)
	}
	if err := fx.New(bootstrap.Module(cfg), fx.NopLogger).Err(); err != nil {
		t.Fatalf("the memory adapters do not build with the development values: %v", err)
	}
	// A configuration built in code, past LoadConfig, is held to the same rule by the wiring.
	cfg.Adapters = bootstrap.AdaptersReal
	err = fx.ValidateApp(bootstrap.Module(cfg), fx.NopLogger)
	if err == nil || !strings.Contains(err.Error(), "CARDSHOP_ADMIN_TOKEN") || !strings.Contains(err.Error(), freshHint) {
		t.Fatalf("the real adapters wired with the development values: %v", err)
	}
}

// Every secret value cardshop's own files print (CARDSHOP_…=value, and the admin token of a
// "Bearer" header) is refused by the real adapters: a value added to the README or the
// Makefile later is caught here, not in production.
func TestRealAdaptersRefuseEverySecretTheRepositoryPrints(t *testing.T) {
	secretNames := "ADMIN_TOKEN|PAYMENT_SECRET|TOKEN_SECRET|WEBHOOK_SECRET|CODE_KEYS|CODE_HASH_KEY|EPAY_KEY|WECHAT_APIV3_KEY|STRIPE_SECRET_KEY|STRIPE_WEBHOOK_SECRETS"
	assign := regexp.MustCompile(`CARDSHOP_(` + secretNames + `)=["']?([^\s"'$\\)]+)`)
	bearer := regexp.MustCompile(`Bearer ([A-Za-z0-9._~+/=-]{8,})`)
	var files []string
	for _, pattern := range []string{"../README.md", "../Makefile", "../docs/*.md", "../scripts/*", "../scripts/deploy/*", "../docker-compose.yml", "../.ci/*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	found := 0
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			continue // its files are matched by a pattern of their own
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range assign.FindAllStringSubmatch(string(b), -1) {
			found++
			name := "CARDSHOP_" + m[1]
			refused(t, realEnv(t, name+"="+m[2]), name)
		}
		for _, m := range bearer.FindAllStringSubmatch(string(b), -1) {
			found++
			refused(t, realEnv(t, "CARDSHOP_ADMIN_TOKEN="+m[1]), "CARDSHOP_ADMIN_TOKEN")
		}
	}
	if found < 5 {
		t.Fatalf("found %d secret values in %v: the patterns no longer match the files", found, files)
	}
}

// Obviously weak values are refused by the real adapters whatever their variable; a provider's
// key keeps the provider's shape (only placeholders and repeated characters are refused).
func TestRealAdaptersRefuseWeakSecrets(t *testing.T) {
	zeros := base64.StdEncoding.EncodeToString(make([]byte, 32))
	short := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	urlSpelling := "1:uZV_T0DKC0hvayBUi9pqlPrt-dudhiCsjzvNkVCcF8Q" // the published key, base64url unpadded
	for _, tc := range []struct{ name, value string }{
		{"CARDSHOP_ADMIN_TOKEN", "Kq7xW2pLm9vR4sT8nB3yH6cJ1dF5gZ0"}, // 31 characters
		{"CARDSHOP_ADMIN_TOKEN", strings.Repeat("a", 48)},
		{"CARDSHOP_PAYMENT_SECRET", strings.Repeat("ab12", 12)},
		{"CARDSHOP_TOKEN_SECRET", "our-production-token-secret-CHANGE_ME-7f3a9c"},
		{"CARDSHOP_TOKEN_SECRET", "token-secret-for-example-shop-7f3a9c1b2d4e"},
		{"CARDSHOP_WEBHOOK_SECRET", "webhook-placeholder-0123456789abcdefghij"},
		{"CARDSHOP_CODE_KEYS", "1:" + zeros},
		{"CARDSHOP_CODE_KEYS", "1:" + short},
		{"CARDSHOP_CODE_KEYS", "1:" + zeros[:20]},
		{"CARDSHOP_CODE_KEYS", "2:KW0ZrH3i8b0Oa1mUPxbcgXmC8JWQvvLI8LCsx7XtYJU=," + urlSpelling},
		{"CARDSHOP_CODE_KEYS", "KW0ZrH3i8b0Oa1mUPxbcgXmC8JWQvvLI8LCsx7XtYJU="}, // no key id
		{"CARDSHOP_CODE_HASH_KEY", zeros},
		{"CARDSHOP_CODE_HASH_KEY", base64.StdEncoding.EncodeToString([]byte("fifteen-bytes!!"))},
		{"CARDSHOP_EPAY_KEY", "your-epay-key-example"},
		{"CARDSHOP_EPAY_KEY", strings.Repeat("k", 32)},
		{"CARDSHOP_WECHAT_APIV3_KEY", "ChangeMe0123456789abcdefghijklmn"},
	} {
		t.Run(tc.name+"="+tc.value[:min(len(tc.value), 12)], func(t *testing.T) {
			extra := []string{tc.name + "=" + tc.value}
			switch tc.name {
			case "CARDSHOP_EPAY_KEY":
				extra = append(extra, "CARDSHOP_EPAY_URL=https://pay.example", "CARDSHOP_EPAY_PID=1001")
			case "CARDSHOP_WECHAT_APIV3_KEY":
				p := wellFormedProviderSettings(t)
				for _, n := range []string{"CARDSHOP_WECHAT_MCHID", "CARDSHOP_WECHAT_APPID", "CARDSHOP_WECHAT_SERIAL",
					"CARDSHOP_WECHAT_PRIVATE_KEY", "CARDSHOP_WECHAT_PUBLIC_KEY_ID", "CARDSHOP_WECHAT_PUBLIC_KEY"} {
					extra = append(extra, n+"="+p[n])
				}
			}
			refused(t, realEnv(t, extra...), tc.name)
			// The memory adapters judge none of it.
			memory := append([]string{"CARDSHOP_ADAPTERS=memory"}, realEnv(t, extra...)[1:]...)
			if _, err := bootstrap.LoadConfig(memory); err != nil && strings.Contains(err.Error(), "cardshop secrets") {
				t.Fatalf("the memory adapters judged it: %v", err)
			}
		})
	}
	// A provider's own key of its own shape is its business: a random epay key of 16 passes.
	if _, err := bootstrap.LoadConfig(realEnv(t, "CARDSHOP_EPAY_URL=https://pay.example", "CARDSHOP_EPAY_PID=1001",
		"CARDSHOP_EPAY_KEY=q8Zr3LpX0vNc5TgW")); err != nil {
		t.Fatalf("a random epay key: %v", err)
	}
}
