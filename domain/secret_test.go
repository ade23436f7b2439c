package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"cardshop/domain"
)

// A Secret never prints: not through fmt's verbs (alone, in a struct, behind a pointer, in a
// map), not in JSON or text encoding, not through slog's text or JSON handler, not in an
// error that wraps it. Every printing says [REDACTED].
func TestSecretNeverPrints(t *testing.T) {
	const value = "sk_live_51Hq9-very-secret-value"
	s := domain.Secret(value)
	type holder struct {
		Key   domain.Secret
		Codes []domain.CardCode
		Ptr   *domain.Secret
	}
	h := holder{Key: s, Codes: []domain.CardCode{domain.RehydrateCardCode(value)}, Ptr: &s}
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10s", "%-12v", "%d"} {
		outputs = append(outputs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h),
			fmt.Sprintf(verb, map[string]domain.Secret{"k": s}), fmt.Sprintf(verb, []any{s}))
	}
	outputs = append(outputs, fmt.Sprint(s), fmt.Sprintln(s, h), s.String(), s.GoString())
	for _, v := range []any{s, h, &h, map[string]domain.Secret{"k": s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		outputs = append(outputs, string(b))
	}
	text, _ := s.MarshalText()
	outputs = append(outputs, string(text))

	var logs bytes.Buffer
	for _, handler := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		log := slog.New(handler)
		log.Info("secret", "s", s, "holder", h, "ptr", &s, slog.Any("any", s), slog.Group("g", "s", s))
		log.With("s", s).Error("with", "err", fmt.Errorf("connect with %v: %w", s, errors.New("refused")))
	}
	outputs = append(outputs, logs.String())

	wrapped := fmt.Errorf("sign with %s (%q, %+v): %w", s, s, h, fmt.Errorf("key %v", s))
	outputs = append(outputs, wrapped.Error(), errors.Unwrap(wrapped).Error())

	hexValue := fmt.Sprintf("%x", value)
	for _, out := range outputs {
		if strings.Contains(out, value) || strings.Contains(out, "very-secret") || strings.Contains(out, hexValue) ||
			strings.Contains(strings.ToLower(out), strings.ToLower(hexValue)) {
			t.Errorf("the secret printed: %s", out)
		}
		if !strings.Contains(out, domain.Redacted) {
			t.Errorf("no %s in %s", domain.Redacted, out)
		}
	}
	if s.Reveal() != value {
		t.Fatalf("Reveal = %q", s.Reveal())
	}
}

// An empty Secret prints empty, so that an unset value shows as unset.
func TestEmptySecretPrintsEmpty(t *testing.T) {
	var s domain.Secret
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "s", s)
	b, _ := json.Marshal(struct{ S domain.Secret }{s})
	for _, got := range []string{fmt.Sprintf("[%v|%s|%#v|%q]", s, s, s, s), string(b), logs.String()} {
		if strings.Contains(got, domain.Redacted) {
			t.Errorf("an empty secret prints %s", got)
		}
	}
	if got := fmt.Sprintf("[%v]", s); got != "[]" {
		t.Errorf("an empty secret prints %s", got)
	}
	if string(b) != `{"S":""}` {
		t.Errorf("JSON %s", b)
	}
}
