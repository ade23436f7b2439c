package devpay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"cardshop/domain"
)

// FuzzVerify: on any request Verify never panics; a signature the fuzzer made up is refused as
// a bad signature; a body this gateway signed is either refused as invalid input or parsed
// into a notice that holds only valid values and survives a round trip.
func FuzzVerify(f *testing.F) {
	good, _ := json.Marshal(goodNotice())
	f.Add(string(good), "", "", int64(0), true)
	f.Add(string(good), "1740830400", "v1=00", int64(0), false)
	f.Add(`{"event_id":"evt_1","order_no":"N1","provider_ref":"dev_1","outcome":"failed","amount":5,"currency":"JPY","reason":"x"}`, "", "", int64(301), true)
	f.Add(`{"amount":1e400}`, "x", "v1=", int64(-1), true)
	g, _ := newTestGateway(f, testSecret)
	f.Fuzz(func(t *testing.T, body, ts, sig string, skew int64, sign bool) {
		at := t0.Add(time.Duration(skew%3600) * time.Second)
		in := domain.InboundRequest{Method: http.MethodPost, Header: domain.Header{}, Body: []byte(body), At: at}
		if sign {
			in = signed(g, body, t0)
			in.At = at
		} else {
			in.Header.Set(HeaderTimestamp, ts)
			in.Header.Set(HeaderSignature, sig)
		}
		n, err := g.Verify(ctx, in)
		if !sign {
			if err == nil || !errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("made-up signature %q accepted: %+v %v", sig, n, err)
			}
			return
		}
		if d := at.Sub(t0); d > Tolerance || d < -Tolerance {
			if !errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("stale by %s: %v", d, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) || errors.Is(err, domain.ErrBadSignature) {
				t.Fatalf("signed body refused as %v", err)
			}
			return
		}
		if _, perr := domain.ParseOrderNo(string(n.OrderNo)); perr != nil || n.Amount <= 0 || !g.Supports(n.Currency) ||
			(n.Outcome != domain.OutcomePaid && n.Outcome != domain.OutcomeFailed) ||
			!validID(n.EventID, "evt_") || !validID(n.ProviderRef, "dev_") {
			t.Fatalf("accepted an invalid notice %+v", n)
		}
		again := notice{EventID: n.EventID, OrderNo: string(n.OrderNo), ProviderRef: n.ProviderRef,
			Outcome: n.Outcome.String(), Amount: int64(n.Amount), Currency: n.Currency.Code, Reason: n.Reason}
		if m, err := g.Verify(ctx, g.notification(again, at)); err != nil || m != n {
			t.Fatalf("round trip: %+v → %+v %v", n, m, err)
		}
	})
}

// FuzzPayPageAndConfirm: on any query or form, the pages never panic, answer HTML with a
// known status, and nothing but a genuine link ever delivers a notification (and what it
// delivers verifies).
func FuzzPayPageAndConfirm(f *testing.F) {
	g, _ := newTestGateway(f, testSecret)
	_, q := create(f, g, request(testOrder, 1999, cny))
	f.Add(q.Encode())
	f.Add(q.Encode() + "&choice=pay")
	f.Add(q.Encode() + "&choice=fail")
	f.Add(strings.Replace(q.Encode(), "amount=1999", "amount=1", 1) + "&choice=pay")
	f.Add("order_no=%zz&sig=")
	f.Add("")
	statuses := map[int]bool{200: true, 400: true, 409: true, 410: true, 502: true}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		rep := g.PayPage(v)
		if !statuses[rep.Status] || rep.ContentType != "text/html; charset=utf-8" {
			t.Fatalf("page: %d %s", rep.Status, rep.ContentType)
		}
		s := &shop{g: g}
		refused := 0
		rep = g.Confirm(ctx, v, func(c context.Context, in domain.InboundRequest) error {
			err := s.deliver(c, in)
			if err != nil {
				refused++
			}
			return err
		})
		if !statuses[rep.Status] || rep.ContentType != "text/html; charset=utf-8" {
			t.Fatalf("confirm: %d %s", rep.Status, rep.ContentType)
		}
		if refused > 0 {
			t.Fatalf("confirm delivered a notification that does not verify")
		}
		if len(s.notices) > 0 {
			n := s.notices[0]
			if n.OrderNo != testOrder || n.Amount != 1999 || n.Currency != cny {
				t.Fatalf("delivered %+v for %q", n, raw)
			}
		}
	})
}

// FuzzLinkRoundTrip: whatever the subject, amount, currency and return URL, a created link
// renders its own values, escaped, and tampering with any of them is refused.
func FuzzLinkRoundTrip(f *testing.F) {
	f.Add("Steam card 50 × 2", int64(1999), "CNY", "https://shop.example/o/1", 0)
	f.Add(`<script>alert("x")</script>&amp;`, int64(1), "JPY", "", 3)
	f.Add("\x00\xff", int64(9007199254740993), "usd", "http://h", 6)
	f.Fuzz(func(t *testing.T, subject string, amount int64, code, ret string, pick int) {
		g, _ := newTestGateway(t, testSecret) // fresh: a create for the same order reuses an open payment
		cur, err := domain.ParseCurrency(code)
		if err != nil {
			return
		}
		r := domain.PaymentRequest{OrderNo: testOrder, Amount: domain.Money(amount), Currency: cur, Subject: subject,
			ExpiresAt: t0.Add(time.Hour), ReturnURL: ret}
		pc, err := g.Create(ctx, r)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("create: %v", err)
			}
			return
		}
		u, err := url.Parse(pc.PayURL)
		if err != nil {
			t.Fatalf("PayURL %q: %v", pc.PayURL, err)
		}
		q := u.Query()
		rep := g.PayPage(q)
		if rep.Status != http.StatusOK {
			t.Fatalf("page of a fresh link: %d", rep.Status)
		}
		p := parsePage(t, rep.Body)
		if p.amount != cur.Format(r.Amount)+" "+cur.Code || p.orderNo != string(testOrder) {
			t.Fatalf("page shows %q %q", p.amount, p.orderNo)
		}
		if f := strings.Join(strings.Fields(cleanSubject(subject)), " "); f != "" && !strings.Contains(p.text, f) {
			t.Fatalf("subject %q not in %q", subject, p.text)
		}
		k := signedParams[((pick%len(signedParams))+len(signedParams))%len(signedParams)]
		q.Set(k, q.Get(k)+"0")
		if rep := g.PayPage(q); rep.Status != http.StatusBadRequest {
			t.Fatalf("tampered %s: %d", k, rep.Status)
		}
	})
}
