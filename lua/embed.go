// Package lua holds the Redis scripts of the stock gate, embedded into the binary so the
// program and its scripts can never drift apart. Each script is one atomic step of the gate
// (see docs/DESIGN.md, "The gate's operations") and opens with its KEYS, ARGV and return
// values. The adapter in adapters/redisgate runs them; nothing else should.
//
// It imports only the standard library (embed).
package lua

import _ "embed"

// Reserve is reserve.lua: claim an idempotency key (or a keyless reservation's Ref) and take
// qty units of one product in a single atomic step.
//
//go:embed reserve.lua
var Reserve string

// Cancel is cancel.lua: give back a reservation whose order could not be written, if its claim
// still points at that order.
//
//go:embed cancel.lua
var Cancel string

// Apply is apply.lua: add signed deltas to a product's stock and sold counters once per
// reference, remembered by a marker key.
//
//go:embed apply.lua
var Apply string

// Rebuild is rebuild.lua: overwrite a product's counters and frozen flag together.
//
//go:embed rebuild.lua
var Rebuild string
