package redisgate

// Internals the external tests need to look at the keys and to run the scripts directly.
var (
	StockKey     = stockKey
	SoldKey      = soldKey
	FrozenKey    = frozenKey
	ClaimKey     = claimKey
	MarkerKey    = markerKey
	ReserveArgs  = reserveArgs
	HoldsKey     = holdsKey
	HoldInfoKey  = holdInfoKey
	BudgetKey    = budgetKey
	FenceKey     = fenceKey
	RulesKey     = rulesKey
	HeldKey      = heldKey
	HoldBuyerKey = holdBuyerKey
)
