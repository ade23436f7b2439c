package domain_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"cardshop/domain"
)

const secretCode = "SECRET-CODE-7f3a9c"

func TestCardCodeRedaction(t *testing.T) {
	code, err := domain.ParseCardCode(secretCode)
	if err != nil {
		t.Fatal(err)
	}
	if code.Reveal() != secretCode {
		t.Fatalf("Reveal() = %q, want the code", code.Reveal())
	}
	card := domain.Card{ID: 1, ProductID: 2, Code: code, Status: domain.CardSold, OrderNo: "N1"}
	holder := struct {
		Code  domain.CardCode
		Codes []domain.CardCode
		Card  domain.Card
		Ptr   *domain.CardCode
	}{code, []domain.CardCode{code, code}, card, &code}

	var outputs []string
	for _, verb := range []string{"%v", "%s", "%+v", "%#v", "%q", "%x", "%X", "%T %v", "%10s", "%d"} {
		outputs = append(outputs,
			fmt.Sprintf(verb, code), fmt.Sprintf(verb, &code), fmt.Sprintf(verb, card),
			fmt.Sprintf(verb, holder), fmt.Sprintf(verb, []domain.CardCode{code}))
	}
	outputs = append(outputs, fmt.Sprint(code), fmt.Sprintln(code, card), code.String(), code.GoString(),
		fmt.Errorf("import failed for %v", code).Error())

	for _, v := range []any{code, holder, card, map[string]domain.CardCode{"k": code}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		outputs = append(outputs, string(b))
	}

	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		log := slog.New(h)
		log.Info("code", "code", code, "card", card, "holder", holder, "ptr", &code, "codes", []domain.CardCode{code})
		log.Info("group", slog.Group("g", slog.Any("code", code)), slog.Any("card", card))
		log.With("code", code).Error("with")
	}
	outputs = append(outputs, logs.String())

	for _, out := range outputs {
		if strings.Contains(out, secretCode) || strings.Contains(out, "7f3a9c") {
			t.Errorf("the secret leaked: %s", out)
		}
	}
	if !strings.Contains(fmt.Sprint(code), "REDACTED") || !strings.Contains(logs.String(), "REDACTED") {
		t.Errorf("redacted output does not say so: %q / %q", fmt.Sprint(code), logs.String())
	}
}

func TestCardCodeJSONDoesNotRoundTripTheSecret(t *testing.T) {
	// Even a decoder on the far side never sees the code: it has to go through Reveal.
	code, _ := domain.ParseCardCode(secretCode)
	b, _ := json.Marshal(struct{ C domain.CardCode }{code})
	var back map[string]string
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["C"] == secretCode || back["C"] == "" {
		t.Errorf("json form = %q", back["C"])
	}
}
