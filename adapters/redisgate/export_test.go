package redisgate

import "cardshop/domain"

// Internals the external tests need to look at the keys and to run the scripts directly.
var (
	StockKey       = stockKey
	SoldKey        = soldKey
	FrozenKey      = frozenKey
	ClaimKey       = claimKey
	MarkerKey      = markerKey
	HoldsKey       = holdsKey
	HoldInfoKey    = holdInfoKey
	BudgetKey      = budgetKey
	FenceKey       = fenceKey
	RulesKey       = rulesKey
	HeldKey        = heldKey
	HoldBuyerKey   = holdBuyerKey
	SoldOutKey     = soldOutKey
	ClaimBitsKey   = claimBitsKey
	CouponUseKey   = couponUseKey
	CouponBuyerKey = couponBuyerKey
	HoldCouponKey  = holdCouponKey
	BitSet         = bitSet
)

// ClaimBit is r's bit in its product's claim bitmap.
func ClaimBit(r domain.Reservation) int { return claimBit(productTag(r.Product), r) }

// MaxCachedProducts bounds the gate's cache of key names.
const MaxCachedProducts = maxCachedProducts

// ReserveArgs are reserve.lua's KEYS and ARGV for r, its key names built afresh.
func ReserveArgs(r domain.Reservation) ([]string, []any) {
	return reserveArgs(newProductKeys(r.Product), r)
}

// CachedReserveArgs are reserve.lua's KEYS and ARGV for r as Reserve builds them, through g's
// cache of key names.
func CachedReserveArgs(g *Gate, r domain.Reservation) ([]string, []any) {
	return reserveArgs(g.keysOf(r.Product), r)
}

// CachedProducts counts the products whose key names g keeps.
func CachedProducts(g *Gate) int64 { return g.cached.Load() }

// SyncLeases makes g take a sold-out lease before Reserve returns the SoldOut that asks for
// it, so that a test knows the lease stands (or was refused) when Reserve returns.
func SyncLeases(g *Gate) *Gate { g.leaseSync = true; return g }
