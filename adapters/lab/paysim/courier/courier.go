// Package courier is test equipment: the notification courier the payment simulators share.
// It carries notifications a simulator has already signed to the shop and plays the ways
// delivery goes wrong: retries until acknowledged, a delay, dropped attempts, notifications
// held and released in any order, resends, an outbox of notifications that API calls caused.
//
// It never signs. Each simulator signs its own notifications (Seal), so that a signing bug
// cannot hide in both a payment adapter and its simulator behind one shared signer.
//
// It imports only the standard library.
package courier

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// Post is one signed HTTP request of a notification, as the simulator built it.
type Post struct {
	Method string // GET or POST
	URL    string
	Header http.Header
	Body   []byte
}

// Config is what a simulator tells its courier.
type Config[N any] struct {
	// Client sends the requests; nil: a client with a 10 s timeout.
	Client *http.Client
	// Seal builds the signed request of note for one attempt (1, 2, …). The courier calls it
	// before every attempt, so that a provider that signs each attempt afresh (a new
	// timestamp) does; an error is recorded as the attempt's transport error.
	Seal func(note N, attempt int) (Post, error)
	// Acknowledged says whether the shop's answer acknowledges the notification.
	Acknowledged func(status int, reply []byte) bool
	// Genuine says whether note is genuine: only a genuine one is sent again by Resend. Nil:
	// every note is.
	Genuine func(note N) bool
	// MaxAttempts bounds the attempts of one Send until one is acknowledged; 0: 1.
	MaxAttempts int
	// Pause is the wait between two attempts of one Send.
	Pause time.Duration
}

// Delivery is one attempt at a notification: sent, lost, or queued.
type Delivery[N any] struct {
	Note    N
	Attempt int  // 1 for the first attempt of a Send (or SendNow), then its retries; 0 for SendOnce
	Dropped bool // lost on the way (Drop): the shop never saw it
	Held    bool // queued by Hold, not sent
	Sent    Post // the request as sent (none when dropped or held)
	Status  int  // the shop's HTTP status; 0 when none
	Reply   []byte
	Err     error // the transport error, or Seal's
	acked   bool
}

// Accepted reports whether the shop acknowledged the notification, as its provider counts it.
func (d Delivery[N]) Accepted() bool { return !d.Dropped && !d.Held && d.Err == nil && d.acked }

// Courier carries a simulator's notifications. Its switches are safe for concurrent use.
type Courier[N any] struct {
	cfg Config[N]

	mu         sync.Mutex
	retry      bool
	delay      time.Duration
	drop       int
	hold       bool
	held       []N
	outbox     []N
	last       *N
	deliveries []Delivery[N]
}

// New returns a courier with retries on and every other switch off.
func New[N any](cfg Config[N]) *Courier[N] {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 1
	}
	if cfg.Genuine == nil {
		cfg.Genuine = func(N) bool { return true }
	}
	return &Courier[N]{cfg: cfg, retry: true}
}

// Retry switches a Send's retries on (the default) or off: off, a Send makes one attempt.
func (c *Courier[N]) Retry(on bool) { c.mu.Lock(); c.retry = on; c.mu.Unlock() }

// SetDelay makes every attempt that goes out wait d (or until its context ends) first.
func (c *Courier[N]) SetDelay(d time.Duration) { c.mu.Lock(); c.delay = d; c.mu.Unlock() }

// Drop loses the next n attempts on the way: they count as attempts, the shop never sees
// them.
func (c *Courier[N]) Drop(n int) { c.mu.Lock(); c.drop = n; c.mu.Unlock() }

// Hold queues notifications instead of sending them (on), or sends them again (off); Release
// sends what was queued.
func (c *Courier[N]) Hold(on bool) { c.mu.Lock(); c.hold = on; c.mu.Unlock() }

// Held returns the queued notifications, oldest first.
func (c *Courier[N]) Held() []N {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]N(nil), c.held...)
}

// Release sends the queued notifications (each as Send does, Hold aside), in queue order or
// in the order of the given indexes into Held() (an index may repeat; one left out stays
// queued), and returns every attempt.
func (c *Courier[N]) Release(ctx context.Context, order ...int) []Delivery[N] {
	c.mu.Lock()
	held := c.held
	if order == nil {
		for i := range held {
			order = append(order, i)
		}
	}
	sent := map[int]bool{}
	for _, i := range order {
		sent[i] = true
	}
	var rest []N
	for i, n := range held {
		if !sent[i] {
			rest = append(rest, n)
		}
	}
	c.held = rest
	c.mu.Unlock()
	var out []Delivery[N]
	for _, i := range order {
		if i >= 0 && i < len(held) {
			out = append(out, c.send(ctx, held[i], false, true)...)
		}
	}
	return out
}

// Send sends note through the switches: queued while Hold is on; otherwise attempted until
// the shop acknowledges it, at most MaxAttempts times (once with Retry off), Pause apart. It
// returns the attempts, the last one last.
func (c *Courier[N]) Send(ctx context.Context, note N) []Delivery[N] {
	return c.send(ctx, note, true, true)
}

// SendOnce sends note through the switches, one attempt: a single notification, as a
// merchant's "notify again" button sends.
func (c *Courier[N]) SendOnce(ctx context.Context, note N) Delivery[N] {
	c.mu.Lock()
	held := c.hold
	c.mu.Unlock()
	if held {
		return c.queue(note, 0)
	}
	return c.attempt(ctx, note, 0, true)
}

// SendNow sends note as Send does but past Hold and Drop: a notification a test sends by
// hand, a forged one for instance.
func (c *Courier[N]) SendNow(ctx context.Context, note N) []Delivery[N] {
	return c.send(ctx, note, false, false)
}

// ErrNothingSent means Resend found no genuine notification sent yet.
var ErrNothingSent = errors.New("courier: no notification sent yet")

// Resend sends the last genuine notification sent n more times, each as Send does (Hold
// aside) and sealed afresh.
func (c *Courier[N]) Resend(ctx context.Context, n int) ([]Delivery[N], error) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last == nil {
		return nil, ErrNothingSent
	}
	var out []Delivery[N]
	for range n {
		out = append(out, c.send(ctx, *last, false, true)...)
	}
	return out, nil
}

// Post puts note in the outbox, as an API call that causes a notification does; Flush sends
// it.
func (c *Courier[N]) Post(note N) { c.mu.Lock(); c.outbox = append(c.outbox, note); c.mu.Unlock() }

// Outbox returns the notifications Flush has not sent yet, oldest first.
func (c *Courier[N]) Outbox() []N {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]N(nil), c.outbox...)
}

// Flush sends the outbox's notifications, each as Send does, and returns every attempt.
func (c *Courier[N]) Flush(ctx context.Context) []Delivery[N] {
	c.mu.Lock()
	box := c.outbox
	c.outbox = nil
	c.mu.Unlock()
	var out []Delivery[N]
	for _, n := range box {
		out = append(out, c.Send(ctx, n)...)
	}
	return out
}

// Deliveries returns every attempt so far (sent, dropped or queued), oldest first.
func (c *Courier[N]) Deliveries() []Delivery[N] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Delivery[N](nil), c.deliveries...)
}

// send attempts note until acknowledged; holding says whether Hold may queue it, droppable
// whether Drop may lose an attempt.
func (c *Courier[N]) send(ctx context.Context, note N, holding, droppable bool) []Delivery[N] {
	c.mu.Lock()
	held, max := holding && c.hold, c.cfg.MaxAttempts
	if !c.retry {
		max = 1
	}
	c.mu.Unlock()
	if held {
		return []Delivery[N]{c.queue(note, 1)}
	}
	var out []Delivery[N]
	for a := 1; a <= max; a++ {
		if a > 1 && c.cfg.Pause > 0 {
			if err := sleep(ctx, c.cfg.Pause); err != nil {
				break
			}
		}
		d := c.attempt(ctx, note, a, droppable)
		out = append(out, d)
		if d.Accepted() || ctx.Err() != nil {
			break
		}
	}
	return out
}

// queue holds note and records it as held.
func (c *Courier[N]) queue(note N, attempt int) Delivery[N] {
	d := Delivery[N]{Note: note, Attempt: attempt, Held: true}
	c.mu.Lock()
	c.held = append(c.held, note)
	c.deliveries = append(c.deliveries, d)
	c.mu.Unlock()
	return d
}

// attempt makes one attempt at note (dropped as Drop says if droppable, after the delay) and
// records it.
func (c *Courier[N]) attempt(ctx context.Context, note N, attempt int, droppable bool) Delivery[N] {
	d := Delivery[N]{Note: note, Attempt: attempt}
	c.mu.Lock()
	delay := c.delay
	if droppable && c.drop > 0 {
		c.drop--
		d.Dropped = true
	} else if c.cfg.Genuine(note) {
		n := note
		c.last = &n
	}
	c.mu.Unlock()
	if !d.Dropped {
		if delay > 0 {
			d.Err = sleep(ctx, delay)
		}
		if d.Err == nil {
			d.Sent, d.Err = c.cfg.Seal(note, max(attempt, 1))
		}
		if d.Err == nil {
			d.Status, d.Reply, d.Err = c.post(ctx, d.Sent)
			d.acked = d.Err == nil && c.cfg.Acknowledged(d.Status, d.Reply)
		}
	}
	c.mu.Lock()
	c.deliveries = append(c.deliveries, d)
	c.mu.Unlock()
	return d
}

func (c *Courier[N]) post(ctx context.Context, p Post) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(p.Body))
	if err != nil {
		return 0, nil, err
	}
	if p.Body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, vs := range p.Header {
		req.Header[k] = vs
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, reply, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
