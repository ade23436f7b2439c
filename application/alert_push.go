package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cardshop/domain"
)

// The alert relay's settings: how many pushes are in flight at once and per page, how long a
// relay holds one it is sending (more than a pusher's timeout; a relay that dies mid-send
// delays that push by at most this long), and the backoff between attempts: from
// alertRetryBase, doubling, up to alertRetryCap, or what the channel's rate limit asks when
// that is longer.
const (
	DefaultAlertAttempts = 8
	alertParallel        = 4
	alertPage            = 32
	AlertLease           = time.Minute
	alertRetryBase       = 5 * time.Second
	alertRetryCap        = 10 * time.Minute
)

// AlertKindTest is the kind of a test push ("send a test").
const AlertKindTest = "test"

// The audit actions of the alert channels (RoleAdmin, see actionRoles).
const (
	ActionAlertChannelCreate = "alert_channel.create"
	ActionAlertChannelUpdate = "alert_channel.update"
	ActionAlertChannelRemove = "alert_channel.remove"
	ActionAlertChannelTest   = "alert_channel.test"
)

// errNoPusher fails an alert push while no AlertPusher is configured.
var errNoPusher = fmt.Errorf("no alert pusher configured: %w", domain.ErrUnavailable)

// alertPushMessage is the outbox message of p for channel c, keyed "channel:id".
func alertPushMessage(c domain.AlertChannel, p domain.AlertPush) (domain.OutboxMessage, error) {
	p.ChannelID = c.ID
	payload, err := json.Marshal(p)
	if err != nil {
		return domain.OutboxMessage{}, fmt.Errorf("encode alert push: %w", err)
	}
	return domain.OutboxMessage{Topic: domain.TopicAlertPush, Key: strconv.FormatInt(c.ID, 10) + ":" + p.ID,
		Payload: payload, At: p.At}, nil
}

// addAlertPushes records, inside tx, one push of p for every enabled channel whose filter takes
// it (p.Stock: the channels that take stock events). It reads the channels inside tx, so a
// channel saved before the raise commits gets it and one removed does not.
func addAlertPushes(ctx context.Context, tx domain.Store, p domain.AlertPush) error {
	cs, err := tx.AlertChannels().Channels(ctx)
	if err != nil {
		return fmt.Errorf("read alert channels: %w", err)
	}
	for _, c := range cs {
		if !c.Wants(p.Kind, p.Stock) {
			continue
		}
		m, err := alertPushMessage(c, p)
		if err != nil {
			return err
		}
		if err := tx.Outbox().Add(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// errPushesNotRecorded marks a failure to record an alert's pushes (the channels cannot be
// read): the alert itself is then recorded without them.
var errPushesNotRecorded = errors.New("alert pushes not recorded")

// raiseAndPush records al in the alert log and, when this raise opened a new alert (not one
// folded into an open alert of the same kind, product and order), its pushes, in one
// transaction: an alert is pushed once, at its first raise; the raises folded into it while it
// stays open count on its row but push nothing (an operator who acknowledges it hears of the
// next raise). Concurrent raises fold in the log, so exactly one of them sees Count 1.
//
// The alert log comes first: when the pushes cannot be recorded (a channel's secret that does
// not decrypt, say), the alert is raised again without them, and pushErr says why.
func raiseAndPush(ctx context.Context, ledger domain.Ledger, al domain.Alert, at time.Time) (pushErr, err error) {
	err = raiseWithPushes(ctx, ledger, al, at)
	if !errors.Is(err, errPushesNotRecorded) {
		return nil, err
	}
	_, rerr := ledger.Alerts().Raise(ctx, al, at)
	return err, rerr
}

func raiseWithPushes(ctx context.Context, ledger domain.Ledger, al domain.Alert, at time.Time) error {
	return ledger.Atomically(ctx, func(tx domain.Store) error {
		id, err := tx.Alerts().Raise(ctx, al, at)
		if err != nil {
			return err
		}
		r, err := tx.Alerts().Get(ctx, id)
		if err != nil {
			return err
		}
		if r.Count != 1 {
			return nil
		}
		err = addAlertPushes(ctx, tx, domain.AlertPush{ID: "alert-" + strconv.FormatInt(id, 10), Kind: al.Kind,
			Product: al.Product, OrderNo: al.OrderNo, Message: al.Message, At: at})
		if err != nil {
			return fmt.Errorf("%w: %w", errPushesNotRecorded, err)
		}
		return nil
	})
}

// stockPush is the push of a stock event, for the channels that take stock events.
func stockPush(e domain.StockEvent) domain.AlertPush {
	return domain.AlertPush{ID: "stock-" + e.EventID, Kind: e.Type, Product: e.Product, Stock: true, At: e.At,
		Message: fmt.Sprintf("product %d: %s, %d left (threshold %d)", e.Product, e.Type, e.StockLeft, e.Threshold)}
}

// alertTopics are the topics RelayAlerts sends.
var alertTopics = []string{domain.TopicAlertPush}

// RelayAlerts sends due alert pushes through the AlertPusher, alertParallel at a time. Each is
// claimed (AlertLease) before it is sent and marked sent as soon as the channel accepted it, so
// relays on several instances push it once; a failure is tried again after a backoff (5 s
// doubling, up to 10 min, or the channel's retry_after when longer) and, after
// Config.AlertAttempts attempts or at once when the channel refuses it for good
// (domain.PushRefusedError), given up with the error recorded on the channel. A push for a
// channel removed or disabled since is dropped. It returns how many were sent.
func (s *Relay) RelayAlerts(ctx context.Context) (int, error) {
	sent, _, err := s.relayTopics(ctx, relayRun{batch: min(s.cfg.RelayBatch, alertPage), parallel: alertParallel,
		topics: alertTopics, send: s.sendPush, lease: AlertLease, attempts: s.cfg.AlertAttempts, giveUp: s.pushGivenUp,
		final: isRefused})
	return sent, err
}

// AlertBacklog counts the alert pushes not yet sent (nor given up).
func (s *Relay) AlertBacklog(ctx context.Context) (int64, error) {
	return s.ledger.Outbox().Backlog(ctx, alertTopics...)
}

func isRefused(err error) bool {
	var r *domain.PushRefusedError
	return errors.As(err, &r)
}

// retryAfter is how long a rate-limited channel asked to wait; 0 when err is no rate limit.
func retryAfter(err error) time.Duration {
	var r *domain.RetryAfterError
	if errors.As(err, &r) {
		return r.After
	}
	return 0
}

// sendPush loads the push's channel as it is now and pushes through it; the outcome is
// recorded on the channel when it went through.
func (s *outbox) sendPush(ctx context.Context, m domain.OutboxMessage) error {
	if s.pusher == nil {
		return errNoPusher
	}
	var p domain.AlertPush
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return &domain.PushRefusedError{Reason: "undecodable push: " + err.Error()}
	}
	c, err := s.ledger.AlertChannels().Channel(ctx, p.ChannelID)
	if errors.Is(err, domain.ErrAlertChannelNotFound) {
		s.log.InfoContext(ctx, "alert push dropped: its channel was removed", "channel", p.ChannelID, "push", p.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("load alert channel: %w", err)
	}
	if !c.Enabled {
		s.log.InfoContext(ctx, "alert push dropped: its channel is disabled", "channel", c.ID, "push", p.ID)
		return nil
	}
	if err := s.pusher.Push(ctx, c, p); err != nil {
		return err
	}
	if err := s.ledger.AlertChannels().RecordOutcome(ctx, c.ID, s.clock.Now(), ""); err != nil {
		s.log.WarnContext(ctx, "alert push's outcome not recorded", "channel", c.ID, "err", err)
	}
	return nil
}

// pushGivenUp records on the channel why its push was given up. No alert is raised: it could
// go to the very channel that fails, and a dead channel would raise one per push; the
// channels page shows the error and the log has it.
func (s *outbox) pushGivenUp(ctx context.Context, m domain.OutboxMessage, err error) {
	var p domain.AlertPush
	if json.Unmarshal(m.Payload, &p) != nil {
		return
	}
	msg := fmt.Sprintf("push %s given up at attempt %d: %v", p.ID, m.Attempts+1, err)
	if rerr := s.ledger.AlertChannels().RecordOutcome(ctx, p.ChannelID, s.clock.Now(), msg); rerr != nil {
		s.log.ErrorContext(ctx, "alert push's failure not recorded", "channel", p.ChannelID, "err", rerr)
	}
}

// AlertChannels runs the channels alerts are pushed to: list, save, remove, and the "send a
// test" push. Every write is an admin's (ActionRole); the driving adapter records the audit
// entry, refusals included, and never puts a secret in it.
type AlertChannels struct {
	ledger domain.Ledger
	pusher domain.AlertPusher
	clock  domain.Clock
}

func allowed(by Identity, action string) bool {
	role, _ := ActionRole(action)
	return by.Name != "" && by.Role.Allows(role)
}

// List returns every channel by id; a caller shows Fingerprint, never Secret.
//
// Errors: ErrForbidden (below admin), ErrUnavailable.
func (s *AlertChannels) List(ctx context.Context, by Identity) ([]domain.AlertChannel, error) {
	if !allowed(by, ActionAlertChannelCreate) {
		return nil, fmt.Errorf("list alert channels: %w", domain.ErrForbidden)
	}
	return s.ledger.AlertChannels().Channels(ctx)
}

// Channel returns one channel.
//
// Errors: ErrForbidden, ErrAlertChannelNotFound, ErrUnavailable.
func (s *AlertChannels) Channel(ctx context.Context, by Identity, id int64) (domain.AlertChannel, error) {
	if !allowed(by, ActionAlertChannelUpdate) {
		return domain.AlertChannel{}, fmt.Errorf("read alert channel: %w", domain.ErrForbidden)
	}
	return s.ledger.AlertChannels().Channel(ctx, id)
}

// Save creates the channel (c.ID 0) or updates it, after domain.ValidateAlertChannel; on an
// update an empty secret keeps the stored one (so the form never needs it back), and the
// check runs against the secret that will be in force. It returns the channel as stored.
//
// Errors: ErrForbidden, ErrInvalidInput, ErrAlertChannelExists, ErrAlertChannelNotFound,
// ErrUnavailable.
func (s *AlertChannels) Save(ctx context.Context, by Identity, c domain.AlertChannel) (domain.AlertChannel, error) {
	action := ActionAlertChannelCreate
	if c.ID != 0 {
		action = ActionAlertChannelUpdate
	}
	if !allowed(by, action) {
		return domain.AlertChannel{}, fmt.Errorf("save alert channel: %w", domain.ErrForbidden)
	}
	c.Name, c.Target = strings.TrimSpace(c.Name), strings.TrimSpace(c.Target)
	c.Secret = domain.Secret(strings.TrimSpace(c.Secret.Reveal()))
	c.UpdatedAt = s.clock.Now().UTC().Truncate(time.Microsecond)
	var id int64
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		check := c
		if c.ID != 0 {
			old, err := tx.AlertChannels().Channel(ctx, c.ID)
			if err != nil {
				return err
			}
			check.Type = old.Type // a channel's type is fixed: its secret means something else in another
			if check.Secret == "" {
				check.Secret = old.Secret
			}
		}
		v, err := domain.ValidateAlertChannel(check)
		if err != nil {
			return err
		}
		c.Kinds, c.Type = v.Kinds, v.Type
		if c.ID == 0 {
			id, err = tx.AlertChannels().Create(ctx, c)
			return err
		}
		id = c.ID
		return tx.AlertChannels().Update(ctx, c)
	})
	if err != nil {
		return domain.AlertChannel{}, err
	}
	return s.ledger.AlertChannels().Channel(ctx, id)
}

// Remove deletes the channel and returns it as it was.
//
// Errors: ErrForbidden, ErrAlertChannelNotFound, ErrUnavailable.
func (s *AlertChannels) Remove(ctx context.Context, by Identity, id int64) (domain.AlertChannel, error) {
	if !allowed(by, ActionAlertChannelRemove) {
		return domain.AlertChannel{}, fmt.Errorf("remove alert channel: %w", domain.ErrForbidden)
	}
	var c domain.AlertChannel
	err := s.ledger.Atomically(ctx, func(tx domain.Store) error {
		var err error
		if c, err = tx.AlertChannels().Channel(ctx, id); err != nil {
			return err
		}
		return tx.AlertChannels().Remove(ctx, id)
	})
	return c, err
}

// Test pushes one test message to the channel now, through the same pusher as the relay (the
// channel's stored secret and target, enabled or not), and records its outcome on the channel.
// The error is the channel's answer: a *domain.PushRefusedError, a *domain.RetryAfterError, or
// another failure (unreachable). A test is not retried: the admin sees the outcome at once.
//
// Errors (besides the push's): ErrForbidden, ErrAlertChannelNotFound, ErrUnavailable.
func (s *AlertChannels) Test(ctx context.Context, by Identity, id int64, message string) (domain.AlertChannel, error) {
	if !allowed(by, ActionAlertChannelTest) {
		return domain.AlertChannel{}, fmt.Errorf("test alert channel: %w", domain.ErrForbidden)
	}
	c, err := s.ledger.AlertChannels().Channel(ctx, id)
	if err != nil {
		return domain.AlertChannel{}, err
	}
	if s.pusher == nil {
		return c, errNoPusher
	}
	now := s.clock.Now().UTC()
	p := domain.AlertPush{ID: fmt.Sprintf("test-%d-%d", id, now.UnixMilli()), Kind: AlertKindTest,
		Message: message, At: now, ChannelID: id}
	perr := s.pusher.Push(ctx, c, p)
	failure := ""
	if perr != nil {
		failure = "test: " + perr.Error()
	}
	if err := s.ledger.AlertChannels().RecordOutcome(ctx, id, now, failure); err != nil && perr == nil {
		return c, err
	}
	return c, perr
}

// addStockPushes records, inside tx, the pushes of a stock event (a TopicProductStock
// payload) for the channels that take stock events.
func addStockPushes(ctx context.Context, tx domain.Store, payload []byte) error {
	var e domain.StockEvent
	if err := json.Unmarshal(payload, &e); err != nil {
		return fmt.Errorf("decode stock event: %w", err)
	}
	return addAlertPushes(ctx, tx, stockPush(e))
}

// AlertKinds are the kinds of alert the shop raises, for a channel's filter to offer (a
// channel may name others: kinds added later, or another version's).
var AlertKinds = []string{
	"amount_mismatch", "foreign_payment", "fulfil_failed", "gate_rebuilt", AlertMailFailed, "manual_payment",
	"orphan_reservation_released", "paid_unfulfilled", "payment_close_failed", "refund_by_hand", "refund_failed",
	"refund_pending", "reservation_not_returned", "second_payment", "stock_inconsistency",
}
