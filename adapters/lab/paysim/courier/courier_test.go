package courier_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/lab/paysim/courier"
)

// note is a test notification: its name, whether it is genuine.
type note struct {
	name   string
	forged bool
}

// shop records the bodies it receives and answers "ok" unless refuse holds the body.
type shop struct {
	mu     sync.Mutex
	got    []string
	refuse map[string]bool
}

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, string(b))
	if s.refuse[string(b)] {
		http.Error(w, "no", http.StatusBadRequest)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func (s *shop) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func newCourier(t *testing.T, maxAttempts int) (*courier.Courier[note], *shop, *int) {
	t.Helper()
	sh := &shop{refuse: map[string]bool{}}
	srv := httptest.NewServer(sh)
	t.Cleanup(srv.Close)
	seals := new(int)
	c := courier.New(courier.Config[note]{
		Seal: func(n note, attempt int) (courier.Post, error) {
			*seals++
			if n.name == "unsealable" {
				return courier.Post{}, errors.New("no URL")
			}
			return courier.Post{Method: http.MethodPost, URL: srv.URL, Body: []byte(n.name)}, nil
		},
		Acknowledged: func(status int, reply []byte) bool { return status == 200 && string(reply) == "ok" },
		Genuine:      func(n note) bool { return !n.forged },
		MaxAttempts:  maxAttempts,
	})
	return c, sh, seals
}

func names(ds []courier.Delivery[note]) (out []string) {
	for _, d := range ds {
		out = append(out, d.Note.name)
	}
	return out
}

func TestSendRetriesUntilAcknowledged(t *testing.T) {
	c, sh, seals := newCourier(t, 3)
	ctx := context.Background()
	sh.refuse["a"] = true
	ds := c.Send(ctx, note{name: "a"})
	if len(ds) != 3 || ds[2].Attempt != 3 || ds[2].Accepted() || ds[2].Status != 400 || *seals != 3 {
		t.Fatalf("refused: %+v, %d seals", ds, *seals)
	}
	c.Retry(false)
	if ds := c.Send(ctx, note{name: "a"}); len(ds) != 1 {
		t.Fatalf("retry off: %d attempts", len(ds))
	}
	c.Retry(true)
	if ds := c.Send(ctx, note{name: "b"}); len(ds) != 1 || !ds[0].Accepted() || string(ds[0].Reply) != "ok" || string(ds[0].Sent.Body) != "b" {
		t.Fatalf("acknowledged: %+v", ds)
	}
	if got := len(c.Deliveries()); got != 5 {
		t.Fatalf("%d deliveries recorded, want 5", got)
	}
	if d := c.SendOnce(ctx, note{name: "unsealable"}); d.Err == nil || d.Accepted() || len(sh.received()) != 5 {
		t.Fatalf("a Seal error: %+v", d)
	}
}

func TestDropLosesAttempts(t *testing.T) {
	c, sh, _ := newCourier(t, 3)
	ctx := context.Background()
	c.Drop(2)
	ds := c.Send(ctx, note{name: "a"})
	if len(ds) != 3 || !ds[0].Dropped || !ds[1].Dropped || !ds[2].Accepted() || len(sh.received()) != 1 {
		t.Fatalf("%+v", ds)
	}
	c.Drop(1)
	if ds := c.SendNow(ctx, note{name: "b"}); len(ds) != 1 || !ds[0].Accepted() {
		t.Fatalf("SendNow was dropped: %+v", ds)
	}
	if d := c.SendOnce(ctx, note{name: "c"}); !d.Dropped || d.Accepted() {
		t.Fatalf("SendOnce after Drop(1): %+v", d)
	}
}

func TestHoldAndReleaseInAnyOrder(t *testing.T) {
	c, sh, _ := newCourier(t, 1)
	ctx := context.Background()
	c.Hold(true)
	for _, n := range []string{"a", "b", "c"} {
		if ds := c.Send(ctx, note{name: n}); len(ds) != 1 || !ds[0].Held || ds[0].Accepted() {
			t.Fatalf("held %s: %+v", n, ds)
		}
	}
	if d := c.SendNow(ctx, note{name: "now"})[0]; !d.Accepted() {
		t.Fatalf("SendNow was held: %+v", d)
	}
	c.Hold(false)
	if got := names(c.Release(ctx, 2, 0)); len(got) != 2 || got[0] != "c" || got[1] != "a" {
		t.Fatalf("released %v", got)
	}
	if held := c.Held(); len(held) != 1 || held[0].name != "b" {
		t.Fatalf("still held %+v", held)
	}
	c.Release(ctx)
	if got := sh.received(); len(got) != 4 || got[1] != "c" || got[2] != "a" || got[3] != "b" {
		t.Fatalf("the shop received %v", got)
	}
}

func TestResendTheLastGenuine(t *testing.T) {
	c, sh, _ := newCourier(t, 1)
	ctx := context.Background()
	if _, err := c.Resend(ctx, 1); !errors.Is(err, courier.ErrNothingSent) {
		t.Fatalf("resend of nothing: %v", err)
	}
	c.Send(ctx, note{name: "a"})
	c.SendNow(ctx, note{name: "forged", forged: true})
	c.Drop(1)
	c.Send(ctx, note{name: "lost"})
	ds, err := c.Resend(ctx, 2)
	if err != nil || len(ds) != 2 || ds[0].Note.name != "a" || !ds[1].Accepted() {
		t.Fatalf("%+v %v", ds, err)
	}
	if got := sh.received(); len(got) != 4 || got[3] != "a" {
		t.Fatalf("the shop received %v", got)
	}
}

func TestOutboxFlush(t *testing.T) {
	c, sh, _ := newCourier(t, 1)
	c.Post(note{name: "a"})
	c.Post(note{name: "b"})
	if box := c.Outbox(); len(box) != 2 || len(sh.received()) != 0 {
		t.Fatalf("outbox %+v", box)
	}
	if got := names(c.Flush(context.Background())); len(got) != 2 || got[0] != "a" || len(c.Outbox()) != 0 {
		t.Fatalf("flushed %v", got)
	}
}

func TestDelayEndsWithTheContext(t *testing.T) {
	c, sh, _ := newCourier(t, 3)
	c.SetDelay(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ds := c.Send(ctx, note{name: "a"})
	if len(ds) != 1 || !errors.Is(ds[0].Err, context.Canceled) || len(sh.received()) != 0 {
		t.Fatalf("%+v", ds)
	}
}
