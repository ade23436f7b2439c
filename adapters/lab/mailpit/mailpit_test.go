package mailpit_test

import (
	"context"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cardshop/adapters/lab/mailpit"
)

// TestMailpitReceivesListsReadsAndDeletes: a message sent to the test's own Mailpit is listed,
// read with its headers and bodies, and gone after DeleteAll.
func TestMailpitReceivesListsReadsAndDeletes(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{})
	ctx := context.Background()
	raw := "From: Shop <shop@example.com>\r\nTo: buyer@example.com\r\nSubject: hello\r\n" +
		"Message-ID: <lab-1@example.com>\r\nX-Probe: 42\r\n\r\nthe body\r\n"
	if err := smtp.SendMail(mp.SMTPAddr, nil, "shop@example.com", []string{"buyer@example.com"}, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	ms, err := mp.WaitFor(ctx, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].MessageID != "lab-1@example.com" || ms[0].Subject != "hello" ||
		ms[0].From.Address != "shop@example.com" || len(ms[0].To) != 1 || ms[0].To[0].Address != "buyer@example.com" {
		t.Fatalf("listed %+v", ms)
	}
	m, err := mp.Message(ctx, ms[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(m.Text) != "the body" || m.From.Name != "Shop" || len(m.Headers["X-Probe"]) != 1 || m.Headers["X-Probe"][0] != "42" {
		t.Fatalf("read %+v", m)
	}
	if err := mp.DeleteAll(ctx); err != nil {
		t.Fatal(err)
	}
	if ms, err := mp.Messages(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("after DeleteAll: %v, %v", ms, err)
	}
}

// TestMailpitChaosRefusesRecipients: with a recipient trigger at 100 % the SMTP server refuses
// the message and keeps nothing; turned off, it takes the next one.
func TestMailpitChaosRefusesRecipients(t *testing.T) {
	mp := mailpit.Start(t, mailpit.Options{Chaos: true})
	ctx := context.Background()
	if err := mp.SetChaos(ctx, mailpit.Chaos{Recipient: mailpit.Trigger{ErrorCode: 451, Probability: 100}}); err != nil {
		t.Fatal(err)
	}
	raw := []byte("Subject: x\r\n\r\nbody\r\n")
	err := smtp.SendMail(mp.SMTPAddr, nil, "shop@example.com", []string{"buyer@example.com"}, raw)
	if err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("send under chaos: %v, want a 451 refusal", err)
	}
	if err := mp.SetChaos(ctx, mailpit.Chaos{}); err != nil {
		t.Fatal(err)
	}
	if err := smtp.SendMail(mp.SMTPAddr, nil, "shop@example.com", []string{"buyer@example.com"}, raw); err != nil {
		t.Fatal(err)
	}
	if ms, err := mp.WaitFor(ctx, 1, 10*time.Second); err != nil || len(ms) != 1 {
		t.Fatalf("inbox %v, %v; want the one message sent without chaos", ms, err)
	}
}

// TestStartProcessRunsOutsideATestAndStops: a Mailpit started without a testing.TB keeps its
// data in the directory given, takes and lists a message, and after stop answers no more.
func TestStartProcessRunsOutsideATestAndStops(t *testing.T) {
	if _, err := mailpit.Binary(); err != nil {
		mailpit.Start(t, mailpit.Options{}) // skips, or fails with CI=true, as every test here
	}
	dir := t.TempDir()
	mp, stop, err := mailpit.StartProcess(mailpit.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	ctx := context.Background()
	raw := []byte("Subject: process\r\n\r\nbody\r\n")
	if err := smtp.SendMail(mp.SMTPAddr, nil, "shop@example.com", []string{"buyer@example.com"}, raw); err != nil {
		t.Fatal(err)
	}
	if ms, err := mp.WaitFor(ctx, 1, 10*time.Second); err != nil || len(ms) != 1 || ms[0].Subject != "process" {
		t.Fatalf("inbox %+v, %v; want the one message sent", ms, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mailpit.db")); err != nil {
		t.Fatalf("its database is not in the directory given: %v", err)
	}
	stop()
	stopped = true
	if _, err := mp.Messages(ctx); err == nil {
		t.Fatal("the inbox still answers after stop")
	}
}
