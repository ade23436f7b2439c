package domain

import (
	"context"
	"time"
)

// Reservation asks the gate for qty units of a product on behalf of one order.
//
// A new order carries its buyer's idempotency key: the gate claims the key and reserves the
// stock in one atomic step, so the key is never taken without the stock or the reverse.
// A reservation taken again for a late payment has no key: its Ref (unique per order and reason)
// is the claim, so one order has at most one late reservation at a time, and its Fingerprint
// is a token of the attempt that asks, so that attempt can tell its own claim (a retried call)
// from another attempt's (Replayed with another ExistingFingerprint: not ours to use or cancel).
//
// Every reservation is tracked as a Hold (timed by the gate's own clock) until its units are known to follow
// an order (Forget) or are given back (Cancel, ReleaseOrphan, a rebuild that counts them). A
// keyed reservation counts against the buyer's budget when BuyerCap > 0; a keyless one does
// not.
//
// The product's SaleRules hold for both: a new order is refused outside the sale window, a late
// re-reservation when its payment came at or after the window's end (Ended; the order was placed
// inside the window, so the start is not judged again); either is refused when the buyer's
// holding count now plus Qty would pass the BuyerLimit (HoldingLimit).
type Reservation struct {
	Product     ProductID
	Buyer       BuyerID
	Key         IdempotencyKey // empty for a late re-reservation
	Ref         string         // idempotency reference when Key is empty
	Qty         int
	OrderNo     OrderNo
	Fingerprint string        // RequestFingerprint of the request
	KeyTTL      time.Duration // how long the idempotency key is remembered
	// BuyerCap, when above 0, is how many units of the product the buyer may reserve per
	// BuyerWindow with keyed reservations; a reservation that would pass it is BuyerLimit.
	BuyerCap int64
	// BuyerWindow is how long the buyer's count lives from the first reservation that opened
	// it; it must be positive when BuyerCap is.
	BuyerWindow time.Duration
	// PaidAt, for a late re-reservation, is the instant its payment was accepted when that is
	// already on record (an operator fulfilling an UNFULFILLED order): the sale's end is judged
	// at it, to the millisecond. Zero: by the gate's clock now (the late payment itself).
	// Ignored for a keyed reservation.
	PaidAt time.Time
	// Coupon, when set, is claimed in the same atomic step as the stock: one use of it on the
	// product, and one of the buyer's. CouponUses (> 0) is how many uses the product allows
	// (Coupon.UsesPerProduct), CouponPerBuyer (> 0) how many one buyer may have; 0: no limit.
	// A claim past either limit is CouponUsedUp or CouponBuyerLimit, nothing reserved. Late
	// re-reservations claim the order's coupon again (the close that returned the stock
	// returned its use too).
	Coupon         CouponCode
	CouponUses     int64
	CouponPerBuyer int64
}

// ReserveOutcome is the gate's answer to a reservation.
type ReserveOutcome int

// The reserve outcomes.
const (
	Reserved         ReserveOutcome = iota + 1 // stock taken, key claimed
	Replayed                                   // key (or Ref) already claimed: see ExistingOrder
	SoldOut                                    // fewer units left than asked; nothing changed
	Frozen                                     // product frozen at the gate; nothing changed
	GateMissing                                // the gate has no record of the product; nothing changed
	BuyerLimit                                 // the buyer's budget (BuyerCap per BuyerWindow) is spent; nothing changed
	Rebuilding                                 // the product's gate is being rebuilt (BeginRebuild); nothing changed, ask again shortly
	NotStarted                                 // the sale window opens later by the gate's clock (see StartsIn); nothing changed
	Ended                                      // the sale window is over by the gate's clock (a late one: at its PaidAt); nothing changed
	HoldingLimit                               // the buyer would hold more than the product's BuyerLimit (new or late); nothing changed
	CouponUsedUp                               // the coupon is used CouponUses times on the product; nothing changed
	CouponBuyerLimit                           // the buyer used the coupon CouponPerBuyer times on the product; nothing changed
)

// ReserveResult is what Reserve did.
type ReserveResult struct {
	Outcome             ReserveOutcome
	ExistingOrder       OrderNo       // with Replayed: the order the key belongs to
	ExistingFingerprint string        // with Replayed: that order's request fingerprint
	Left                int64         // units still reservable after the call
	StartsIn            time.Duration // with NotStarted: how long until the sale opens, by the gate's clock
}

// GateChange is one idempotent adjustment of a product's gate counters: Stock and Sold are
// added (negative subtracts). Ref identifies the change (order number + flow type, or an import
// batch); applying the same Ref twice changes nothing the second time.
//
// Held is added to Buyer's holding count (SaleRules.BuyerLimit), only while the product has a
// limit: an order that stops holding its units (closed, failed, refunded when refunds release
// the limit) gives them back to its buyer.
type GateChange struct {
	Product ProductID
	Ref     string
	Stock   int64
	Sold    int64
	Buyer   BuyerID
	Held    int64
	// Coupon, when set, has CouponUses added to its count on the product and to Buyer's count
	// of it (a close or a failed payment of an order that carries one gives its use back: -1).
	Coupon     CouponCode
	CouponUses int64
}

// Hold is a reservation the gate still tracks because its units do not yet follow an order.
// At is when the gate took it, by the gate's own clock (Redis's TIME, to the millisecond), so
// an instance whose clock is off never makes another's reservation look old. One whose order
// never appears in the ledger (the service died between the gate and the ledger) is an orphan
// and is released.
type Hold struct {
	Product ProductID
	OrderNo OrderNo
	Qty     int
	At      time.Time
	// Late is true for a keyless reservation: a late payment's re-reservation of an order that
	// exists (CLOSED, FAILED or UNFULFILLED), whose units follow the order only once it is PAID.
	Late bool
	// Buyer and Coupon are the hold's buyer (when the gate tracks it) and the coupon whose use
	// the reservation claimed ("" for none): a rebuild counts the use of a hold it keeps.
	Buyer  BuyerID
	Coupon CouponCode
}

// RebuildPlan is what FinishRebuild writes: the counters computed from one consistent read
// of the ledger taken after BeginRebuild closed the gate.
type RebuildPlan struct {
	Token  string     // BeginRebuild's token: the write is refused when the fence is gone
	Levels GateLevels // the new counters; Frozen only ever freezes (see FinishRebuild)
	// Drop lists the holds whose units the ledger read already counts (their orders are
	// written): they stop being tracked, or giving them back later would return them twice.
	// Holds not listed stay tracked, and Levels.Sold counts their units.
	Drop []OrderNo
	// Counted lists the refs of committed gate changes that Levels already counts but that
	// were not applied yet: they are marked applied, so the relay's later Apply changes nothing.
	Counted []string
	// Rules are the product's sale rules as the catalogue has them, written with the counters.
	Rules SaleRules
	// Held is, when Rules.BuyerLimit > 0, the units each buyer holds in the ledger's orders of
	// the product (HeldByBuyer); the holds still tracked after the Drop are added to it by their
	// buyer. Ignored without a limit (the gate keeps no holding counts then).
	Held map[BuyerID]int64
	// Coupons are the product's coupon counts, which replace the gate's: the ledger's orders
	// (OrderRepo.CouponUses) plus the uses of the holds still tracked after the Drop (their
	// Buyer and Coupon, from BeginRebuild), which the application adds. So plan.Coupons
	// counts the holds still tracked after the Drop, and the gate adds nothing of its own.
	Coupons CouponCounts
}

// GateLevels are a product's gate counters.
type GateLevels struct {
	Stock  int64 // reservable units
	Sold   int64 // units held by PENDING and PAID orders
	Frozen bool
}

// StockGate is the fast admission layer (Redis in production). A successful reservation only
// means "this buyer won the right to an order"; the ledger is the truth.
type StockGate interface {
	// Reserve claims r.Key (or r.Ref) and takes r.Qty units in one atomic step; a keyed
	// reservation also starts its Hold and, with BuyerCap > 0, adds r.Qty to the buyer's budget.
	// It returns an outcome, not an error, for replay, a rebuild's fence, missing product,
	// frozen, the sale window and the holding limit (Reservation's SaleRules), buyer budget,
	// the coupon's limits (CouponUsedUp, then CouponBuyerLimit) and sold out (checked in that
	// order); a qty below 1, neither Key nor Ref, a BuyerCap without a positive BuyerWindow, a
	// malformed Coupon or a negative coupon limit is a ValidationError; other errors mean the
	// gate could not be reached (wrapping ErrUnavailable). A Reserved reservation with a Coupon
	// adds one use of it on the product, and one to r.Buyer's uses of it (when r.Buyer is set),
	// and its hold remembers the coupon, so that whatever gives the hold back gives the use
	// back too; a replay claims nothing. A gate may keep a sold-out product sold out to keyed
	// reservations for a bounded time after units come back (a sold-out lease, answering
	// SoldOut with Left 0): a claimed key is still Replayed, and keyless reservations are never
	// held back so.
	Reserve(ctx context.Context, r Reservation) (ReserveResult, error)
	// Cancel undoes a Reserve whose order could not be written: if the claim for r.Key (or
	// r.Ref) still exists, points at r.OrderNo with r.Fingerprint, and the hold that claim made
	// is still tracked, it deletes the claim, stops tracking the hold and returns the units it
	// reserved, and reports true; otherwise it changes nothing. So only the call that took the
	// units gives them back, once, and never units that already follow an order (a forgotten
	// hold, or one a rebuild counted). The coupon use the reservation claimed goes back with
	// the units. A later Reserve of the same Ref can be cancelled again. The buyer's budget is
	// not refunded. ErrGateRebuilding while the product is fenced.
	Cancel(ctx context.Context, r Reservation) (cancelled bool, err error)
	// Apply applies c once per c.Ref and reports whether this call applied it. A product the
	// gate does not know is left alone (applied=false) but c.Ref is recorded: the rebuild from
	// the ledger counts c, so a later Apply of it must not count it again. c.CouponUses is
	// added to c.Coupon's count on the product and, with c.Buyer, to the buyer's count of it
	// (a count that reaches 0 or less is dropped). ErrGateRebuilding, changing nothing, while
	// the product is fenced (the relay tries again). A malformed c.Coupon is a ValidationError.
	Apply(ctx context.Context, c GateChange) (applied bool, err error)
	// Levels returns the counters; ok is false when the gate has no record of the product.
	Levels(ctx context.Context, p ProductID) (l GateLevels, ok bool, err error)
	// LevelsMany returns the counters of several products in one round trip to the gate (the
	// public catalogue's refresh). The map holds the products the gate has a record of (as
	// Levels with ok true); the others are absent. Each product's counters are read together,
	// but different products are not one atomic read. No ids: an empty map.
	LevelsMany(ctx context.Context, ids []ProductID) (map[ProductID]GateLevels, error)
	// Rebuild overwrites the product's counters and frozen flag and drops the product's holds,
	// without a fence: only for a product nobody can be ordering yet (a new product). A gate
	// rebuilt from the ledger while the shop runs goes through BeginRebuild and FinishRebuild.
	// The product's coupon counts go with the holds. Claims and applied markers are kept.
	Rebuild(ctx context.Context, p ProductID, l GateLevels) error
	// BeginRebuild fences the product under token for at most ttl: until FinishRebuild or
	// AbortRebuild with the same token (or ttl), Reserve answers Rebuilding unless it replays a
	// claim, and Apply, Cancel and ReleaseOrphan return ErrGateRebuilding and change nothing;
	// Levels, SetFrozen, Holds and Forget work as usual. It returns every hold of the product,
	// read in the same atomic step: the reservations whose units (and coupon uses: each hold's
	// Buyer and Coupon) the rebuild must account for. A fence already held under another token
	// is ErrGateRebuilding.
	BeginRebuild(ctx context.Context, p ProductID, token string, ttl time.Duration) ([]Hold, error)
	// FinishRebuild writes plan in one atomic step if the fence is still held under
	// plan.Token: the counters, the holds in plan.Drop dropped, plan.Counted marked applied,
	// the coupon counts replaced by plan.Coupons (plan.Coupons counts the holds still tracked
	// after the Drop), the frozen flag set when plan.Levels.Frozen (a rebuild never unfreezes:
	// a freeze that landed during the rebuild stands), and the fence lifted. A fence that
	// expired or was taken over is ErrGateRebuilding and nothing is written.
	FinishRebuild(ctx context.Context, p ProductID, plan RebuildPlan) error
	// AbortRebuild lifts the fence if it is still held under token; otherwise it does nothing.
	AbortRebuild(ctx context.Context, p ProductID, token string) error
	// SetFrozen stops or resumes reservations for the product.
	SetFrozen(ctx context.Context, p ProductID, frozen bool) error
	// SetRules replaces the product's sale rules in one atomic step; the next Reserve judges by
	// them. Holding counts are kept only while BuyerLimit > 0: rules without a limit drop them,
	// so a limit that is switched on must come with a rebuild (FinishRebuild's plan.Rules and
	// plan.Held), never through SetRules alone, or the orders placed meanwhile would not count.
	// Changing a limit that is already on keeps the counts. While the product is fenced it
	// writes nothing and returns ErrGateRebuilding (the rebuild writes the rules it read from
	// the ledger and would overwrite these). ErrUnavailable when unreachable.
	SetRules(ctx context.Context, p ProductID, r SaleRules) error
	// HeldCounts returns each buyer's holding count of the product (empty without a limit):
	// what reconciliation compares with the ledger. ErrUnavailable when unreachable.
	HeldCounts(ctx context.Context, p ProductID) (map[BuyerID]int64, error)
	// CouponCounts returns the product's coupon counts at the gate: what reconciliation
	// compares with the ledger. ErrUnavailable when unreachable.
	CouponCounts(ctx context.Context, p ProductID) (CouponCounts, error)

	// Holds lists up to limit of the product's holds taken at least minAge ago by the gate's
	// clock, oldest first (ties by order number). limit <= 0 lists nothing. Errors:
	// ErrUnavailable when the gate cannot be reached.
	Holds(ctx context.Context, p ProductID, minAge time.Duration, limit int) ([]Hold, error)
	// Forget stops tracking the holds of these orders of the product, whose orders are written:
	// their units, and the coupon uses they claimed, now follow the orders' life cycle (the
	// order's close gives the use back through a GateChange). Unknown numbers are ignored, so
	// it is idempotent. Errors: ErrUnavailable when the gate cannot be reached.
	Forget(ctx context.Context, p ProductID, nos []OrderNo) error
	// ReleaseOrphan gives back a hold whose order was never written, in one atomic step: if the
	// hold is still tracked it is removed, its units go back from sold to stock when the
	// product's counters exist, the coupon use it claimed goes back, and the claim is deleted
	// when it still points at the order (so the buyer's key works again). It reports true only
	// for the call that released the hold;
	// a hold already released, forgotten, cancelled or dropped by Rebuild gives false and changes
	// nothing. Errors: ErrUnavailable when the gate cannot be reached; ErrGateRebuilding while
	// the product is fenced.
	ReleaseOrphan(ctx context.Context, h Hold) (released bool, err error)
}

// SoldOutLeases is a StockGate that keeps sold-out leases (see StockGate.Reserve) on this
// instance and can tell, from memory, that Reserve would answer r SoldOut under one: a
// keyed reservation whose key has no claim, while this instance's copy of its product's lease
// lasts. True means Reserve(r) would answer SoldOut (with Left 0) now, and is counted as such
// an answer; false means only that the gate cannot tell without asking.
type SoldOutLeases interface {
	SoldOutByLease(r Reservation) bool
}

// GateClock is a StockGate that can tell the time by its own clock (Redis's TIME), the clock
// that judges a sale's start: the storefront's countdown runs on it.
type GateClock interface {
	// GateTime returns the gate's time now. Errors: ErrUnavailable when unreachable.
	GateTime(ctx context.Context) (time.Time, error)
}

// ProductCatalog stores products.
type ProductCatalog interface {
	// Create stores p; a zero id is assigned. Returns ErrProductExists for a taken id.
	Create(ctx context.Context, p Product) (Product, error)
	// Product returns ErrProductNotFound for an unknown id.
	Product(ctx context.Context, id ProductID) (Product, error)
	// Products lists every product by id.
	Products(ctx context.Context) ([]Product, error)
	// SetFrozen stores the frozen flag and reason; ErrProductNotFound for an unknown id.
	SetFrozen(ctx context.Context, id ProductID, frozen bool, reason string) error
	// Update stores p's revisable fields (ProductRevision: name, price, per-order limit, tiers,
	// stock display, sale rules, refund setting, low-stock threshold) over the stored product
	// with p's id; the frozen state, the stock state and the creation time stay as stored.
	// ErrProductNotFound for an unknown id.
	Update(ctx context.Context, p Product) error
	// SwapStockState sets the product's stock state to to if it is still from, and reports
	// whether this call changed it: of instances racing to record one crossing, exactly one
	// wins (and writes its events in the same transaction). ErrProductNotFound for an unknown id.
	SwapStockState(ctx context.Context, id ProductID, from, to StockState) (bool, error)
	// LockFrozen locks the product for the rest of the transaction it runs in (the row lock of
	// SELECT … FOR UPDATE; the memory ledger's transactions are serialised anyway) and reports
	// whether it is frozen: of transactions that take it, one runs at a time, and a freeze or
	// an unfreeze waits for them. Outside a transaction the lock ends with the call.
	// ErrProductNotFound for an unknown id.
	LockFrozen(ctx context.Context, id ProductID) (frozen bool, err error)
}

// StatusTotal counts a product's orders in one state and their summed qty.
type StatusTotal struct {
	Orders int64
	Qty    int64
}

// OrderRepo stores orders. Every status change is conditional on the current status.
type OrderRepo interface {
	// Insert stores a new order. Returns ErrDuplicateOrder for a taken number and
	// ErrDuplicateIdempotencyKey when the buyer already has an order with that key.
	Insert(ctx context.Context, o Order) error
	// Order returns ErrOrderNotFound for an unknown number.
	Order(ctx context.Context, no OrderNo) (Order, error)
	// OrderByKey returns the buyer's order placed with key, or ErrOrderNotFound.
	OrderByKey(ctx context.Context, buyer BuyerID, key IdempotencyKey) (Order, error)
	// Transition stores o if the stored order's status is still from and its codes are
	// revealed exactly when o's are (o.Revealed()), and reports whether it won; of racing
	// transitions from the same status exactly one wins. It never writes RevealedAt (only
	// MarkRevealed does), so a reveal recorded after o was read is kept; and a decision taken
	// on "not revealed" (a refund that recycles) loses to a reveal recorded meanwhile.
	Transition(ctx context.Context, o Order, from OrderStatus) (bool, error)
	// MarkRevealed sets the order's RevealedAt to at if the order is PAID and RevealedAt is
	// not set yet, in one conditional step, and reports whether this call set it. false means
	// the codes were revealed before or the order is not PAID (re-read it to tell which).
	// Returns ErrOrderNotFound for an unknown number.
	MarkRevealed(ctx context.Context, no OrderNo, at time.Time) (bool, error)
	// Expired lists up to limit PENDING orders whose expiry is at or before t, oldest first.
	Expired(ctx context.Context, t time.Time, limit int) ([]Order, error)
	// Totals sums a product's orders by status.
	Totals(ctx context.Context, p ProductID) (map[OrderStatus]StatusTotal, error)
	// Existing reports, for each of nos, whether an order with that number exists (in any
	// status); every number asked for is a key of the map. One query, however many numbers.
	Existing(ctx context.Context, nos []OrderNo) (map[OrderNo]bool, error)
	// HeldByBuyer sums, per buyer, the qty of the product's PENDING and PAID orders, and, when
	// withRefunded, of its REFUNDED ones whose refund returned codes (a refund-restore or
	// refund-void flow row; an order refunded while UNFULFILLED never held any): what counts
	// against the per-buyer holding limit. Buyers holding nothing are absent.
	HeldByBuyer(ctx context.Context, p ProductID, withRefunded bool) (map[BuyerID]int64, error)
	// CouponUses counts, per coupon and buyer, the product's orders whose coupon use stands:
	// the orders carrying a coupon that are PENDING or PAID, or REFUNDED after holding codes
	// (a refund-restore or refund-void flow row; a refund keeps the use, see docs/COUPONS.md).
	// An order's use is claimed with its reservation and returned with it (close, failed
	// payment, an unfulfilled late payment), so its stock-flow rows are its coupon's record.
	CouponUses(ctx context.Context, p ProductID) (CouponCounts, error)
	// Search lists the orders f selects, newest first (CreatedAt, then number, descending), at
	// most f.Limit, after f.After when it is set: paging with the cursor of each page's last
	// order lists every order that existed when the first page was read, and still matches f
	// when its page is read, exactly once, whatever is inserted meanwhile (CreatedAt and the
	// number never change, so an order never moves between pages). A filter that fails
	// f.Check is a ValidationError (ErrInvalidInput) and nothing is read.
	Search(ctx context.Context, f OrderFilter) ([]Order, error)
}

// ImportOutcome is what CardVault.Import did with one code.
type ImportOutcome uint8

// The outcomes of one imported code.
const (
	ImportAdded     ImportOutcome = iota + 1
	ImportDuplicate               // the product already has the code, or it repeats earlier in the batch
	ImportInPool                  // another product has the code: a code is unique across the whole pool
)

// ImportResult reports one batch of imported codes: the counts, and the outcome of each code.
type ImportResult struct {
	Added      int
	Uses       int // the uses the added codes (and shared keys topped up) brought: the units of the stock-in
	Duplicates int
	InPool     int
	// Outcomes holds one outcome per code given to Import, in the same order.
	Outcomes []ImportOutcome
}

// CardCounts counts a product's codes by status.
type CardCounts map[CardStatus]int64

// CardVault is the card pool.
type CardVault interface {
	// Import adds codes as UNSOLD. A code is unique across the whole pool (every product): a
	// code the product already has is skipped as ImportDuplicate, a code another product has
	// as ImportInPool; a repeat within the batch finds the pool as the earlier occurrence left
	// it (ImportDuplicate, or ImportInPool again). Of concurrent imports of one code, exactly
	// one adds it.
	//
	// uses is the product's Product.CodeUses: each added code brings that many uses, one row
	// (a Card) per use, each sold, refunded, recycled and voided on its own, so every count of
	// the pool counts uses. UnlimitedUses (a shared key) adds SharedKeyUses uses, and a shared
	// key the product already has is topped up by SharedKeyUses more (ImportAdded, not a
	// duplicate). Uses in the result sums them. A uses outside CheckCodeUses is a
	// ValidationError.
	Import(ctx context.Context, p ProductID, codes []CardCode, uses int) (ImportResult, error)
	// Allocate marks qty sellable uses of p, each of a different code, SOLD to the order and
	// returns them (an order never gets a code twice). Of concurrent allocations no use is
	// taken twice. Returns ErrInsufficientCards, changing nothing, when fewer than qty uses are
	// sellable, and ErrTooFewDistinctCodes when there are qty uses but on fewer codes.
	Allocate(ctx context.Context, p ProductID, no OrderNo, qty int) ([]Card, error)
	// Cards returns the codes SOLD to the order: none once a refund reclaimed them (a reveal
	// relies on this, see OrderRepo.MarkRevealed).
	Cards(ctx context.Context, no OrderNo) ([]Card, error)
	// Reclaim moves the order's SOLD codes (its uses of them) to RECYCLED (back to the pool)
	// or VOID, and returns how many moved.
	Reclaim(ctx context.Context, no OrderNo, to CardStatus) (int, error)
	// Counts counts the product's codes by status: uses, a code of N uses counting N.
	Counts(ctx context.Context, p ProductID) (CardCounts, error)
	// Void moves the sellable (UNSOLD or RECYCLED) uses of those of codes that are the
	// product's to VOID, each conditional on its status, and counts every code given: voided
	// (at least one use; VoidResult.Uses counts the uses), not found in
	// the pool, or not voidable (SOLD, VOID already, or another product's). A code given twice
	// finds the pool as its first occurrence left it (VOID: not voidable). Of concurrent voids
	// of one code, exactly one voids it; an Allocate never takes a code being voided. Codes
	// are found by their de-duplication hash, never by reading the pool's codes. An empty
	// code is a ValidationError, changing nothing.
	Void(ctx context.Context, p ProductID, codes []CardCode) (VoidResult, error)
}

// VoidResult counts what CardVault.Void did with the codes it was given; the three add up
// to their number.
type VoidResult struct {
	Voided      int // moved from UNSOLD or RECYCLED to VOID (every sellable use of the code)
	Uses        int // the uses the voided codes held: the units taken out of the pool
	NotFound    int // in no product's pool
	NotVoidable int // SOLD, VOID already (a repeat included), or another product's
}

// FlowLog is the append-only stock flow.
type FlowLog interface {
	// Append writes e. Returns ErrDuplicateFlow if (e.Ref, e.Type) exists.
	Append(ctx context.Context, e FlowEntry) error
	// Totals sums the product's flow by type.
	Totals(ctx context.Context, p ProductID) (FlowTotals, error)
	// Entries lists the flow rows with ref, oldest first.
	Entries(ctx context.Context, ref string) ([]FlowEntry, error)
	// PerInterval counts the product's flow rows of type t in each of n consecutive intervals
	// of width step, the first starting at from (each interval holds its start, not its end):
	// the dashboard's orders per interval are its reserve rows. Returns ErrInvalidInput when
	// step or n is not positive or n is over 10,000.
	PerInterval(ctx context.Context, p ProductID, t FlowType, from time.Time, step time.Duration, n int) ([]int64, error)
}

// Outbox topics.
const (
	TopicGateChange   = "gate.change"     // payload: GateChange, applied to the StockGate
	TopicProductStock = "product.stock"   // payload: a stock event (product.low_stock, .sold_out, .restocked)
	TopicDelivered    = "order.delivered" // payload: DeliveryEvent, published to notifiers
	// TopicWebhook is an order.delivered event for the storefront's webhook (Notifier): a
	// DeliveryEvent. It is recorded beside TopicDelivered, only when a webhook is configured, so
	// that the webhook has its own retries: a storefront that is down delays neither the broker
	// nor the gate.
	TopicWebhook = "webhook.order.delivered"
	// TopicWebhookStock is a stock event for the storefront's webhook: a StockEvent, recorded
	// beside TopicProductStock as TopicWebhook is beside TopicDelivered. A topic of its own, so
	// that an instance of a version without stock events, which relays only TopicWebhook, never
	// sends one as an order.delivered during a rolling upgrade.
	TopicWebhookStock = "webhook.product.stock"
)

// OutboxMessage is a side effect recorded in the same transaction as the change that causes
// it, and carried out (at least once) after commit by the relay.
type OutboxMessage struct {
	ID       int64
	Topic    string
	Key      string // order number or batch id
	Payload  []byte
	At       time.Time
	Attempts int
	// RetryAt is when the message is due (again): zero on Add means At. The relay moves it
	// forward with a backoff after each failed attempt.
	RetryAt time.Time
}

// Outbox stores messages to relay.
type Outbox interface {
	// Add stores m; the store assigns ID.
	Add(ctx context.Context, m OutboxMessage) error
	// Pending lists up to limit unsent messages due at now (RetryAt not after now), earliest
	// due first, then in Add order; of the given topics only, or of every topic when none is
	// given.
	Pending(ctx context.Context, now time.Time, limit int, topics ...string) ([]OutboxMessage, error)
	// MarkSent marks the messages sent at at, all in one write (a relay marks a page of
	// messages at once); marking twice is harmless, and an unknown id is ignored.
	MarkSent(ctx context.Context, at time.Time, ids ...int64) error
	// MarkFailed counts a failed attempt and makes the message due again at retryAt.
	MarkFailed(ctx context.Context, id int64, retryAt time.Time) error
	// Claim moves an unsent message's RetryAt from from (as Pending read it) to until and
	// reports whether this call did: of several relays that read the same message, one wins
	// it and the others leave it. A claimed message that is neither marked sent nor failed by
	// until (its relay died) is due again then.
	Claim(ctx context.Context, id int64, from, until time.Time) (bool, error)
	// Backlog counts unsent messages, due or not: of the given topics only, or of every topic
	// when none is given.
	Backlog(ctx context.Context, topics ...string) (int64, error)
	// ByKey lists the messages with key, sent or not, in Add order: of the given topics only, or
	// of every topic when none is given (an order's delivery and webhook status). An empty key
	// is a ValidationError.
	ByKey(ctx context.Context, key string, topics ...string) ([]OutboxRecord, error)
}

// OutboxRecord is an outbox message as stored, with when the relay carried it out.
type OutboxRecord struct {
	OutboxMessage
	SentAt time.Time // zero while unsent
}

// Store is the ledger's set of repositories, bound either to the database or to one
// transaction.
type Store interface {
	Products() ProductCatalog
	Orders() OrderRepo
	Cards() CardVault
	Flows() FlowLog
	Outbox() Outbox
	Payments() PaymentRepo
	Notifications() NotificationLog
	Operators() OperatorRepo
	Audit() AuditLog
	Alerts() AlertLog
	Blocklist() BlocklistRepo
	AlertChannels() AlertChannelRepo
	Channels() ChannelRepo
	Coupons() CouponStore
}

// OperatorRepo stores the operators of the admin API and the console.
type OperatorRepo interface {
	// Create stores o; ErrOperatorExists for a taken name.
	Create(ctx context.Context, o Operator) error
	// Operator returns the operator with that name, or ErrOperatorNotFound.
	Operator(ctx context.Context, name OperatorName) (Operator, error)
	// Operators lists every operator by name.
	Operators(ctx context.Context) ([]Operator, error)
	// Rotate replaces the operator's token hash and sets RotatedAt; ErrOperatorNotFound.
	Rotate(ctx context.Context, name OperatorName, hash []byte, at time.Time) error
	// SetRole changes the operator's role; ErrOperatorNotFound.
	SetRole(ctx context.Context, name OperatorName, r Role) error
	// Remove deletes the operator (its token stops working); ErrOperatorNotFound.
	Remove(ctx context.Context, name OperatorName) error
	// SetDisabled disables the operator as of at (its token stops working), or enables it
	// again when at is zero; ErrOperatorNotFound.
	SetDisabled(ctx context.Context, name OperatorName, at time.Time) error
	// ActiveAdmins lists the enabled admins by name. Inside Atomically it also locks their rows
	// until the transaction ends, so that of concurrent transactions that each check that
	// another admin is left before demoting, disabling or removing one, the later waits and
	// sees the earlier's change: the last admin cannot be raced away.
	ActiveAdmins(ctx context.Context) ([]OperatorName, error)
	// EndSessions records a console logout: the console sessions of name issued at or
	// before at are over. It keeps the later of the stored time and at, so a logout never
	// reopens a session, and takes any name, the shared admin token's (LegacyAdmin, which has
	// no operator row) included: it never answers ErrOperatorNotFound.
	EndSessions(ctx context.Context, name OperatorName, at time.Time) error
	// SessionsEnded returns the time EndSessions stored for name (sessions issued at or
	// before it are over), or the zero time when name never logged out.
	SessionsEnded(ctx context.Context, name OperatorName) (time.Time, error)
}

// AuditLog is the append-only record of operators' writes: the service only appends and
// reads, never changes or deletes an entry.
type AuditLog interface {
	// Append stores e and returns its ID.
	Append(ctx context.Context, e AuditEntry) (int64, error)
	// List returns the entries f selects, newest first.
	List(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// AlertLog is the record of raised alerts and of operators' acknowledgements of them (see
// AlertRecord for how repeated raises fold into one open alert).
type AlertLog interface {
	// Raise records a as raised at at and returns the id of the alert that holds it: the open
	// alert of the same Kind, Product and OrderNo when there is one (its Count grows, LastAt
	// and Message become this raise's), a new one otherwise. Concurrent raises of one
	// condition fold into one open alert too.
	Raise(ctx context.Context, a Alert, at time.Time) (int64, error)
	// List returns the alerts f selects, newest first. ErrInvalidInput for a Limit outside
	// 1..1000 or an unknown Status.
	List(ctx context.Context, f AlertFilter) ([]AlertRecord, error)
	// Get returns one alert; ErrAlertNotFound.
	Get(ctx context.Context, id int64) (AlertRecord, error)
	// Acknowledge marks the open alert id as seen by by at at, with note. ErrAlertNotFound for
	// an unknown id; ErrAlertAcknowledged when it is acknowledged already (the first
	// acknowledgement stays): of concurrent acknowledgements exactly one wins.
	Acknowledge(ctx context.Context, id int64, by OperatorName, note string, at time.Time) error
	// OpenCounts counts the open alerts by kind (kinds without one are absent).
	OpenCounts(ctx context.Context) (map[string]int64, error)
}

// Ledger is the database: the truth about products, codes, orders and flow.
type Ledger interface {
	Store
	// Atomically runs fn in one transaction: every write through tx commits together, or none
	// does when fn returns an error. fn may run more than once (deadlock retry), so it must not
	// have effects outside tx. Calling the Ledger's own Store inside fn is not allowed.
	Atomically(ctx context.Context, fn func(tx Store) error) error
	// Snapshot runs fn in a read-only transaction that sees one consistent state of the whole
	// ledger: every transaction committed before it, none after. fn must only read: a write
	// through tx fails or is undone.
	Snapshot(ctx context.Context, fn func(tx Store) error) error
}

// DelayQueue schedules the close of an unpaid order.
type DelayQueue interface {
	// ScheduleClose asks for CloseExpired(no) at (or soon after) due. Delivery is at least
	// once; the consumer must tolerate duplicates. A nil error means the close was accepted,
	// not necessarily stored yet: an adapter may confirm it after returning (and log a loss),
	// because the sweeper closes every order past its expiry whether or not its close came.
	ScheduleClose(ctx context.Context, no OrderNo, due time.Time) error
}

// DeliveryEvent tells notifiers that an order's codes are ready. It carries no codes: the
// storefront reads them with the buyer's token.
type DeliveryEvent struct {
	EventID string    `json:"event_id"`
	OrderNo OrderNo   `json:"order_no"`
	Buyer   BuyerID   `json:"buyer_id"`
	Product ProductID `json:"product_id"`
	Qty     int       `json:"qty"`
	Amount  Money     `json:"amount"`
	PaidAt  time.Time `json:"paid_at"`
}

// StockEvent tells notifiers that a product's stock crossed its low-stock threshold, ran out
// or came back (Type: EventLowStock, EventSoldOut or EventRestocked). Each crossing is recorded
// once (ProductCatalog.SwapStockState), so EventID names one crossing: receivers de-duplicate
// the copies that at-least-once delivery may bring on it.
type StockEvent struct {
	EventID   string    `json:"event_id"`
	Type      string    `json:"type"`
	Product   ProductID `json:"product_id"`
	StockLeft int64     `json:"stock_left"` // reservable units when the crossing was seen
	Threshold int       `json:"low_stock_threshold"`
	At        time.Time `json:"at"` // when the crossing was seen (sampled: at or after it happened)
}

// EventPublisher publishes outbox events (RabbitMQ in production).
type EventPublisher interface {
	// Publish delivers m at least once; an error means it must be tried again.
	Publish(ctx context.Context, m OutboxMessage) error
}

// Notification is one event for the storefront's webhook.
type Notification struct {
	ID      string    // the same on every attempt: the receiver's idempotency key
	Type    string    // "order.delivered", or a stock event's type (EventLowStock…)
	At      time.Time // when the event happened
	Attempt int       // 1 on the first attempt
	Data    []byte    // the event as JSON (a DeliveryEvent for "order.delivered", else a StockEvent)
}

// Notifier tells the storefront about events (a signed HTTPS webhook in production).
type Notifier interface {
	// Notify delivers n; an error means it must be tried again later (at least once overall).
	Notify(ctx context.Context, n Notification) error
}

// PaymentNotice is a verified payment provider callback.
type PaymentNotice struct {
	OrderNo    OrderNo
	Paid       bool // false: the payment failed
	Amount     Money
	PaymentRef string
	Reason     string
}

// PaymentVerifier checks a callback's signature and freshness and parses it.
type PaymentVerifier interface {
	// Verify returns ErrBadSignature for an unsigned, forged or stale callback and a
	// ValidationError for a well-signed body that does not parse.
	Verify(timestamp, signature string, body []byte, now time.Time) (PaymentNotice, error)
}

// Alert is something an operator must look at.
type Alert struct {
	Kind    string
	Product ProductID
	OrderNo OrderNo
	Message string
}

// Alerter raises alerts.
type Alerter interface {
	Alert(ctx context.Context, a Alert)
}

// Clock tells the time.
type Clock interface {
	Now() time.Time
}
