package bootstrap_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"cardshop/bootstrap"
)

// TestDashboardStreamEndsWhenTheServiceStops opens the console's event stream on the service
// (memory adapters) and stops the service: the stream ends at once and the stop does not wait
// the shutdown grace out.
func TestDashboardStreamEndsWhenTheServiceStops(t *testing.T) {
	cfg, err := bootstrap.LoadConfig(env("CARDSHOP_SHUTDOWN_GRACE=30s"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = freeAddr(t)
	app := fx.New(bootstrap.Module(cfg), fx.NopLogger)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + cfg.HTTPAddr
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.PostForm(base+"/console/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	req, _ := http.NewRequest("GET", base+"/console/dashboard/events", nil)
	for _, ck := range res.Cookies() {
		req.AddCookie(ck)
	}
	stream, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	rd := bufio.NewReader(stream.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream %s ended before its first snapshot: %v", stream.Status, err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}

	began := time.Now()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer stopCancel()
	if err := app.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("stop took %v with a dashboard open: the stream held the shutdown", d)
	}
	if _, err := io.Copy(io.Discard, rd); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
}
