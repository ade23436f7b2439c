package console

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"cardshop/application"
	"cardshop/domain"
)

// Pending voids: the codes screen's void form posts the pasted codes to a confirmation page,
// which must not show them, nor carry them in the page to the final post. So the parsed codes
// wait on the instance that read them, under a random id the confirmation form carries, for
// at most pendingVoidTTL; the final post takes them once. Another instance, or a post after
// the TTL, finds nothing and asks for the codes again.
const (
	pendingVoidTTL = 10 * time.Minute
	maxPendingVoid = 32 // kept at once on an instance; the oldest is dropped for a new one
)

// pendingVoid is a void read and waiting for its confirmation.
type pendingVoid struct {
	product  domain.ProductID
	operator domain.OperatorName
	codes    []domain.CardCode
	reason   string
	expires  time.Time
}

// pendingVoids are this instance's voids waiting for confirmation, by id.
type pendingVoids struct {
	mu    sync.Mutex
	clock domain.Clock
	byID  map[string]pendingVoid
}

// put keeps v and returns its id; expired ones are forgotten first, and the oldest is dropped
// when maxPendingVoid are kept.
func (ps *pendingVoids) put(v pendingVoid) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	id := hex.EncodeToString(b)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := ps.clock.Now()
	oldest := ""
	for k, p := range ps.byID {
		if !now.Before(p.expires) {
			delete(ps.byID, k)
		} else if oldest == "" || p.expires.Before(ps.byID[oldest].expires) {
			oldest = k
		}
	}
	if len(ps.byID) >= maxPendingVoid {
		delete(ps.byID, oldest)
	}
	v.expires = now.Add(pendingVoidTTL)
	ps.byID[id] = v
	return id
}

// take removes and returns the pending void id of this product and operator, if it has not
// expired.
func (ps *pendingVoids) take(id string, product domain.ProductID, op domain.OperatorName) (pendingVoid, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	v, ok := ps.byID[id]
	if !ok || v.product != product || v.operator != op {
		return pendingVoid{}, false
	}
	delete(ps.byID, id)
	return v, ps.clock.Now().Before(v.expires)
}

// voidConfirmData is the void's confirmation page: how many codes, never which.
type voidConfirmData struct {
	Product domain.Product
	Codes   int
	Skipped int // blank and comment lines
	Reason  string
	Pending string
}

// confirmVoid reads the pasted codes (admin): one per line, normalised as an import reads a
// line, blank lines and lines starting with # skipped. Bad input answers the codes screen with
// the line's number and reason, never the line; otherwise the codes wait for the confirmation
// page, which says how many there are.
func (k *console) confirmVoid(c *fiber.Ctx) error {
	id, err := productID(c)
	if err != nil {
		return k.fail(c, err)
	}
	p, err := k.catalogue.Product(c.UserContext(), id)
	if err != nil {
		return k.fail(c, err)
	}
	reason := strings.TrimSpace(formValue(c, "reason"))
	codes, skipped, err := parsePastedCodes(formValue(c, "codes"))
	switch {
	case err != nil:
	case len(codes) == 0:
		err = invalid("codes", "console.err.paste_codes")
	case len(codes) > application.MaxVoidCodes:
		err = invalid("codes", "console.err.too_many_codes", "Max", application.MaxVoidCodes)
	case reason == "":
		err = invalid("reason", "console.err.required")
	case len([]rune(reason)) > application.MaxVoidReason:
		err = invalid("reason", "console.err.too_long", "Max", application.MaxVoidReason)
	}
	if err != nil {
		status, msg := k.explain(c, err)
		return k.codesPage(c, status, msg)
	}
	pending := k.voids.put(pendingVoid{product: id, operator: identityOf(c).Name, codes: codes, reason: reason})
	return k.render(c, fiber.StatusOK, "voidconfirm", view{Title: k.tr(c, "console.void.title", "Name", p.Name()),
		Data: voidConfirmData{Product: p, Codes: len(codes), Skipped: skipped, Reason: reason, Pending: pending}})
}

// parsePastedCodes reads one code per line. A line that is not a code is an error naming the
// line by its number only.
func parsePastedCodes(text string) (codes []domain.CardCode, skipped int, err error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 4096), len(text)+1)
	for line := 1; sc.Scan(); line++ {
		s := domain.NormalizeCardCode(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			skipped++
			continue
		}
		code, err := domain.ParseCardCode(s)
		if err != nil {
			return nil, 0, invalid("codes", "console.err.not_a_code", "Line", line, "Reason", reasonOf(err))
		}
		codes = append(codes, code)
	}
	return codes, skipped, sc.Err()
}

// reasonOf is a validation error's reason (never the input), or a generic one.
func reasonOf(err error) string {
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return "not valid"
}

// voidCodes voids the confirmed codes (admin) through the use case the API's
// POST /admin/products/{id}/codes/void uses, records codes.void with the reason and the
// counts, and answers the codes screen with the counts (or the refusal).
func (k *console) voidCodes(c *fiber.Ctx) error {
	id, err := productID(c)
	if err != nil {
		return k.fail(c, err)
	}
	v, ok := k.voids.take(formValue(c, "pending"), id, identityOf(c).Name)
	if !ok {
		return k.codesPage(c, fiber.StatusConflict,
			k.tr(c, "console.void.expired"))
	}
	res, err := k.catalogue.VoidCodes(c.UserContext(), id, v.codes, v.reason)
	k.record(c, "codes.void", map[string]string{"reason": v.reason, "given": strconv.Itoa(len(v.codes)),
		"voided": strconv.Itoa(res.Voided), "not_found": strconv.Itoa(res.NotFound), "not_voidable": strconv.Itoa(res.NotVoidable)}, err)
	if err != nil {
		status, msg := k.explain(c, err)
		if status == fiber.StatusNotFound || status >= 500 {
			return k.fail(c, err)
		}
		return k.codesPage(c, status, msg)
	}
	return k.codesPageNotice(c, k.tr(c, "console.void.done", "Voided", res.Voided, "NotFound", res.NotFound,
		"NotVoidable", res.NotVoidable))
}
