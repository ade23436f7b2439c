package lua

import _ "embed"

// RateLimit is ratelimit.lua: charge one request to a rate limit shared by every service
// instance (GCRA on Redis's clock). Unlike the gate's scripts it is run by adapters/ratelimit.
//
//go:embed ratelimit.lua
var RateLimit string
