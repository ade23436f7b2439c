package bootstrap_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/bootstrap"
	"cardshop/domain"
)

// The running service prunes the notification log at the sweeper's interval, each kind by its
// own retention, and exports the refused notifications' counter.
func TestServicePrunesTheNotificationLog(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_NOTIFICATION_RETENTION=48h", "CARDSHOP_REFUSED_NOTIFICATION_RETENTION=1h",
		"CARDSHOP_SWEEP_INTERVAL=50ms", "CARDSHOP_DEV_PAYMENTS=true"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	var ledger domain.Ledger
	c := runService(t, cfg, io.Discard, fx.Populate(&ledger))
	now := time.Now().UTC()
	record := func(verified bool, age time.Duration, remote string) {
		t.Helper()
		rec := domain.NotificationRecord{Provider: "dev", At: now.Add(-age), Method: "POST", Remote: remote, Result: "refused: bad signature", Count: 1}
		if verified {
			rec.Verified, rec.Accepted, rec.Result, rec.OrderNo = true, true, "paid", domain.OrderNo(remote)
			err = ledger.Notifications().Record(t.Context(), rec)
		} else {
			rec.RefusedWindow = rec.At.Truncate(time.Minute)
			err = ledger.Notifications().RecordRefused(t.Context(), rec)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	record(true, 49*time.Hour, "old-verified")
	record(true, 2*time.Hour, "kept-verified")
	record(false, 2*time.Hour, "198.51.100.1")
	record(false, time.Minute, "198.51.100.2")

	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recs, err := ledger.Notifications().Recent(t.Context(), domain.NotificationQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, r := range recs {
			left = append(left, r.Remote)
		}
		if strings.Join(left, " ") == "198.51.100.2 kept-verified" {
			break
		}
	}
	if got := strings.Join(left, " "); got != "198.51.100.2 kept-verified" {
		t.Fatalf("the log holds %q, want the young refused aggregate and the young verified notification", got)
	}

	status, body := c.do("POST", "/api/payments/dev/notify", "", `{"order_no":"x"}`, "Content-Type", "application/json")
	if status != 400 {
		t.Fatalf("a forged dev notification: %d %s", status, body)
	}
	status, body = c.do("GET", "/metrics", "", "")
	if status != 200 || !strings.Contains(string(body), `cardshop_payment_notifications_refused_total{provider="dev",reason="bad_signature"} 1`) {
		t.Fatalf("/metrics after a forged notification: %d\n%s", status, body)
	}
}
