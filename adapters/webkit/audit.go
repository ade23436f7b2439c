package webkit

import (
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
)

// AuditResult is how the audit log words a write's outcome: the status it answered with, or
// for an error the API's status and stable code ("409 sold_out"). The console records its
// writes with it too, so an entry reads the same whichever door the write came through.
func AuditResult(status int, err error) string {
	if err == nil {
		return strconv.Itoa(status)
	}
	api := Lookup(err)
	return strconv.Itoa(api.Status) + " " + api.Code
}

// AuditTarget names what the route acts on, as the audit log records it: the console's routes
// use it too, so both doors name a target alike.
func AuditTarget(c *fiber.Ctx) string {
	switch {
	case c.Params("id") != "":
		return "product " + c.Params("id")
	case c.Params("order_no") != "":
		return "order " + c.Params("order_no")
	case c.Params("name") != "":
		return "operator " + c.Params("name")
	case c.Params("alert_id") != "":
		return "alert " + c.Params("alert_id")
	case c.Params("block_id") != "":
		return "blocklist " + c.Params("block_id")
	case c.Params("code") != "":
		return "coupon " + strings.ToUpper(c.Params("code"))
	}
	return ""
}

// SecretField reports whether a parameter may hold a secret or a code: never recorded (the
// console leaves the same fields out of its entries).
func SecretField(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"token", "secret", "password", "code", "key"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// ImportAudit is what the audit log records of a code import, through the API or the
// console, as its entry's parameters: the report's counts, the last line it accounts for and
// the bytes read — never a code. The console's import history reads it back.
type ImportAudit struct {
	Added        int   `json:"added"`
	Duplicates   int   `json:"duplicates"`
	InPool       int   `json:"in_pool"`
	Invalid      int   `json:"invalid"`
	Comments     int   `json:"comments"`
	Headers      int   `json:"headers"`
	Unterminated int   `json:"unterminated"`
	Through      int   `json:"through"`
	Bytes        int64 `json:"bytes"`
}

// NewImportAudit is the audit record of an import that read bytes and reported rep.
func NewImportAudit(rep application.ImportReport, bytes int64) ImportAudit {
	return ImportAudit{Added: rep.Added, Duplicates: rep.Duplicates, InPool: rep.InPool, Invalid: rep.Invalid,
		Comments: rep.Comments, Headers: rep.Headers, Unterminated: rep.Unterminated, Through: rep.Through, Bytes: bytes}
}

// Fields are the record's JSON object fields.
func (a ImportAudit) Fields() map[string]any {
	return map[string]any{"added": a.Added, "duplicates": a.Duplicates, "in_pool": a.InPool, "invalid": a.Invalid,
		"comments": a.Comments, "headers": a.Headers, "unterminated": a.Unterminated, "through": a.Through, "bytes": a.Bytes}
}
