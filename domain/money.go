package domain

import (
	"fmt"
	"math"
)

// Money is an amount in minor units (cents). It is never a float.
type Money int64

// Times returns m multiplied by qty, or an error on overflow.
func (m Money) Times(qty int) (Money, error) {
	if qty < 0 || m < 0 {
		return 0, Invalid("amount", "negative")
	}
	if qty != 0 && int64(m) > math.MaxInt64/int64(qty) {
		return 0, Invalid("amount", "overflow")
	}
	return Money(int64(m) * int64(qty)), nil
}

// String renders the amount as units.minor, e.g. 1999 -> "19.99".
func (m Money) String() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}
