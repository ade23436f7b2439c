package webkit

import (
	"strconv"

	"cardshop/application"
	"cardshop/domain"
)

// AlertFilter reads an alert list's query (status, kind, product_id, before_id, limit); the
// console reads its filter form with it too.
func AlertFilter(q func(key string) string) (domain.AlertFilter, error) {
	st, err := domain.ParseAlertStatus(q("status"))
	if err != nil {
		return domain.AlertFilter{}, err
	}
	f := domain.AlertFilter{Status: st, Kind: q("kind"), Limit: 100}
	if v := q("product_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			return f, domain.Invalid("product_id", "must be a positive product id")
		}
		f.Product = domain.ProductID(id)
	}
	if v := q("before_id"); v != "" {
		if f.BeforeID, err = strconv.ParseInt(v, 10, 64); err != nil || f.BeforeID < 1 {
			return f, domain.Invalid("before_id", "must be a positive alert id")
		}
	}
	if v := q("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > application.MaxAlertPage {
			return f, domain.Invalid("limit", "must be from 1 to 1000")
		}
	}
	return f, nil
}

// ParseAlertID reads an alert id from a path: a positive integer.
func ParseAlertID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, domain.Invalid("id", "must be a positive alert id")
	}
	return id, nil
}
