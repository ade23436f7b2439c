package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"cardshop/adapters/metrics"
)

func TestAlertBacklogIsReadAtScrapeTime(t *testing.T) {
	m := metrics.New()
	n := int64(3)
	m.WatchAlertBacklog(func(context.Context) (int64, error) { return n, nil })
	n = 4
	want := `
# HELP cardshop_alert_backlog Alert pushes to the alert channels not yet delivered (nor given up).
# TYPE cardshop_alert_backlog gauge
cardshop_alert_backlog 4
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cardshop_alert_backlog"); err != nil {
		t.Fatal(err)
	}
}
