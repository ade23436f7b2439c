package domain

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ProductID identifies a product. It is positive.
type ProductID int64

// MaxQtyLimit is the highest per-order limit a product may have.
const MaxQtyLimit = 1000

// Product is something the shop sells: a price and a pool of card codes.
type Product struct {
	id           ProductID
	name         string
	description  string // plain text shown to buyers (CheckDescription); "" when none
	price        Money
	minPerOrder  int
	maxPerOrder  int
	codeUses     int         // sales per code: 1, N >= 2, or UnlimitedUses (a shared key)
	group        string      // the variant group the product belongs to; "" when none
	variant      string      // the product's label within its group; "" when none
	tiers        []PriceTier // never shared: every copy in or out is cloned, so a Product is immutable
	stockDisplay StockDisplay
	sale         SaleRules
	refundFrees  bool // a refund gives the units back to the buyer's holding limit
	lowStock     int  // product.low_stock fires at or below this stock left; 0: never
	stockState   StockState
	frozen       bool
	frozenReason string
	createdAt    time.Time
}

// NewProduct validates a new product. id may be 0: the catalogue then assigns one.
func NewProduct(id ProductID, name string, price Money, maxPerOrder int, at time.Time) (Product, error) {
	name = strings.TrimSpace(name)
	switch {
	case id < 0:
		return Product{}, Invalid("id", "must be positive")
	case name == "" || utf8.RuneCountInString(name) > 128:
		return Product{}, Invalid("name", "must be 1 to 128 characters")
	case price <= 0:
		return Product{}, Invalid("price", "must be a positive number of minor units")
	case maxPerOrder < 1 || maxPerOrder > MaxQtyLimit:
		return Product{}, Invalid("max_per_order", "must be between 1 and 1000")
	}
	return Product{id: id, name: name, price: price, minPerOrder: 1, maxPerOrder: maxPerOrder, codeUses: 1,
		stockDisplay: StockExact, createdAt: at}, nil
}

// ProductRecord is a product as stored; RehydrateProduct turns it back into a Product.
type ProductRecord struct {
	ID           ProductID
	Name         string
	Description  string
	Price        Money
	MinPerOrder  int // 0 reads as 1 (a row stored before the setting existed)
	MaxPerOrder  int
	CodeUses     int  // sales per code, N >= 1; 0 reads as 1 (a record made before the setting existed)
	SharedKey    bool // sold without a limit (CodeUses UnlimitedUses); CodeUses is then ignored
	Group        string
	Variant      string
	Tiers        []PriceTier // nil when the product has none
	StockDisplay StockDisplay
	Sale         SaleRules
	// RefundReleasesLimit: a refund gives the order's units back to the buyer's holding limit.
	RefundReleasesLimit bool
	LowStockThreshold   int
	StockState          StockState // the last stock event's state ("" before the first)
	Frozen              bool
	FrozenReason        string
	CreatedAt           time.Time
}

// RehydrateProduct rebuilds a product from storage without re-validating it. An empty stock
// display reads as StockExact, and a MinPerOrder or CodeUses of 0 as 1 (a row stored before the
// setting existed): only SharedKey makes a product of unlimited uses.
func RehydrateProduct(r ProductRecord) Product {
	if r.StockDisplay == "" {
		r.StockDisplay = StockExact
	}
	r.MinPerOrder = max(r.MinPerOrder, 1)
	r.CodeUses = max(r.CodeUses, 1)
	if r.SharedKey {
		r.CodeUses = UnlimitedUses
	}
	return Product{id: r.ID, name: r.Name, description: r.Description, price: r.Price, minPerOrder: r.MinPerOrder, maxPerOrder: r.MaxPerOrder,
		codeUses: r.CodeUses, group: r.Group, variant: r.Variant, tiers: cloneTiers(r.Tiers),
		stockDisplay: r.StockDisplay, sale: r.Sale, refundFrees: r.RefundReleasesLimit, lowStock: r.LowStockThreshold,
		stockState: r.StockState, frozen: r.Frozen, frozenReason: r.FrozenReason, createdAt: r.CreatedAt}
}

// Record returns the storable form of p.
func (p Product) Record() ProductRecord {
	return ProductRecord{ID: p.id, Name: p.name, Description: p.description, Price: p.price, MinPerOrder: p.minPerOrder, MaxPerOrder: p.maxPerOrder,
		CodeUses: p.codeUses, SharedKey: p.codeUses == UnlimitedUses, Group: p.group, Variant: p.variant, Tiers: cloneTiers(p.tiers),
		StockDisplay: p.stockDisplay, Sale: p.sale, RefundReleasesLimit: p.refundFrees, LowStockThreshold: p.lowStock,
		StockState: p.stockState, Frozen: p.frozen, FrozenReason: p.frozenReason, CreatedAt: p.createdAt}
}

// WithID returns p with the id the catalogue assigned.
func (p Product) WithID(id ProductID) Product { p.id = id; return p }

// ID returns the product id.
func (p Product) ID() ProductID { return p.id }

// Name returns the display name.
func (p Product) Name() string { return p.name }

// Description returns the product's description: plain text (never HTML) of at most
// MaxDescription characters, lines separated by "\n"; "" when the product has none.
func (p Product) Description() string { return p.description }

// Price returns the base unit price: the price of a quantity below the first tier.
func (p Product) Price() Money { return p.price }

// Tiers returns a copy of the quantity prices, by increasing MinQty (nil when none).
func (p Product) Tiers() []PriceTier { return cloneTiers(p.tiers) }

// StockDisplay says how the public catalogue shows the product's stock.
func (p Product) StockDisplay() StockDisplay { return p.stockDisplay }

// MinPerOrder returns the fewest units one order may buy (at least 1).
func (p Product) MinPerOrder() int { return max(p.minPerOrder, 1) }

// MaxPerOrder returns the per-order quantity limit.
func (p Product) MaxPerOrder() int { return p.maxPerOrder }

// CodeUses returns how many times each code of the product may be sold: 1 (the default), N
// >= 2, or UnlimitedUses for a shared key (see UsesPerImport).
func (p Product) CodeUses() int { return p.codeUses }

// UsesPerImport is the number of uses one imported code adds to the pool, the gate and the
// flow: CodeUses, or SharedKeyUses for a shared key (each import of the key adds that many).
func (p Product) UsesPerImport() int {
	if p.codeUses == UnlimitedUses {
		return SharedKeyUses
	}
	return p.codeUses
}

// WithCodeUses returns p selling each code n times (CheckCodeUses). A product's code uses are
// set when it is created and never change (ProductRevision has no such field): the codes in
// its pool were counted into the gate and the flow at the uses they were imported with.
func (p Product) WithCodeUses(n int) (Product, error) {
	if err := CheckCodeUses(n); err != nil {
		return Product{}, err
	}
	p.codeUses = n
	return p, nil
}

// UnlimitedUses is the CodeUses of a shared key: a code sold any number of times.
const UnlimitedUses = 0

// MaxCodeUses bounds a product's CodeUses.
const MaxCodeUses = 1000

// SharedKeyUses is the number of uses each import of a shared key adds: a shared key is
// unlimited in that importing it again (the same code) adds as many uses again, never a
// duplicate, so the pool, the gate and the flow always count the same finite number of uses.
const SharedKeyUses = 1000

// CheckCodeUses validates a product's code uses: UnlimitedUses (0) or 1 to MaxCodeUses.
func CheckCodeUses(n int) error {
	if n < 0 || n > MaxCodeUses {
		return Invalid("code_uses", "must be 0 (a shared key, unlimited) or 1 to 1000")
	}
	return nil
}

// Group returns the name of the variant group the product belongs to ("" when none).
func (p Product) Group() string { return p.group }

// Variant returns the product's label within its group ("" when none).
func (p Product) Variant() string { return p.variant }

// Sale returns the sale window and the per-buyer holding limit.
func (p Product) Sale() SaleRules { return p.sale }

// RefundReleasesLimit reports whether a refund gives the order's units back to the buyer's
// holding limit (otherwise a refunded order keeps counting against it).
func (p Product) RefundReleasesLimit() bool { return p.refundFrees }

// LowStockThreshold is the stock left at or below which product.low_stock fires; 0: never.
func (p Product) LowStockThreshold() int { return p.lowStock }

// StockState is the state the last stock event left the product in ("" before the first).
func (p Product) StockState() StockState { return p.stockState }

// Frozen reports whether sales are stopped.
func (p Product) Frozen() bool { return p.frozen }

// FrozenReason says why the product is frozen.
func (p Product) FrozenReason() string { return p.frozenReason }

// CreatedAt returns when the product was created.
func (p Product) CreatedAt() time.Time { return p.createdAt }

// Freeze stops sales with a reason.
func (p *Product) Freeze(reason string) {
	p.frozen, p.frozenReason = true, strings.TrimSpace(reason)
}

// Unfreeze resumes sales.
func (p *Product) Unfreeze() { p.frozen, p.frozenReason = false, "" }

// CheckQty returns ErrQtyOutOfRange unless MinPerOrder <= qty <= MaxPerOrder.
func (p Product) CheckQty(qty int) error {
	if qty < p.MinPerOrder() || qty > p.maxPerOrder {
		return ErrQtyOutOfRange
	}
	return nil
}

// UnitPriceFor returns the unit price of an order of qty units (TierPrice).
func (p Product) UnitPriceFor(qty int) Money { return TierPrice(p.price, p.tiers, qty) }

// TierPrice is the unit price of qty units of a product priced base with tiers (ascending
// MinQty, as a product holds them): the price of the last tier whose MinQty is at most qty,
// or base below the first tier. A storefront pricing an order from a catalogue copy uses it
// too, so the price it shows is the one the order gets.
func TierPrice(base Money, tiers []PriceTier, qty int) Money {
	price := base
	for _, t := range tiers {
		if qty < t.MinQty {
			break
		}
		price = t.UnitPrice
	}
	return price
}

// Amount returns the price of qty units at the unit price for qty.
func (p Product) Amount(qty int) (Money, error) { return p.UnitPriceFor(qty).Times(qty) }

// PriceTier is a quantity price: an order of at least MinQty units pays UnitPrice per unit.
type PriceTier struct {
	MinQty    int
	UnitPrice Money
}

// MaxPriceTiers bounds how many quantity prices a product may have.
const MaxPriceTiers = 10

// StockDisplay is how the public catalogue shows a product's stock.
type StockDisplay string

// The stock displays. StockLevel shows a coarse level instead of the number (StockLevelOf).
const (
	StockExact StockDisplay = "exact"
	StockLevel StockDisplay = "level"
)

// ParseStockDisplay validates a stock display setting; "" is StockExact.
func ParseStockDisplay(s string) (StockDisplay, error) {
	switch StockDisplay(s) {
	case "", StockExact:
		return StockExact, nil
	case StockLevel:
		return StockLevel, nil
	}
	return "", Invalid("stock_display", `must be "exact" or "level"`)
}

// FewStockThreshold is the stock at or below which StockLevelOf says "few".
const FewStockThreshold = 10

// StockLevelOf is the coarse level shown for stock units left: "none" at 0 (or below),
// "few" from 1 to FewStockThreshold, "plenty" above.
func StockLevelOf(stock int64) string {
	switch {
	case stock <= 0:
		return "none"
	case stock <= FewStockThreshold:
		return "few"
	}
	return "plenty"
}

// ProductRevision is the part of a product an operator may change while it is on sale. An
// order keeps the unit price and amount it was placed with, so a revision never changes an
// existing order.
type ProductRevision struct {
	Name                string
	Description         string // plain text, CheckDescription
	Price               Money
	MinPerOrder         int
	MaxPerOrder         int
	Group               string // "" for a product on its own; with a Variant label otherwise
	Variant             string
	Tiers               []PriceTier
	StockDisplay        StockDisplay
	Sale                SaleRules
	RefundReleasesLimit bool
	LowStockThreshold   int
}

// Revision returns the product's current revisable fields (Tiers is a copy).
func (p Product) Revision() ProductRevision {
	return ProductRevision{Name: p.name, Description: p.description, Price: p.price, MinPerOrder: p.MinPerOrder(), MaxPerOrder: p.maxPerOrder,
		Group: p.group, Variant: p.variant, Tiers: cloneTiers(p.tiers),
		StockDisplay: p.stockDisplay, Sale: p.sale, RefundReleasesLimit: p.refundFrees, LowStockThreshold: p.lowStock}
}

// Revise returns p with every field of r, validated as NewProduct validates them, the
// minimum per order between 1 and the maximum (and the buyer limit, when set), the group and variant as CheckVariant says and
// the tiers as CheckTiers says. An empty StockDisplay is StockExact. p is unchanged.
func (p Product) Revise(r ProductRevision) (Product, error) {
	np, err := NewProduct(p.id, r.Name, r.Price, r.MaxPerOrder, p.createdAt)
	if err != nil {
		return Product{}, err
	}
	if r.MinPerOrder < 1 || r.MinPerOrder > r.MaxPerOrder {
		return Product{}, Invalid("min_per_order", "must be between 1 and max_per_order")
	}
	if r.Sale.BuyerLimit > 0 && r.MinPerOrder > r.Sale.BuyerLimit {
		// No buyer could ever order such a product.
		return Product{}, Invalid("min_per_order", "must not exceed buyer_limit")
	}
	group, variant, err := CheckVariant(r.Group, r.Variant)
	if err != nil {
		return Product{}, err
	}
	description, err := CheckDescription(r.Description)
	if err != nil {
		return Product{}, err
	}
	display, err := ParseStockDisplay(string(r.StockDisplay))
	if err != nil {
		return Product{}, err
	}
	if err := CheckTiers(r.Price, r.MaxPerOrder, r.Tiers); err != nil {
		return Product{}, err
	}
	if err := r.Sale.Check(); err != nil {
		return Product{}, err
	}
	if r.LowStockThreshold < 0 || r.LowStockThreshold > MaxStockThreshold {
		return Product{}, Invalid("low_stock_threshold", "must be between 0 and 1000000")
	}
	np.tiers, np.stockDisplay = cloneTiers(r.Tiers), display
	np.minPerOrder, np.group, np.variant, np.description = r.MinPerOrder, group, variant, description
	np.sale, np.refundFrees, np.lowStock = r.Sale.normal(), r.RefundReleasesLimit, r.LowStockThreshold
	np.stockState, np.frozen, np.frozenReason = p.stockState, p.frozen, p.frozenReason
	np.codeUses = p.codeUses
	return np, nil
}

// CheckTiers validates quantity prices against the base price and the per-order limit: at most
// MaxPriceTiers tiers; MinQty at least 2 (1 is the base price), strictly increasing and at most
// maxPerOrder (a tier nobody can order is a mistake); unit prices positive and never above the
// price before (the base price, then the previous tier): buying more never costs more per unit,
// as a shop's quantity discount promises. Equal prices are allowed.
func CheckTiers(base Money, maxPerOrder int, tiers []PriceTier) error {
	if len(tiers) > MaxPriceTiers {
		return Invalid("tiers", "at most 10 quantity prices")
	}
	prevQty, prevPrice := 1, base
	for _, t := range tiers {
		switch {
		case t.MinQty < 2:
			return Invalid("tiers", "min_qty must be at least 2 (the base price applies to 1)")
		case t.MinQty <= prevQty:
			return Invalid("tiers", "min_qty must be strictly increasing")
		case t.MinQty > maxPerOrder:
			return Invalid("tiers", "min_qty must not exceed max_per_order")
		case t.UnitPrice <= 0:
			return Invalid("tiers", "unit_price must be a positive number of minor units")
		case t.UnitPrice > prevPrice:
			return Invalid("tiers", "unit_price must not exceed the price before it (the base price, then the previous tier)")
		}
		prevQty, prevPrice = t.MinQty, t.UnitPrice
	}
	return nil
}

// MaxVariantText bounds a group name and a variant label, in characters.
const MaxVariantText = 64

// CheckVariant validates a product's variant group and label and returns them trimmed: both
// empty (a product on its own) or both set (a variant of the group), each at most
// MaxVariantText characters. Products of one group are shown together and keep their own
// pool, gate and rules: the group is a label for the catalogue, never a shared stock.
func CheckVariant(group, variant string) (string, string, error) {
	group, variant = strings.TrimSpace(group), strings.TrimSpace(variant)
	switch {
	case utf8.RuneCountInString(group) > MaxVariantText:
		return "", "", Invalid("group", "must be at most 64 characters")
	case utf8.RuneCountInString(variant) > MaxVariantText:
		return "", "", Invalid("variant", "must be at most 64 characters")
	case group == "" && variant != "":
		return "", "", Invalid("variant", "needs a group")
	case group != "" && variant == "":
		return "", "", Invalid("variant", "is required for a product in a group")
	}
	return group, variant, nil
}

// MaxDescription bounds a product's description, in characters.
const MaxDescription = 2000

// CheckDescription validates a product's description and returns it normalised: line ends
// ("\r\n", "\r") read as "\n", surrounding white space trimmed, at most MaxDescription
// characters of valid UTF-8, and no control character but newline and tab. It is plain text:
// whatever reads like markup is kept as written and every page escapes it.
func CheckDescription(s string) (string, error) {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", Invalid("description", "must be valid UTF-8 text")
	}
	if utf8.RuneCountInString(s) > MaxDescription {
		return "", Invalid("description", "must be at most 2000 characters")
	}
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return "", Invalid("description", "must not contain control characters other than newline and tab")
		}
	}
	return s, nil
}

func cloneTiers(t []PriceTier) []PriceTier {
	if len(t) == 0 {
		return nil
	}
	return slices.Clone(t)
}
