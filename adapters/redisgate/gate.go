// Package redisgate is the domain.StockGate on Redis (standalone or Cluster) through go-redis
// v9: every operation that reads and writes is one of the Lua scripts in package lua, so it is
// atomic on the server, with the same semantics as the in-memory gate (adapters/memory).
//
// Keys (the {pid} braces are Cluster hash tags, so all keys of one product share a slot and
// one script may touch them all):
//
//	stock:product:{<pid>}              reservable count; missing = the gate does not know the product
//	sold:product:{<pid>}               reserved-or-sold count
//	frozen:product:{<pid>}             present while the product is frozen
//	idem:order:{<pid>}:<buyer>:<key>   a buyer's idempotency claim: <order no>|<fingerprint>|<qty>
//	idem:ref:{<pid>}:<ref>             the claim of a reservation without a key
//	gate:applied:{<pid>}:<ref>         an applied GateChange, kept MarkerTTL
//	holds:{<pid>}                      sorted set of reservations whose units do not follow an
//	                                   order yet: order no scored by Redis's TIME in unix ms
//	holdinfo:{<pid>}                   hash: order no -> <qty>|<claim key>, what releasing it needs
//	budget:{<pid>}:<buyer>             units the buyer reserved in the current window (expires
//	                                   BuyerWindow after the window's first reservation)
//	rebuild:{<pid>}                    a rebuild's fence: its token, expiring with the fence
//	rules:{<pid>}                      hash of the sale rules: starts, ends (unix ms), limit
//	held:{<pid>}                       hash: buyer -> units held against the limit (only while
//	                                   the limit is above 0)
//	holdbuyer:{<pid>}                  hash: order no -> buyer of each tracked hold
//	couponuse:{<pid>}                  hash: coupon code -> orders of the product using it
//	couponbuyer:{<pid>}                hash: <code>|<buyer> -> that buyer's uses of it
//	holdcoupon:{<pid>}                 hash: order no -> coupon of each tracked hold that claimed
//	                                   a use (what giving the hold back gives back)
//	soldout:{<pid>}                    a sold-out lease: present until it ends (lease.go)
//	claimbits:v1:{<pid>}               bitmap: a bit set for each buyer's claim (lease.go)
//
// A gate WithKeyPrefix(p) puts p and ':' before each name (p:stock:product:{<pid>}, ...): shops
// that share one Redis never meet, and the hash tag, which the prefix never contains, still
// keeps a product's keys in one slot.
//
// It imports the domain, package lua, adapters/redispipe and go-redis.
package redisgate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/domain"
	"cardshop/lua"
)

// DefaultKeyTTL is how long the gate remembers an idempotency claim when a reservation does
// not say (the same as the in-memory gate's).
const DefaultKeyTTL = 10 * time.Minute

// MarkerTTL is how long the gate remembers that an Apply reference was applied (the same as the
// in-memory gate's).
const MarkerTTL = 7 * 24 * time.Hour

// claimSep separates the fields of a claim's value. Order numbers may not contain it; the
// fingerprint sits between the first and the last separator, so it may.
const claimSep = "|"

// The scripts. Script.Run sends EVALSHA and falls back to EVAL when the server answers NOSCRIPT
// (an empty script cache: a restart, a failover, SCRIPT FLUSH), which also caches the script
// again.
//
// go-redis re-sends a command after a retryable failure (MaxRetries), including an EOF read
// after the command was written: a script may then run twice. That is safe for every one of
// them: a second reserve.lua finds its own claim and answers Replayed with the same order
// number, a second cancel.lua finds no claim and a second apply.lua finds the marker (both
// answer 0 and change nothing), and rebuild.lua writes the same values again.
var (
	reserveScript = redis.NewScript(lua.Reserve)
	cancelScript  = redis.NewScript(lua.Cancel)
	applyScript   = redis.NewScript(lua.Apply)
	rebuildScript = redis.NewScript(lua.Rebuild)
	holdsScript   = redis.NewScript(lua.Holds)
	forgetScript  = redis.NewScript(lua.Forget)
	releaseScript = redis.NewScript(lua.Release)
	fenceScript   = redis.NewScript(lua.Fence)
	finishScript  = redis.NewScript(lua.Finish)
	unfenceScript = redis.NewScript(lua.Unfence)
	rulesScript   = redis.NewScript(lua.Rules)
)

// reserve.lua's outcome codes.
const (
	codeReserved    = 1
	codeReplayed    = 2
	codeSoldOut     = 3
	codeFrozen      = 4
	codeGateMissing = 5
	codeBuyerLimit  = 6
	codeRebuilding  = 7
	codeNotStarted  = 8
	codeEnded       = 9
	codeHolding     = 10
	codeCouponUsed  = 11
	codeCouponBuyer = 12
)

// fenced is what apply.lua, cancel.lua and release.lua answer while a rebuild fences the
// product.
const fenced = -1

// Gate is a domain.StockGate on Redis. It is safe for concurrent use.
type Gate struct {
	c redis.UniversalClient
	// ks starts every key name (WithKeyPrefix).
	ks keyspace
	// hot runs reserve.lua when ap is nil: the client itself, or a blocking auto-pipeliner
	// (WithAutoPipeline).
	hot redis.Scripter
	// ap is the deferred auto-pipeliner Reserve queues reserve.lua on (WithAutoPipeline), waiting
	// for each reply only as long as its caller's context allows; nil: Reserve runs it on hot.
	ap *redis.AutoPipeliner
	// keys holds each product's key names (*productKeys), built once instead of on every
	// reservation (the sold-out answer's hot path); at most maxCachedProducts of them.
	keys   sync.Map
	cached atomic.Int64
	// lease is the sold-out lease period (WithSoldOutLease; 0: no leases), leaseObs what
	// observes them, start the origin of the gate's monotonic clock (now).
	lease    time.Duration
	leaseObs LeaseObserver
	// leaseSync takes leases before Reserve returns (tests, so that a lease is certain).
	leaseSync bool
	start     time.Time
	// replicas is how many replicas must acknowledge a reservation within replicaWait
	// (WithReplicaAcks; 0: none).
	replicas    int
	replicaWait time.Duration
}

// maxCachedProducts bounds the key-name cache: products beyond it get their names built per
// call, and take no sold-out lease.
const maxCachedProducts = 4096

// productKeys are the key names of one product that reserve.lua takes.
type productKeys struct {
	ks                                                                                           keyspace
	tag, stock, sold, frozen, holds, holdInfo, fence, rules, held, holdBuyer, soldOut, claimBits string
	couponUse, couponBuyer, holdCoupon                                                           string
	// lease is this instance's copy of the product's sold-out lease; nil for names built for
	// one call (the cache was full).
	lease *soldOutLease
}

func newProductKeys(ks keyspace, p domain.ProductID) *productKeys {
	return &productKeys{ks: ks, tag: productTag(p), stock: ks.stockKey(p), sold: ks.soldKey(p), frozen: ks.frozenKey(p),
		holds: ks.holdsKey(p), holdInfo: ks.holdInfoKey(p), fence: ks.fenceKey(p), rules: ks.rulesKey(p), held: ks.heldKey(p),
		holdBuyer: ks.holdBuyerKey(p), soldOut: ks.soldOutKey(p), claimBits: ks.claimBitsKey(p),
		couponUse: ks.couponUseKey(p), couponBuyer: ks.couponBuyerKey(p), holdCoupon: ks.holdCouponKey(p)}
}

// keysOf returns p's key names, from the cache when it has them.
func (g *Gate) keysOf(p domain.ProductID) *productKeys {
	if k, ok := g.keys.Load(p); ok {
		return k.(*productKeys)
	}
	k := newProductKeys(g.ks, p)
	if g.cached.Load() < maxCachedProducts {
		k.lease = &soldOutLease{}
		got, loaded := g.keys.LoadOrStore(p, k)
		if !loaded {
			g.cached.Add(1)
		}
		return got.(*productKeys)
	}
	return k
}

var _ domain.StockGate = (*Gate)(nil)

// New returns a gate on c, a standalone, failover or Cluster client. The gate does not own c:
// closing it is the caller's business.
func New(c redis.UniversalClient) *Gate {
	return &Gate{c: c, hot: c, leaseObs: noLeaseObserver{}, start: time.Now()}
}

// WithKeyPrefix puts every key of the gate under the namespace prefix: its names become
// <prefix>:stock:product:{<pid>} and so on, so gates of different shops share one Redis (or
// one Cluster) without meeting; "" keeps the names without a namespace. The prefix goes before
// the {<pid>} hash tag, so a Cluster still keeps all keys of a product in one slot; it must
// therefore hold no '{' or '}' (WithKeyPrefix panics on one, as regexp.MustCompile does on a
// bad expression: the configuration refuses such a prefix first). Call it before the gate's
// first use.
func (g *Gate) WithKeyPrefix(prefix string) *Gate {
	g.ks = newKeyspace(prefix)
	g.keys.Clear()
	g.cached.Store(0)
	return g
}

// newKeyspace is the keyspace of the namespace prefix ("" for none).
func newKeyspace(prefix string) keyspace {
	if prefix == "" {
		return ""
	}
	if strings.ContainsAny(prefix, "{}") {
		panic(fmt.Sprintf("redisgate: key prefix %q holds a hash tag brace", prefix))
	}
	return keyspace(prefix + ":")
}

// Ping checks that Redis answers; its error wraps domain.ErrUnavailable.
func (g *Gate) Ping(ctx context.Context) error {
	return wrap("ping", g.c.Ping(ctx).Err())
}

func productTag(p domain.ProductID) string { return "{" + strconv.FormatInt(int64(p), 10) + "}" }

// keyspace is what every key name of a gate starts with: "" (no namespace) or a namespace and
// ':' (WithKeyPrefix). It stays outside the {pid} hash tag, so a Cluster still hashes only the
// product id and every key of a product stays in one slot, whatever the namespace.
type keyspace string

// of names the product's key of the kind ("stock:product:", "holds:", …) in the keyspace.
func (ks keyspace) of(kind string, p domain.ProductID) string {
	return string(ks) + kind + productTag(p)
}

func (ks keyspace) stockKey(p domain.ProductID) string  { return ks.of("stock:product:", p) }
func (ks keyspace) soldKey(p domain.ProductID) string   { return ks.of("sold:product:", p) }
func (ks keyspace) frozenKey(p domain.ProductID) string { return ks.of("frozen:product:", p) }

// claimKey names a reservation's idempotency claim. Buyers' claims live under idem:order: and
// keyless ones under idem:ref:, so a Ref can never take a buyer's key or the reverse; within
// idem:order: the buyer cannot contain ':' (checkClaim), so <buyer>:<key> splits one way only.
func (ks keyspace) claimKey(r domain.Reservation) string {
	return ks.claimKeyOf(productTag(r.Product), r)
}

// claimKeyOf is claimKey with the product's hash tag given.
func (ks keyspace) claimKeyOf(tag string, r domain.Reservation) string {
	if r.Key == "" {
		return string(ks) + refClaim + tag + ":" + r.Ref
	}
	return string(ks) + "idem:order:" + tag + ":" + string(r.Buyer) + ":" + string(r.Key)
}

// refClaim is what the name of a keyless reservation's claim starts with after the keyspace.
const refClaim = "idem:ref:"

func (ks keyspace) markerKey(c domain.GateChange) string {
	return string(ks) + "gate:applied:" + productTag(c.Product) + ":" + c.Ref
}

func (ks keyspace) holdsKey(p domain.ProductID) string     { return ks.of("holds:", p) }
func (ks keyspace) holdInfoKey(p domain.ProductID) string  { return ks.of("holdinfo:", p) }
func (ks keyspace) fenceKey(p domain.ProductID) string     { return ks.of("rebuild:", p) }
func (ks keyspace) rulesKey(p domain.ProductID) string     { return ks.of("rules:", p) }
func (ks keyspace) heldKey(p domain.ProductID) string      { return ks.of("held:", p) }
func (ks keyspace) holdBuyerKey(p domain.ProductID) string { return ks.of("holdbuyer:", p) }
func (ks keyspace) soldOutKey(p domain.ProductID) string   { return ks.of("soldout:", p) }
func (ks keyspace) claimBitsKey(p domain.ProductID) string { return ks.of("claimbits:v1:", p) }

// The coupon counts (couponBuyer's fields are <code>|<buyer>: a code holds no '|', so a field
// splits one way) and the coupon each tracked hold claimed.
func (ks keyspace) couponUseKey(p domain.ProductID) string   { return ks.of("couponuse:", p) }
func (ks keyspace) couponBuyerKey(p domain.ProductID) string { return ks.of("couponbuyer:", p) }
func (ks keyspace) holdCouponKey(p domain.ProductID) string  { return ks.of("holdcoupon:", p) }

// couponSep separates a coupon's code from the buyer in couponbuyer:{<pid>}'s fields.
const couponSep = "|"

// budgetKey names a buyer's budget for a product; like claims, it relies on buyers without ':'.
func (ks keyspace) budgetKey(p domain.ProductID, b domain.BuyerID) string {
	return ks.budgetKeyOf(productTag(p), b)
}

// budgetKeyOf is budgetKey with the product's hash tag given.
func (ks keyspace) budgetKeyOf(tag string, b domain.BuyerID) string {
	return string(ks) + "budget:" + tag + ":" + string(b)
}

// checkClaim refuses what cannot be stored as a claim unambiguously.
func checkClaim(r domain.Reservation) error {
	if r.Key == "" && r.Ref == "" {
		// Without either, every keyless reservation of the product would share one claim.
		return domain.Invalid("ref", "required when the idempotency key is empty")
	}
	if r.Key != "" && strings.Contains(string(r.Buyer), ":") {
		// "a:b" + "c" and "a" + "b:c" would name the same claim: one buyer could replay another's
		// order. domain.ParseBuyerID never lets ':' through; this guards other callers.
		return domain.Invalid("buyer_id", "must not contain ':'")
	}
	if strings.Contains(string(r.OrderNo), claimSep) {
		return domain.Invalid("order_no", "must not contain '"+claimSep+"'")
	}
	return nil
}

// checkCoupon refuses a code the scripts would refuse: it must be what domain.ParseCouponCode
// gives ("" is no coupon).
func checkCoupon(code domain.CouponCode) error {
	if code == "" {
		return nil
	}
	if c, err := domain.ParseCouponCode(string(code)); err != nil || c != code {
		return domain.Invalid("coupon", "must be 3 to 32 of A-Z, 0-9, '-' and '_'")
	}
	return nil
}

// checkCouponLimits refuses a reservation's malformed coupon and negative coupon limits (0 is
// no limit).
func checkCouponLimits(r domain.Reservation) error {
	if err := checkCoupon(r.Coupon); err != nil {
		return err
	}
	if r.CouponUses < 0 || r.CouponPerBuyer < 0 {
		return domain.Invalid("coupon", "its limits must be 0 (none) or positive")
	}
	return nil
}

// checkBudget refuses a cap without a window (it would never reset).
func checkBudget(r domain.Reservation) error {
	if r.Key != "" && r.BuyerCap > 0 && r.BuyerWindow <= 0 {
		return domain.Invalid("buyer_window", "must be positive when a buyer cap is set")
	}
	return nil
}

// reserveArgs are reserve.lua's KEYS and ARGV for r, whose product's key names are k. Every
// reservation is tracked as a hold (the script scores it by Redis's own clock); a keyed one
// with a BuyerCap also counts against the buyer's budget.
func reserveArgs(k *productKeys, r domain.Reservation) (keys []string, args []any) {
	ttl := r.KeyTTL
	if ttl <= 0 {
		ttl = DefaultKeyTTL
	}
	ms := max(ttl.Milliseconds(), 1)
	qty := strconv.Itoa(r.Qty)
	claim := string(r.OrderNo) + claimSep + r.Fingerprint + claimSep + qty
	capacity, window := "0", "0"
	const track = "1"
	if r.Key != "" && r.BuyerCap > 0 {
		capacity = strconv.FormatInt(r.BuyerCap, 10)
		window = strconv.FormatInt(max(r.BuyerWindow.Milliseconds(), 1), 10)
	}
	// A new order is checked against the whole window, the lease and the limit; a late
	// payment's re-reservation (no key) against the sale's end, judged at r.PaidAt when it is
	// set, and the limit. Only a new order sets a claim bit.
	enforce, bit := "L", "0"
	switch {
	case r.Key != "":
		enforce, bit = "1", strconv.Itoa(claimBit(k.tag, r))
	case !r.PaidAt.IsZero():
		enforce = "L" + strconv.FormatInt(max(r.PaidAt.UnixMilli(), 0), 10)
	}
	keys = []string{k.stock, k.sold, k.frozen, k.ks.claimKeyOf(k.tag, r), k.holds, k.holdInfo,
		k.ks.budgetKeyOf(k.tag, r.Buyer), k.fence, k.rules, k.held, k.holdBuyer, k.soldOut, k.claimBits,
		k.couponUse, k.couponBuyer, k.holdCoupon}
	// Without a coupon its three arguments are constants, boxed without an allocation.
	args = []any{qty, claim, strconv.FormatInt(ms, 10), track, capacity, window, string(r.Buyer), enforce, bit, "", "0", "0"}
	if r.Coupon != "" {
		args[9], args[10], args[11] = string(r.Coupon), strconv.FormatInt(r.CouponUses, 10), strconv.FormatInt(r.CouponPerBuyer, 10)
	}
	return keys, args
}

// Reserve claims the reservation's key (or Ref) and takes its units in one atomic step
// (reserve.lua), tracking its hold, and a keyed reservation's buyer budget, in the same step.
// Replay, a missing product, frozen, the sale window (a late one: its end), the holding limit,
// the buyer budget, the coupon's limits and sold out are outcomes; a qty below 1, a
// reservation with neither key nor Ref, a BuyerCap without a positive BuyerWindow, a malformed
// coupon or a negative coupon limit is a domain.ValidationError; an error reaching Redis wraps
// domain.ErrUnavailable, and so does a ctx that ends before the reply, through the
// auto-pipeliner too (reserveThrough). With sold-out leases (WithSoldOutLease), a new order
// whose claim bit is clear is answered SoldOut (Left 0) without Redis while this instance's
// copy of the product's lease lasts, and a SoldOut from Redis makes the gate ask for one.
func (g *Gate) Reserve(ctx context.Context, r domain.Reservation) (domain.ReserveResult, error) {
	if err := checkReservation(r); err != nil {
		return domain.ReserveResult{}, err
	}
	k := g.keysOf(r.Product)
	leased := g.lease > 0 && r.Key != ""
	if leased && g.soldOutUnderLease(k, r) {
		g.leaseObs.GateLeaseAnswer()
		return domain.ReserveResult{Outcome: domain.SoldOut}, nil
	}
	keys, args := reserveArgs(k, r)
	var reply []any
	var acked int64
	var err error
	switch {
	case g.replicas > 0:
		reply, acked, err = g.reserveReplicated(ctx, keys, args)
	case g.ap != nil:
		reply, err = g.reserveThrough(ctx, keys, args)
	default:
		reply, err = reserveScript.Run(ctx, g.hot, keys, args...).Slice()
	}
	if err != nil {
		return domain.ReserveResult{}, wrap("reserve", err)
	}
	res, err := decodeReserve(reply)
	if err != nil {
		return domain.ReserveResult{}, fmt.Errorf("redis gate reserve: %w", err)
	}
	if err := g.checkReplicated(r, res, acked); err != nil {
		return domain.ReserveResult{}, err
	}
	if leased && res.Outcome == domain.SoldOut {
		g.askLease(k)
	}
	return res, nil
}

// checkReservation refuses what Reserve refuses before anything is read: a qty below 1, a
// claim that cannot be stored, a cap without a window, a malformed coupon.
func checkReservation(r domain.Reservation) error {
	if r.Qty < 1 {
		return domain.Invalid("qty", "must be at least 1")
	}
	if err := checkClaim(r); err != nil {
		return err
	}
	if err := checkBudget(r); err != nil {
		return err
	}
	return checkCouponLimits(r)
}

var _ domain.SoldOutLeases = (*Gate)(nil)

// SoldOutByLease reports whether Reserve would answer r SoldOut under this instance's copy of
// its product's lease, without Redis (domain.SoldOutLeases): the same test Reserve makes
// first, so a key with a claim (its bit set) is never covered and its re-send still replays.
// A true answer counts as a lease answer (LeaseObserver.GateLeaseAnswer), as Reserve's does.
// False for a reservation Reserve would refuse as invalid, one without a key, and a product
// this gate holds no lease for (it adds nothing to the cache of key names).
func (g *Gate) SoldOutByLease(r domain.Reservation) bool {
	if g.lease <= 0 || r.Key == "" || checkReservation(r) != nil {
		return false
	}
	k, ok := g.keys.Load(r.Product)
	if !ok || !g.soldOutUnderLease(k.(*productKeys), r) {
		return false
	}
	g.leaseObs.GateLeaseAnswer()
	return true
}

// decodeReserve reads reserve.lua's {code, claim, left}.
func decodeReserve(reply []any) (domain.ReserveResult, error) {
	if len(reply) != 3 {
		return domain.ReserveResult{}, fmt.Errorf("reply %v: want {code, claim, left}", reply)
	}
	code, ok1 := reply[0].(int64)
	claim, ok2 := reply[1].(string)
	left, ok3 := reply[2].(int64)
	if !ok1 || !ok2 || !ok3 {
		return domain.ReserveResult{}, fmt.Errorf("reply %v: want {integer, string, integer}", reply)
	}
	res := domain.ReserveResult{Left: left}
	switch code {
	case codeReserved:
		res.Outcome = domain.Reserved
	case codeReplayed:
		res.Outcome = domain.Replayed
		order, fingerprint, ok := parseClaim(claim)
		if !ok {
			return domain.ReserveResult{}, fmt.Errorf("malformed claim %q", claim)
		}
		res.ExistingOrder, res.ExistingFingerprint = order, fingerprint
	case codeSoldOut:
		res.Outcome = domain.SoldOut
	case codeFrozen:
		res.Outcome = domain.Frozen
	case codeGateMissing:
		res.Outcome = domain.GateMissing
	case codeBuyerLimit:
		res.Outcome = domain.BuyerLimit
	case codeRebuilding:
		res.Outcome = domain.Rebuilding
	case codeNotStarted:
		ms, err := strconv.ParseInt(claim, 10, 64)
		if err != nil {
			return domain.ReserveResult{}, fmt.Errorf("not started: malformed wait %q", claim)
		}
		res.Outcome, res.StartsIn = domain.NotStarted, time.Duration(ms)*time.Millisecond
	case codeEnded:
		res.Outcome = domain.Ended
	case codeHolding:
		res.Outcome = domain.HoldingLimit
	case codeCouponUsed:
		res.Outcome = domain.CouponUsedUp
	case codeCouponBuyer:
		res.Outcome = domain.CouponBuyerLimit
	default:
		return domain.ReserveResult{}, fmt.Errorf("unknown outcome code %d", code)
	}
	return res, nil
}

// parseClaim splits <order no>|<fingerprint>|<qty>.
func parseClaim(v string) (domain.OrderNo, string, bool) {
	order, rest, ok := strings.Cut(v, claimSep)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, claimSep)
	if i < 0 {
		return "", "", false
	}
	return domain.OrderNo(order), rest[:i], true
}

// Cancel undoes a reservation whose order could not be written (cancel.lua): if the claim for
// its key (or Ref) still exists, points at r.OrderNo with r.Fingerprint and its hold is still
// tracked, it drops the claim and the hold, returns the units the claim took (and the coupon
// use the reservation claimed) and reports true;
// otherwise it changes nothing and reports false. A reservation with neither key nor Ref is a
// domain.ValidationError; a fenced product is domain.ErrGateRebuilding; an error reaching Redis
// wraps domain.ErrUnavailable.
func (g *Gate) Cancel(ctx context.Context, r domain.Reservation) (bool, error) {
	if err := checkClaim(r); err != nil {
		return false, err
	}
	p := r.Product
	n, err := cancelScript.Run(ctx, g.c, []string{g.ks.stockKey(p), g.ks.soldKey(p), g.ks.claimKey(r), g.ks.holdsKey(p), g.ks.holdInfoKey(p),
		g.ks.fenceKey(p), g.ks.rulesKey(p), g.ks.heldKey(p), g.ks.holdBuyerKey(p), g.ks.couponUseKey(p), g.ks.couponBuyerKey(p), g.ks.holdCouponKey(p)},
		string(r.OrderNo), r.Fingerprint).Int64()
	if err != nil {
		return false, wrap("cancel", err)
	}
	if n == fenced {
		return false, domain.ErrGateRebuilding
	}
	return n == 1, nil
}

// Apply adds c's Stock and Sold to the product's counters, its Held to the buyer's holding
// count and its CouponUses to the coupon's counts, once per c.Ref (apply.lua), and reports
// whether this call applied it; a product the gate does not know is left alone and its marker
// is recorded all the same. A malformed coupon is a domain.ValidationError; a fenced product
// is domain.ErrGateRebuilding; an error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) Apply(ctx context.Context, c domain.GateChange) (bool, error) {
	if err := checkCoupon(c.Coupon); err != nil {
		return false, err
	}
	p := c.Product
	n, err := applyScript.Run(ctx, g.c, []string{g.ks.stockKey(p), g.ks.soldKey(p), g.ks.markerKey(c), g.ks.fenceKey(p), g.ks.rulesKey(p),
		g.ks.heldKey(p), g.ks.couponUseKey(p), g.ks.couponBuyerKey(p)},
		strconv.FormatInt(c.Stock, 10), strconv.FormatInt(c.Sold, 10),
		strconv.FormatInt(MarkerTTL.Milliseconds(), 10), string(c.Buyer), strconv.FormatInt(c.Held, 10),
		string(c.Coupon), strconv.FormatInt(c.CouponUses, 10)).Int64()
	if err != nil {
		return false, wrap("apply", err)
	}
	if n == fenced {
		return false, domain.ErrGateRebuilding
	}
	return n == 1, nil
}

// Levels returns the product's counters, read together (one MGET, one slot); ok is false when
// the gate has no stock key for it, and then only Frozen is reported. An error reaching Redis
// wraps domain.ErrUnavailable.
func (g *Gate) Levels(ctx context.Context, p domain.ProductID) (domain.GateLevels, bool, error) {
	vals, err := g.c.MGet(ctx, g.ks.stockKey(p), g.ks.soldKey(p), g.ks.frozenKey(p)).Result()
	if err != nil {
		return domain.GateLevels{}, false, wrap("levels", err)
	}
	return parseLevels(vals)
}

// LevelsMany reads every product's counters with one MGET per product (its keys share a slot),
// all sent in one pipeline: one round trip on a standalone Redis. On a Redis Cluster go-redis
// splits the pipeline by node and sends the parts in parallel, so it is one round trip per node
// holding some of the products, still independent of the number of requests it serves. An
// error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) LevelsMany(ctx context.Context, ids []domain.ProductID) (map[domain.ProductID]domain.GateLevels, error) {
	out := make(map[domain.ProductID]domain.GateLevels, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := g.c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, p := range ids {
			cmds[i] = pipe.MGet(ctx, g.ks.stockKey(p), g.ks.soldKey(p), g.ks.frozenKey(p))
		}
		return nil
	})
	if err != nil {
		return nil, wrap("levels many", err)
	}
	for i, p := range ids {
		l, ok, err := parseLevels(cmds[i].Val())
		if err != nil {
			return nil, fmt.Errorf("product %d: %w", p, err)
		}
		if ok {
			out[p] = l
		}
	}
	return out, nil
}

// parseLevels reads the values of MGET stock, sold, frozen.
func parseLevels(vals []any) (domain.GateLevels, bool, error) {
	if len(vals) != 3 {
		return domain.GateLevels{}, false, fmt.Errorf("redis gate levels: MGET answered %d values, want 3", len(vals))
	}
	l := domain.GateLevels{Frozen: vals[2] != nil}
	if vals[0] == nil {
		return l, false, nil
	}
	var err error
	if l.Stock, err = counter(vals[0]); err != nil {
		return domain.GateLevels{}, false, fmt.Errorf("redis gate levels: stock: %w", err)
	}
	if vals[1] != nil { // Rebuild writes both; a lone stock key reads as sold 0
		if l.Sold, err = counter(vals[1]); err != nil {
			return domain.GateLevels{}, false, fmt.Errorf("redis gate levels: sold: %w", err)
		}
	}
	return l, true, nil
}

func counter(v any) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("value %v is not a string", v)
	}
	return strconv.ParseInt(s, 10, 64)
}

// SetFrozen sets or clears the product's frozen flag, even before the product has counters
// (which alone does not make the product known). An error reaching Redis wraps
// domain.ErrUnavailable.
func (g *Gate) SetFrozen(ctx context.Context, p domain.ProductID, frozen bool) error {
	var err error
	if frozen {
		err = g.c.Set(ctx, g.ks.frozenKey(p), "1", 0).Err()
	} else {
		err = g.c.Del(ctx, g.ks.frozenKey(p)).Err()
	}
	return wrap("set frozen", err)
}

// SetRules replaces the product's sale rules in one step (rules.lua); rules without a limit
// drop the holding counts. A fenced product is domain.ErrGateRebuilding, writing nothing; an
// error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) SetRules(ctx context.Context, p domain.ProductID, r domain.SaleRules) error {
	if err := r.Check(); err != nil {
		return err
	}
	starts, ends, limit := rulesArgs(r)
	n, err := rulesScript.Run(ctx, g.c, []string{g.ks.rulesKey(p), g.ks.heldKey(p), g.ks.fenceKey(p)}, starts, ends, limit).Int64()
	if err != nil {
		return wrap("set rules", err)
	}
	if n == fenced {
		return domain.ErrGateRebuilding
	}
	return nil
}

// HeldCounts reads the product's holding counts (one HGETALL). An error reaching Redis wraps
// domain.ErrUnavailable.
func (g *Gate) HeldCounts(ctx context.Context, p domain.ProductID) (map[domain.BuyerID]int64, error) {
	vals, err := g.c.HGetAll(ctx, g.ks.heldKey(p)).Result()
	if err != nil {
		return nil, wrap("held counts", err)
	}
	out := make(map[domain.BuyerID]int64, len(vals))
	for b, v := range vals {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis gate held counts: buyer %q: %w", b, err)
		}
		out[domain.BuyerID(b)] = n
	}
	return out, nil
}

// CouponCounts reads the product's coupon counts: both hashes (HGETALL couponuse and
// couponbuyer) in one MULTI/EXEC, so the two agree with each other (they share a slot). An
// error reaching Redis wraps domain.ErrUnavailable.
func (g *Gate) CouponCounts(ctx context.Context, p domain.ProductID) (domain.CouponCounts, error) {
	var uses, buyers *redis.MapStringStringCmd
	_, err := g.c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		uses = pipe.HGetAll(ctx, g.ks.couponUseKey(p))
		buyers = pipe.HGetAll(ctx, g.ks.couponBuyerKey(p))
		return nil
	})
	if err != nil {
		return nil, wrap("coupon counts", err)
	}
	out := domain.CouponCounts{}
	for code, v := range uses.Val() {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis gate coupon counts: coupon %q: %w", code, err)
		}
		cc := out[domain.CouponCode(code)]
		cc.Uses = n
		out[domain.CouponCode(code)] = cc
	}
	for field, v := range buyers.Val() {
		code, buyer, ok := strings.Cut(field, couponSep)
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("redis gate coupon counts: malformed field %q = %q", field, v)
		}
		cc := out[domain.CouponCode(code)]
		if cc.Buyers == nil {
			cc.Buyers = map[domain.BuyerID]int64{}
		}
		cc.Buyers[domain.BuyerID(buyer)] = n
		out[domain.CouponCode(code)] = cc
	}
	return out, nil
}

// rulesArgs are the rules as the scripts keep them: unix milliseconds (0: no bound), the limit.
func rulesArgs(r domain.SaleRules) (starts, ends, limit string) {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return "0"
		}
		return strconv.FormatInt(t.UnixMilli(), 10)
	}
	return ms(r.StartsAt), ms(r.EndsAt), strconv.Itoa(r.BuyerLimit)
}

// wrap adds the operation to err and, when Redis could not be reached or could not serve the
// command for now, domain.ErrUnavailable.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("redis gate %s: %w: %w", op, domain.ErrUnavailable, err)
	}
	return fmt.Errorf("redis gate %s: %w", op, err)
}

// unavailable reports whether err means "Redis is not there for now" rather than "Redis
// answered no". An error without a server reply (dial, I/O, EOF, timeout, context, closed
// client, pool timeout) is unavailable; of the server's replies only the transient ones are:
// redis.Nil, script error replies and WRONGTYPE are answers, and a retry would get them again.
func unavailable(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	if errors.Is(err, redis.Nil) {
		return false
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true // still redirected after MaxRedirects: the cluster is resharding
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) ||
		redis.IsOOMError(err) || redis.IsNoReplicasError(err) || redis.HasErrorPrefix(err, "BUSY ")
}

// GateTime is Redis's clock (TIME), the clock reserve.lua judges sale windows by
// (domain.GateClock). On a Redis Cluster it is the clock of the node the client picks; the
// nodes' clocks are expected to agree as NTP keeps them. An error reaching Redis wraps
// domain.ErrUnavailable.
func (g *Gate) GateTime(ctx context.Context) (time.Time, error) {
	t, err := g.c.Time(ctx).Result()
	if err != nil {
		return time.Time{}, wrap("time", err)
	}
	return t, nil
}
