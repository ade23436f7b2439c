package bootstrap

import (
	"go.uber.org/fx"

	"cardshop/adapters/alertpush"
	"cardshop/adapters/metrics"
	"cardshop/application"
	"cardshop/domain"
)

// alertChannels provides the pusher of the alert channels (Telegram, WeCom, e-mail through
// the order mail's SMTP server when one is set, a signed webhook) and the service that runs
// the channels, for the console.
func alertChannels() fx.Option {
	return fx.Options(
		fx.Provide(newAlertPusher, func(a *application.App) *application.AlertChannels { return a.AlertChannels }),
		fx.Invoke(func(m *metrics.Metrics, r *application.Relay) { m.WatchAlertBacklog(r.AlertBacklog) }),
	)
}

type pusherIn struct {
	fx.In
	Cfg    Config
	Mailer domain.Mailer `optional:"true"`
}

// newAlertPusher is the pusher cfg describes; e-mail channels use the SMTP mailer when it can
// send alerts (package mail's can), and fail with a clear error otherwise.
func newAlertPusher(in pusherIn) domain.AlertPusher {
	pc := alertpush.Config{TelegramURL: in.Cfg.AlertTelegramURL, WeComURL: in.Cfg.AlertWeComURL}
	if m, ok := in.Mailer.(alertpush.Mailer); ok {
		pc.Mailer = m
	}
	return alertpush.New(pc)
}
