package netfault

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// echoThroughProxy starts an echo server, a proxy to it and a connection through the proxy;
// all end with the test.
func echoThroughProxy(t *testing.T) (*Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := StartProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return p, c, bufio.NewReader(c)
}

// roundTrip sends a line through c and waits up to limit for its echo; ok false on timeout.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, limit time.Duration) (took time.Duration, ok bool) {
	t.Helper()
	began := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(began.Add(limit))
	line, err := r.ReadString('\n')
	if err != nil {
		if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
			return time.Since(began), false
		}
		t.Fatal(err)
	}
	if line != "ping\n" {
		t.Fatalf("echo %q", line)
	}
	return time.Since(began), true
}

// A stalled proxy moves nothing, with the connection open, until Resume, and then delivers
// what it held; a delay makes each reply that late; Cut closes and refuses.
func TestProxyStallsDelaysAndCuts(t *testing.T) {
	p, c, r := echoThroughProxy(t)
	if _, ok := roundTrip(t, c, r, 2*time.Second); !ok {
		t.Fatal("no echo through the proxy")
	}
	p.Stall()
	if _, ok := roundTrip(t, c, r, 200*time.Millisecond); ok {
		t.Fatal("an echo came through a stalled proxy")
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after Resume: %q, %v; want the held echo", line, err)
	}
	p.SetDelay(150 * time.Millisecond)
	if took, ok := roundTrip(t, c, r, 2*time.Second); !ok || took < 150*time.Millisecond {
		t.Fatalf("delayed echo after %s (ok %v), want at least 150ms", took, ok)
	}
	p.SetDelay(0)
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the connection survived the cut")
	}
}

// A delay is a latency: pipelined requests' replies all arrive about one delay later, not one
// delay each after the other.
func TestProxyDelayKeepsRepliesPipelined(t *testing.T) {
	p, c, r := echoThroughProxy(t)
	p.SetDelay(200 * time.Millisecond)
	began := time.Now()
	for range 5 {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for range 5 {
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo %q, %v", line, err)
		}
	}
	if took := time.Since(began); took < 200*time.Millisecond || took > 700*time.Millisecond {
		t.Fatalf("5 pipelined echoes took %s, want about one 200ms delay", took)
	}
}
