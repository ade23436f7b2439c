package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// WatchAlertBacklog exports cardshop_alert_backlog (alert pushes to the alert channels not yet
// delivered nor given up), read at scrape time like the mail backlog: a number that keeps
// growing means a channel that does not answer (its error is on the console's channels page).
func (m *Metrics) WatchAlertBacklog(backlog func(context.Context) (int64, error)) {
	m.reg.MustRegister(&scrapeGauge{
		desc: prometheus.NewDesc("cardshop_alert_backlog", "Alert pushes to the alert channels not yet delivered (nor given up).", nil, nil),
		read: unlabelled(backlog),
	})
}
