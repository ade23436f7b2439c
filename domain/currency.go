package domain

import (
	"fmt"
	"strconv"
	"strings"
)

// Currency is an ISO 4217 currency the shop sells in. Prices, orders and payments are integer
// amounts of its minor unit (Money); Exponent says how many digits the minor unit has (2 for
// CNY and USD: 1999 is 19.99; 0 for JPY).
type Currency struct {
	Code     string // upper case, e.g. "CNY"
	Exponent int
}

// currencies are the ISO 4217 currencies the shop can sell in, with their minor-unit exponent.
var currencies = map[string]int{
	"CNY": 2, "USD": 2, "EUR": 2, "GBP": 2, "HKD": 2, "SGD": 2, "AUD": 2, "CAD": 2, "CHF": 2,
	"TWD": 2, "MYR": 2, "THB": 2, "INR": 2, "BRL": 2, "MXN": 2, "SEK": 2, "NOK": 2, "DKK": 2,
	"PLN": 2, "NZD": 2, "JPY": 0, "KRW": 0, "VND": 0,
}

// ParseCurrency returns the currency with the ISO 4217 code s (any case).
func ParseCurrency(s string) (Currency, error) {
	code := strings.ToUpper(strings.TrimSpace(s))
	exp, ok := currencies[code]
	if !ok {
		return Currency{}, Invalid("currency", "not an ISO 4217 currency the shop supports")
	}
	return Currency{Code: code, Exponent: exp}, nil
}

// String returns the ISO code.
func (c Currency) String() string { return c.Code }

// IsZero reports whether c is unset.
func (c Currency) IsZero() bool { return c.Code == "" }

// Format renders an amount of c's minor unit as a decimal with exactly Exponent digits after
// the point ("19.99" for 1999 CNY, "1999" for 1999 JPY), as providers that take decimal
// amounts want it.
func (c Currency) Format(m Money) string {
	v := int64(m)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if c.Exponent == 0 {
		return sign + strconv.FormatInt(v, 10)
	}
	unit := int64(1)
	for range c.Exponent {
		unit *= 10
	}
	return fmt.Sprintf("%s%d.%0*d", sign, v/unit, c.Exponent, v%unit)
}

// ParseAmount reads a decimal amount of c ("19.99") exactly into minor units. It refuses more
// fraction digits than the currency has (no rounding: "19.999" is not an amount of CNY),
// signs, exponents, spaces and empty parts: a provider's amount is compared, never guessed.
func (c Currency) ParseAmount(s string) (Money, error) {
	whole, frac, dotted := strings.Cut(s, ".")
	if whole == "" || (dotted && frac == "") || len(frac) > c.Exponent || len(whole) > 15 {
		return 0, Invalid("amount", "not a decimal amount of "+c.Code)
	}
	for _, part := range []string{whole, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return 0, Invalid("amount", "not a decimal amount of "+c.Code)
			}
		}
	}
	frac += strings.Repeat("0", c.Exponent-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, Invalid("amount", "not a decimal amount of "+c.Code)
	}
	return Money(n), nil
}
