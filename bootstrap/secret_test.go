package bootstrap_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"cardshop/bootstrap"
	"cardshop/domain"
)

// Secrets are redacted by their type: a whole Config printed, logged or encoded in any usual
// way shows no secret and no password, and still shows where the connections point.
func TestConfigNeverShowsItsSecrets(t *testing.T) {
	secretValues := map[string]string{
		"CARDSHOP_CODE_KEYS":      "k1:c2VjcmV0LWtleS1tYXRlcmlhbC0wMTIzNDU2Nzg5YWI=",
		"CARDSHOP_CODE_HASH_KEY":  "aGFzaC1rZXktbWF0ZXJpYWwtMDEyMzQ1Njc4OWFiY2Q=",
		"CARDSHOP_WEBHOOK_SECRET": "webhook-secret-0123456789-abcdefgh",
	}
	environ := env("CARDSHOP_ADAPTERS=real", "CARDSHOP_WEBHOOK_URL=https://shop.example/h",
		"CARDSHOP_MYSQL_DSN=shop:db-pass-0123456789@tcp(db.internal:3306)/shop?parseTime=true",
		"CARDSHOP_AMQP_URL=amqp://shop:mq-pass-0123456789@mq.internal:5672/")
	for k, v := range secretValues {
		environ = append(environ, k+"="+v)
	}
	cfg, err := bootstrap.LoadConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CodeKeys.Reveal() != secretValues["CARDSHOP_CODE_KEYS"] || cfg.AdminToken.Reveal() != adminToken ||
		!strings.Contains(cfg.MySQLDSN.Reveal(), "db-pass-0123456789") {
		t.Fatal("Reveal does not give the value back")
	}

	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg, "token", cfg.AdminToken, "dsn", cfg.MySQLDSN)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", cfg)
	encoded, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", cfg), "%+v": fmt.Sprintf("%+v", cfg), "%#v": fmt.Sprintf("%#v", cfg),
		"%s": fmt.Sprintf("%s", cfg.PaymentSecret), "%q": fmt.Sprintf("%q", cfg.TokenSecret), "%x": fmt.Sprintf("%x", cfg.AdminToken),
		"error": fmt.Errorf("start with %v: %w", cfg, err).Error(), "slog": logs.String(), "json": string(encoded),
		"Sprint": fmt.Sprint(cfg.WebhookSecret, cfg.AMQPURL),
	}
	leaks := []string{adminToken, paymentSecret, tokenSecret, "db-pass-0123456789", "mq-pass-0123456789"}
	for _, v := range secretValues {
		leaks = append(leaks, v)
	}
	for how, out := range outputs {
		for _, secret := range leaks {
			if strings.Contains(out, secret) || (how == "%x" && strings.Contains(out, fmt.Sprintf("%x", adminToken))) {
				t.Errorf("%s shows the secret %q: %s", how, secret, out)
			}
		}
	}
	for _, how := range []string{"%+v", "slog", "json"} {
		out := outputs[how]
		if !strings.Contains(out, "[REDACTED]") || !strings.Contains(out, "db.internal:3306") || !strings.Contains(out, "mq.internal:5672") ||
			!strings.Contains(out, "xxxxx") {
			t.Errorf("%s should show [REDACTED], the hosts and a masked password: %s", how, out)
		}
	}
	// An unset secret shows as unset.
	if s := fmt.Sprintf("[%v]", domain.Secret("")); s != "[]" {
		t.Errorf("an empty secret prints %s", s)
	}
	// A connection string that does not parse is redacted whole.
	if s := fmt.Sprint(bootstrap.ConnString("not a dsn: pw")); s != "[REDACTED]" {
		t.Errorf("an unparsable connection string prints %q", s)
	}
}
