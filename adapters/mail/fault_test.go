package mail_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"cardshop/adapters/lab/mailpit"
	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/mail"
)

// TestOrderMailLostReplyIsAnErrorAndTheResendIsTheSameMail: the connection breaks after the
// server has taken the message but before its "250 OK" reaches the mailer. The mailer reports
// an error (the outcome is unknown); the relay sends again; the buyer has two copies with one
// Message-ID and the same codes — at least once, recognisably one mail.
func TestOrderMailLostReplyIsAnErrorAndTheResendIsTheSameMail(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	proxy := cutAfterData(t, mp.SMTPAddr)
	m := newMailer(t, mp, func(c *mail.Config) { c.Addr = proxy })
	om := orderMail("lost1", "en")
	err := m.SendOrderMail(context.Background(), om)
	if err == nil {
		t.Fatal("no error though the server's answer to the data never came")
	}
	// The server did take it: the outcome was unknown, not a refusal.
	if _, err := mp.WaitFor(context.Background(), 1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	direct := newMailer(t, mp)
	if err := direct.SendOrderMail(context.Background(), om); err != nil {
		t.Fatal(err)
	}
	got := received(t, mp, 2)
	if len(got) != 2 {
		t.Fatalf("%d copies, want 2", len(got))
	}
	for _, g := range got {
		if g.MessageID != "lost1@mail.cards.example" {
			t.Errorf("a copy has Message-ID %q", g.MessageID)
		}
		checkCodesOnce(t, g, om.Codes)
	}
}

// TestOrderMailStalledServerTimesOut: a server that stops answering ends the attempt with an
// error after the timeout (no hang, no panic); once it answers again the mail goes through.
func TestOrderMailStalledServerTimesOut(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	p := netfault.NewProxy(t, mp.SMTPAddr)
	m := newMailer(t, mp, func(c *mail.Config) { c.Addr, c.Timeout = p.Addr(), 500*time.Millisecond })
	p.Stall()
	done := make(chan error, 1)
	go func() { done <- m.SendOrderMail(context.Background(), orderMail("stall1", "en")) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("sent through a stalled server")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the attempt did not end on its timeout")
	}
	p.Resume()
	if err := m.SendOrderMail(context.Background(), orderMail("stall2", "en")); err != nil {
		t.Fatal(err)
	}
	got := received(t, mp, 1)
	if got[0].MessageID != "stall2@mail.cards.example" {
		t.Fatalf("received %q", got[0].MessageID)
	}
}

// cutAfterData is a TCP proxy to target that forwards an SMTP session until the client has
// sent a message's end of data ("\r\n.\r\n"), lets the server take it, and then closes both
// connections before the server's reply reaches the client: a reply lost in the network.
func cutAfterData(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				relayUntilData(client, target)
			}()
		}
	}()
	return ln.Addr().String()
}

// relayUntilData moves one session's bytes both ways; once the client's bytes hold the end of
// data, replies stop reaching the client and, after the server has had time to store the
// message, both sides are closed.
func relayUntilData(client net.Conn, target string) {
	defer func() { _ = client.Close() }()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer func() { _ = server.Close() }()
	var mu sync.Mutex
	cut := false
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			mu.Lock()
			lost := cut
			mu.Unlock()
			if n > 0 && !lost {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var seen bytes.Buffer
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			seen.Write(buf[:n])
			if strings.Contains(seen.String(), "\r\n.\r\n") {
				mu.Lock()
				cut = true
				mu.Unlock()
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
				time.Sleep(300 * time.Millisecond) // the server stores it and answers, unheard
				return
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
