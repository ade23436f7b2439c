package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cardshop/domain"
)

// Ledger is an in-memory domain.Ledger: products, card pool, orders, stock flow, outbox,
// payments, the notification log, operators, the audit log, the alert log and the blocklists.
//
// One mutex guards all of its data. Each method of the repositories returned by Products,
// Orders, Cards, Flows, Outbox, Payments, Notifications, Operators, Audit and Alerts takes the mutex
// for the one call. Atomically holds it for the whole transaction, so transactions are serialised (the strongest
// isolation there is) and a transaction's writes are undone, newest first, if it fails.
//
// Identifiers (product, card, flow, outbox, notification, audit and alert ids) are not reused after a
// rollback, as an auto-increment column is not. Each product's sellable codes form a first-in, first-out
// queue: imported codes join it in id order, recycled codes join at the back, and Allocate
// takes from the front in O(qty). Expired looks only at an index of the PENDING orders.
type Ledger struct {
	mu   sync.Mutex
	data *ledgerData
	root *store
}

var _ domain.Ledger = (*Ledger)(nil)

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	l := &Ledger{data: newLedgerData()}
	l.root = &store{mu: &l.mu, data: l.data}
	return l
}

// Products returns the product catalogue.
func (l *Ledger) Products() domain.ProductCatalog { return l.root.Products() }

// Orders returns the order repository.
func (l *Ledger) Orders() domain.OrderRepo { return l.root.Orders() }

// Cards returns the card pool.
func (l *Ledger) Cards() domain.CardVault { return l.root.Cards() }

// Flows returns the stock flow.
func (l *Ledger) Flows() domain.FlowLog { return l.root.Flows() }

// Outbox returns the outbox.
func (l *Ledger) Outbox() domain.Outbox { return l.root.Outbox() }

// Payments returns the payments.
func (l *Ledger) Payments() domain.PaymentRepo { return l.root.Payments() }

// Notifications returns the log of provider notifications.
func (l *Ledger) Notifications() domain.NotificationLog { return l.root.Notifications() }

// Operators returns the operators of the admin API and the console.
func (l *Ledger) Operators() domain.OperatorRepo { return l.root.Operators() }

// Audit returns the audit log of operators' writes.
func (l *Ledger) Audit() domain.AuditLog { return l.root.Audit() }

// Alerts returns the log of raised alerts and their acknowledgements.
func (l *Ledger) Alerts() domain.AlertLog { return l.root.Alerts() }

// Blocklist returns the blocklists' entries.
func (l *Ledger) Blocklist() domain.BlocklistRepo { return l.root.Blocklist() }

// AlertChannels returns the alert channels.
func (l *Ledger) AlertChannels() domain.AlertChannelRepo { return l.root.AlertChannels() }

// Channels returns the payment channels' settings.
func (l *Ledger) Channels() domain.ChannelRepo { return l.root.Channels() }

// Coupons returns the coupons.
func (l *Ledger) Coupons() domain.CouponStore { return l.root.Coupons() }

// errSnapshotEnd rolls a Snapshot's transaction back.
var errSnapshotEnd = errors.New("end of snapshot")

// Snapshot runs fn with the ledger's mutex held, so fn sees one state that no transaction
// changes meanwhile; any write fn makes is undone.
func (l *Ledger) Snapshot(ctx context.Context, fn func(tx domain.Store) error) error {
	err := l.Atomically(ctx, func(tx domain.Store) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errSnapshotEnd
	})
	if errors.Is(err, errSnapshotEnd) {
		return nil
	}
	return err
}

// Atomically runs fn with the ledger's mutex held and hands it a Store whose writes are all
// undone, newest first, when fn returns an error or panics (the panic then continues). fn runs
// exactly once.
//
// Inside fn use only tx: calling the Ledger itself (or any repository taken from it) needs the
// mutex fn's transaction already holds, and deadlocks. tx is not safe for concurrent use and
// must not be used after fn returns; such use returns an error.
func (l *Ledger) Atomically(ctx context.Context, fn func(tx domain.Store) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()

	var undo []func()
	tx := &store{data: l.data, undo: &undo, ended: new(atomic.Bool)}
	committed := false
	// Deferred so that a panic in fn (or a runtime.Goexit from t.FailNow) rolls back too;
	// it runs before the deferred Unlock above.
	defer func() {
		tx.ended.Store(true)
		if committed {
			return
		}
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	return nil
}

// errTxEnded reports use of a transaction's Store after Atomically returned.
var errTxEnded = errors.New("memory ledger: transaction already ended")

// store binds the repositories either to the ledger (mu set: each call locks) or to one
// transaction (mu nil: Atomically holds the lock; undo collects the inverse of each write).
type store struct {
	mu    *sync.Mutex
	data  *ledgerData
	undo  *[]func()
	ended *atomic.Bool
}

func (s *store) Products() domain.ProductCatalog { return productCatalog{s} }
func (s *store) Orders() domain.OrderRepo        { return orderRepo{s} }
func (s *store) Cards() domain.CardVault         { return cardVault{s} }
func (s *store) Flows() domain.FlowLog           { return flowLog{s} }
func (s *store) Outbox() domain.Outbox           { return outbox{s} }
func (s *store) Payments() domain.PaymentRepo    { return paymentRepo{s} }
func (s *store) Notifications() domain.NotificationLog {
	return notificationLog{s}
}
func (s *store) Operators() domain.OperatorRepo { return operatorRepo{s} }
func (s *store) Audit() domain.AuditLog         { return auditLog{s} }
func (s *store) Alerts() domain.AlertLog        { return alertLog{s} }
func (s *store) Blocklist() domain.BlocklistRepo {
	return blocklistRepo{s}
}
func (s *store) AlertChannels() domain.AlertChannelRepo { return alertChannels{s} }
func (s *store) Channels() domain.ChannelRepo           { return channelRepo{s} }
func (s *store) Coupons() domain.CouponStore            { return couponStore{s} }

func noop() {}

// acquire takes the ledger's mutex when s is not a transaction and returns its release.
func (s *store) acquire() (release func(), err error) {
	if s.ended != nil && s.ended.Load() {
		return noop, errTxEnded
	}
	if s.mu == nil {
		return noop, nil
	}
	s.mu.Lock()
	return s.mu.Unlock, nil
}

// onUndo records how to reverse a write, when s is a transaction.
func (s *store) onUndo(f func()) {
	if s.undo != nil {
		*s.undo = append(*s.undo, f)
	}
}

// put sets m[k] = v, recording the undo.
func put[K comparable, V any](s *store, m map[K]V, k K, v V) {
	old, had := m[k]
	m[k] = v
	s.onUndo(func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
}

// del deletes m[k], recording the undo.
func del[K comparable, V any](s *store, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	delete(m, k)
	s.onUndo(func() { m[k] = old })
}

// putIn sets m[k1][k2] = v, creating the inner map if needed, recording the undo. An inner map
// created by a write that is undone stays behind empty, which no reader can tell apart.
func putIn[K1, K2 comparable, V any](s *store, m map[K1]map[K2]V, k1 K1, k2 K2, v V) {
	inner, ok := m[k1]
	if !ok {
		inner = make(map[K2]V)
		m[k1] = inner
	}
	put(s, inner, k2, v)
}

type buyerKey struct {
	buyer domain.BuyerID
	key   domain.IdempotencyKey
}

type flowKey struct {
	ref string
	typ domain.FlowType
}

type outboxRow struct {
	msg    domain.OutboxMessage
	sent   bool
	sentAt time.Time
}

// ledgerData is everything the ledger stores. Slices held in maps are only ever appended to
// (or replaced by fresh copies), never written below their length, so the undo log can restore
// an old slice header safely.
type ledgerData struct {
	products    map[domain.ProductID]domain.Product
	nextProduct domain.ProductID // greater than every id seen

	orders       map[domain.OrderNo]domain.Order
	orderKeys    map[buyerKey]domain.OrderNo
	pending      map[domain.OrderNo]time.Time // PENDING orders -> expiry, for Expired
	orderTotals  map[domain.ProductID]map[domain.OrderStatus]domain.StatusTotal
	cards        map[int64]domain.Card
	lastCard     int64
	codes        map[string]int64   // code -> card id (of its first use), across every product (a code is unique in the pool)
	useIDs       map[string][]int64 // a code of more than one use -> the card ids of all its uses
	sellable     map[domain.ProductID]cardQueue
	orderCards   map[domain.OrderNo][]int64 // every card ever allocated to the order
	cardCounts   map[domain.ProductID]map[domain.CardStatus]int64
	flows        map[string][]domain.FlowEntry // by ref, oldest first
	flowKeys     map[flowKey]struct{}
	flowTotals   map[domain.ProductID]map[domain.FlowType]int64
	lastFlow     int64
	outboxRows   map[int64]outboxRow
	unsent       map[int64]struct{}
	lastOutboxID int64
	payments     map[domain.OrderNo]map[domain.Provider]domain.Payment
	manual       map[manualKey]domain.ManualPayment // manual confirmations by provider and reference
	notices      []domain.NotificationRecord        // oldest first, so ids increase along it
	noticesOf    map[domain.OrderNo][]int64         // an order's records: their ids, oldest first
	refusedAggs  map[refusedKey]int64               // a refused aggregate's provider, remote and window -> its id
	lastNotice   int64
	operators    map[domain.OperatorName]domain.Operator
	logouts      map[domain.OperatorName]time.Time // console logouts (EndSessions), in UTC
	audit        []domain.AuditEntry               // oldest first, so ids increase along it
	lastAudit    int64
	alerts       []domain.AlertRecord // oldest first, so ids increase along it
	openAlerts   map[alertKey]int     // an open alert's condition -> its index in alerts
	lastAlert    int64
	blocks       map[int64]domain.BlockEntry   // the blocklists' entries by id
	channels     map[int64]domain.AlertChannel // the alert channels by id
	lastChannel  int64
	blockKeys    map[blockKey]int64 // an entry's kind and value -> its id
	lastBlock    int64
	payChannels  map[domain.Provider]domain.ChannelSettings // the payment channels' settings
	coupons      map[domain.CouponCode]domain.Coupon        // the coupons by code
}

func newLedgerData() *ledgerData {
	return &ledgerData{
		products:    make(map[domain.ProductID]domain.Product),
		nextProduct: 1,
		orders:      make(map[domain.OrderNo]domain.Order),
		orderKeys:   make(map[buyerKey]domain.OrderNo),
		pending:     make(map[domain.OrderNo]time.Time),
		orderTotals: make(map[domain.ProductID]map[domain.OrderStatus]domain.StatusTotal),
		cards:       make(map[int64]domain.Card),
		codes:       make(map[string]int64),
		useIDs:      make(map[string][]int64),
		sellable:    make(map[domain.ProductID]cardQueue),
		orderCards:  make(map[domain.OrderNo][]int64),
		cardCounts:  make(map[domain.ProductID]map[domain.CardStatus]int64),
		flows:       make(map[string][]domain.FlowEntry),
		flowKeys:    make(map[flowKey]struct{}),
		flowTotals:  make(map[domain.ProductID]map[domain.FlowType]int64),
		outboxRows:  make(map[int64]outboxRow),
		unsent:      make(map[int64]struct{}),
		payments:    make(map[domain.OrderNo]map[domain.Provider]domain.Payment),
		manual:      make(map[manualKey]domain.ManualPayment),
		noticesOf:   make(map[domain.OrderNo][]int64),
		refusedAggs: make(map[refusedKey]int64),
		operators:   make(map[domain.OperatorName]domain.Operator),
		logouts:     make(map[domain.OperatorName]time.Time),
		openAlerts:  make(map[alertKey]int),
		blocks:      make(map[int64]domain.BlockEntry),
		blockKeys:   make(map[blockKey]int64),
		channels:    make(map[int64]domain.AlertChannel),
		payChannels: make(map[domain.Provider]domain.ChannelSettings),
		coupons:     make(map[domain.CouponCode]domain.Coupon),
	}
}
