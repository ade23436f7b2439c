package rabbitmq_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/adapters/porttest"
	"cardshop/adapters/rabbitmq"
	"cardshop/domain"
)

// testLogger discards the broker's logs unless TEST_RABBITMQ_LOG=1 (a test's own t.Log cannot
// be used: the supervisor may log after the test has returned).
func testLogger() *slog.Logger {
	if os.Getenv("TEST_RABBITMQ_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func randomPrefix() string { return fmt.Sprintf("test-%016x", rand.Uint64()) }

func newOrderNo() domain.OrderNo {
	return domain.NewOrderNo(time.Now(), "rabbitmq-test", rand.Uint64())
}

// dial returns a Broker on a fresh random prefix whose queues and exchanges are deleted when
// the test ends. An unreachable broker skips the test (fails it with CI=true).
func dial(t testing.TB, cfg rabbitmq.Config) *rabbitmq.Broker {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = porttest.AMQPURL
	}
	if cfg.Prefix == "" {
		cfg.Prefix = randomPrefix()
	}
	cfg.Logger = testLogger()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := rabbitmq.Dial(ctx, cfg)
	if err != nil && errors.Is(err, domain.ErrUnavailable) {
		porttest.RequireService(t, "RabbitMQ", err)
	}
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		if err := rabbitmq.DeleteTopology(context.Background(), porttest.AMQPURL, cfg.Prefix, cfg.Delays); err != nil { // the broker itself: cfg.URL may be a proxy the test closed
			t.Errorf("delete topology: %v", err)
		}
	})
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// rawChannel opens a plain channel for the test to look at queues with.
func rawChannel(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(porttest.AMQPURL)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

// arrival is one call of a test handler.
type arrival struct {
	no domain.OrderNo
	at time.Time
}

// sink is a handler that reports every call on a channel and fails the first calls of the
// numbers told to fail.
type sink struct {
	ch    chan arrival
	mu    sync.Mutex
	fails map[domain.OrderNo]int
}

func newSink() *sink { return &sink{ch: make(chan arrival, 4096), fails: map[domain.OrderNo]int{}} }

func (s *sink) failFirst(no domain.OrderNo, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[no] = n
}

func (s *sink) handle(_ context.Context, no domain.OrderNo) error {
	s.ch <- arrival{no: no, at: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails[no] > 0 {
		s.fails[no]--
		return errors.New("injected failure")
	}
	return nil
}

// next waits up to d for the next call.
func (s *sink) next(t *testing.T, d time.Duration) arrival {
	t.Helper()
	select {
	case a := <-s.ch:
		return a
	case <-time.After(d):
		t.Fatalf("no delivery within %s", d)
		return arrival{}
	}
}

// waitFor polls f every 50ms until it is true or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxy is a TCP proxy in front of the broker that a test can cut (every connection closed,
// new ones refused) and restore, to stage an outage without touching the shared broker, and
// that can make the broker appear to block publishing (a resource alarm).
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
	injects map[chan []byte]struct{} // frames to send to each client
	hold    chan struct{}            // non-nil while server-to-client frames are held back
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, injects: map[chan []byte]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.resume()
		p.cut()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(client)
	}
}

func (p *proxy) pipe(client net.Conn) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		_ = client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	inject := make(chan []byte, 4)
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.injects[inject] = struct{}{}
	p.mu.Unlock()
	quit := make(chan struct{})
	var once sync.Once
	closeBoth := func() {
		_ = client.Close()
		_ = server.Close()
		once.Do(func() { close(quit) })
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(server, client)
		closeBoth()
	})
	wg.Go(func() {
		// Server to client frame by frame, so that injected frames land between two frames.
		frames := make(chan []byte)
		go func() {
			defer close(frames)
			for {
				header := make([]byte, 7)
				if _, err := io.ReadFull(server, header); err != nil {
					return
				}
				rest := make([]byte, binary.BigEndian.Uint32(header[3:])+1) // payload + frame end
				if _, err := io.ReadFull(server, rest); err != nil {
					return
				}
				frames <- append(header, rest...)
			}
		}()
		defer closeBoth()
		for {
			var f []byte
			select {
			case fr, ok := <-frames:
				if !ok {
					return
				}
				f = fr
			case f = <-inject:
			}
			p.mu.Lock()
			hold := p.hold
			p.mu.Unlock()
			if hold != nil {
				select {
				case <-hold:
				case <-quit:
					return
				}
			}
			if _, err := client.Write(f); err != nil {
				return
			}
		}
	})
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	delete(p.injects, inject)
	p.mu.Unlock()
}

// sendToClients injects a channel-0 method frame into every proxied server-to-client stream.
func (p *proxy) sendToClients(classID, methodID uint16, args []byte) {
	payload := binary.BigEndian.AppendUint16(nil, classID)
	payload = binary.BigEndian.AppendUint16(payload, methodID)
	payload = append(payload, args...)
	frame := []byte{1, 0, 0} // method frame, channel 0
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(payload)))
	frame = append(append(frame, payload...), 0xCE)
	p.mu.Lock()
	defer p.mu.Unlock()
	for ch := range p.injects {
		select {
		case ch <- frame:
		default: // that connection is going away
		}
	}
}

// block makes the broker appear to raise a resource alarm: connection.blocked(reason).
func (p *proxy) block(reason string) {
	p.sendToClients(10, 60, append([]byte{byte(len(reason))}, reason...))
}

// unblock sends connection.unblocked.
func (p *proxy) unblock() { p.sendToClients(10, 61, nil) }

// stall holds back everything the broker sends (confirms included) until resume: the broker
// looks alive but answers nothing.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold == nil {
		p.hold = make(chan struct{})
	}
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold != nil {
		close(p.hold)
		p.hold = nil
	}
}

// cut closes every proxied connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
