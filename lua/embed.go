// Package lua holds the Redis scripts, embedded into the binary so the program and its scripts
// can never drift apart. Each script is one atomic step and opens with its KEYS, ARGV and
// return values: the stock gate's (see docs/DESIGN.md, "The gate's operations"), run by
// adapters/redisgate, and the rate limiter's (ratelimit.lua), run by adapters/ratelimit.
//
// It imports only the standard library (embed).
package lua

import _ "embed"

// Reserve is reserve.lua: claim an idempotency key (or a keyless reservation's Ref) and take
// qty units of one product in a single atomic step, with one use of a coupon when it names one.
//
//go:embed reserve.lua
var Reserve string

// Cancel is cancel.lua: give back a reservation whose order could not be written (its units
// and its coupon use), if its claim still points at that order.
//
//go:embed cancel.lua
var Cancel string

// Apply is apply.lua: add signed deltas to a product's stock and sold counters (and a buyer's
// holding count, a coupon's uses) once per reference, remembered by a marker key.
//
//go:embed apply.lua
var Apply string

// Rebuild is rebuild.lua: overwrite a product's counters and frozen flag together.
//
//go:embed rebuild.lua
var Rebuild string

// Holds is holds.lua: list a product's oldest tracked holds (keyed reservations whose orders
// are not yet confirmed written) with the qty each holds, its buyer and its coupon.
//
//go:embed holds.lua
var Holds string

// Forget is forget.lua: stop tracking the holds of orders that were written.
//
//go:embed forget.lua
var Forget string

// Release is release.lua: give back a hold whose order was never written (an orphan), its
// units to the stock and its claim dropped if it still points at the order.
//
//go:embed release.lua
var Release string

// Fence is fence.lua: close a product's gate for a rebuild from the ledger (reservations,
// changes and give-backs wait) and list its holds in the same step.
//
//go:embed fence.lua
var Fence string

// Finish is finish.lua: write the counters rebuilt from the ledger, mark the changes they
// already count, and lift the fence, if it is still the rebuild's.
//
//go:embed finish.lua
var Finish string

// Unfence is unfence.lua: lift a rebuild's fence, if it is still the rebuild's, without
// writing counters.
//
//go:embed unfence.lua
var Unfence string

// Rules is rules.lua: replace a product's sale rules (window and per-buyer holding limit) in
// one step, dropping the holding counts when the limit goes.
//
//go:embed rules.lua
var Rules string

// SoldOut is soldout.lua: grant a sold-out lease on a product whose stock is gone (new orders
// are refused until it ends) and hand over the bitmap of its buyers' claims.
//
//go:embed soldout.lua
var SoldOut string
