package redisgate

import "cardshop/domain"

// noPrefix is the keyspace of a gate without WithKeyPrefix.
const noPrefix keyspace = ""

// Internals the external tests need to look at the keys and to run the scripts directly.
var (
	StockKey       = noPrefix.stockKey
	SoldKey        = noPrefix.soldKey
	FrozenKey      = noPrefix.frozenKey
	ClaimKey       = noPrefix.claimKey
	MarkerKey      = noPrefix.markerKey
	HoldsKey       = noPrefix.holdsKey
	HoldInfoKey    = noPrefix.holdInfoKey
	BudgetKey      = noPrefix.budgetKey
	FenceKey       = noPrefix.fenceKey
	RulesKey       = noPrefix.rulesKey
	HeldKey        = noPrefix.heldKey
	HoldBuyerKey   = noPrefix.holdBuyerKey
	SoldOutKey     = noPrefix.soldOutKey
	ClaimBitsKey   = noPrefix.claimBitsKey
	CouponUseKey   = noPrefix.couponUseKey
	CouponBuyerKey = noPrefix.couponBuyerKey
	HoldCouponKey  = noPrefix.holdCouponKey
	BitSet         = bitSet
)

// ClaimBit is r's bit in its product's claim bitmap.
func ClaimBit(r domain.Reservation) int { return claimBit(productTag(r.Product), r) }

// MaxCachedProducts bounds the gate's cache of key names.
const MaxCachedProducts = maxCachedProducts

// ReserveArgs are reserve.lua's KEYS and ARGV for r, its key names built afresh.
func ReserveArgs(r domain.Reservation) ([]string, []any) {
	return reserveArgs(newProductKeys(noPrefix, r.Product), r)
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

// PrefixedReserveArgs are reserve.lua's KEYS and ARGV for r on a gate WithKeyPrefix(prefix).
func PrefixedReserveArgs(prefix string, r domain.Reservation) ([]string, []any) {
	return reserveArgs(newProductKeys(newKeyspace(prefix), r.Product), r)
}
