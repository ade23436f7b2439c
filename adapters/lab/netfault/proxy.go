package netfault

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback for fault injection: tests point an adapter at Addr and
// Cut the link (every open connection closed, new ones refused) to play a dependency going
// down, then Restore it; Stall holds every byte (connections stay open, nothing moves) until
// Resume, as a server that stopped answering; SetDelay delivers each reply late.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	down    bool
	drops   int           // replies still to swallow (DropReplies)
	delay   time.Duration // added before each chunk of a reply is passed on (SetDelay)
	stalled chan struct{} // non-nil while stalled: closed by Resume
	conns   map[net.Conn]struct{}
}

// SetDelay makes every chunk of a server's reply reach the client d late (0: at once), as a
// slow server or a slow link does.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Stall stops moving bytes either way, connections open, until Resume: a server that stopped
// answering (a stalled disk, a long GC pause, a frozen VM), whose clients see no error, only
// silence. New connections are accepted and stall as well.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Resume ends a Stall: what was held moves on.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// hold waits while the proxy is stalled, then returns the delay to add to a reply's chunk.
func (p *Proxy) hold() time.Duration {
	for {
		p.mu.Lock()
		stalled, delay := p.stalled, p.delay
		p.mu.Unlock()
		if stalled == nil {
			return delay
		}
		<-stalled
	}
}

// DropReplies makes the next n server replies vanish: the request reaches the server and
// runs, but the first bytes of its answer are thrown away and the connection is closed, as
// when a reply is lost in the network. Clients see a broken connection and may retry.
func (p *Proxy) DropReplies(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops += n
}

// takeDrop reports whether this reply must be dropped.
func (p *Proxy) takeDrop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drops > 0 {
		p.drops--
		return true
	}
	return false
}

// NewProxy starts a proxy to target; it stops with the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy starts a proxy to target on a free loopback port; Close stops it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Close stops accepting connections and closes the open ones (a stall ends first).
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.Resume()
	p.Cut()
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	done := make(chan struct{}, 2)
	// move moves src's bytes to dst, held while stalled; a reply (toClient) is dropped on
	// demand, and each of its chunks is written its delay after it arrived, by a writer of its
	// own: the delay is a latency (replies still pipelined), not a slower link.
	move := func(dst, src net.Conn, toClient bool) {
		type chunk struct {
			due time.Time
			b   []byte
		}
		out := make(chan chunk, 1024)
		written := make(chan struct{})
		go func() {
			defer close(written)
			for c := range out {
				time.Sleep(time.Until(c.due))
				if _, err := dst.Write(c.b); err != nil {
					_ = src.Close() // the reader stops too
					for range out {
					}
					return
				}
			}
		}()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				delay := p.hold()
				if toClient && p.takeDrop() {
					break
				}
				if !toClient {
					delay = 0
				}
				out <- chunk{due: time.Now().Add(delay), b: append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				break
			}
		}
		close(out)
		<-written
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go move(server, client, false)
	go move(client, server, true)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
