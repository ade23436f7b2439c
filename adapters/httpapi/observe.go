package httpapi

import (
	"cardshop/adapters/webkit"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// Metrics records what the API answered (adapters/metrics implements it). Every label value
// it is given comes from a small fixed set: outcomes, route patterns, methods, status classes.
type Metrics interface {
	// Order counts an answer to POST /api/order: created, replayed, sold_out, frozen,
	// rejected (any other 4xx) or error (5xx).
	Order(outcome string)
	// Callback counts an answer to a payment callback: success, invalid_signature,
	// amount_mismatch, rejected (any other 4xx) or error (5xx).
	Callback(outcome string)
	// Request observes a request's duration by route pattern (never the raw path), method and
	// status class ("2xx" … "5xx").
	Request(route, method, statusClass string, d time.Duration)
	// ReconcileDifferences adds the differences one reconciliation found.
	ReconcileDifferences(n int)
	// Handler serves GET /metrics.
	Handler() http.Handler
}

// errorCodeKey stores, in the context's locals, the stable code of the error answer (set by
// errorHandler), so that the metrics middleware can tell sold_out from another 409.
const errorCodeKey = "cardshop.error_code"

// unmatchedRoute is the route label of requests no route matched: labelling them by path
// would let any client create series.
const unmatchedRoute = "unmatched"

// observe times every request and counts order and callback outcomes. It runs outermost and
// writes the error answer itself (through the app's error handler) so that it sees the final
// status and the error code.
func (s *Server) observe(c *fiber.Ctx) error {
	start := time.Now()
	if err := c.Next(); err != nil {
		if herr := c.App().ErrorHandler(c, err); herr != nil {
			_ = c.SendStatus(fiber.StatusInternalServerError)
		}
	}
	status := c.Response().StatusCode()
	code, _ := c.Locals(errorCodeKey).(string)
	route := c.Route().Path
	if code == "route_not_found" || code == "method_not_allowed" {
		route = unmatchedRoute
	}
	method := c.Method()
	s.cfg.Metrics.Request(route, method, statusClass(status), time.Since(start))
	if method != fiber.MethodPost {
		return nil
	}
	switch route {
	case "/api/order":
		s.cfg.Metrics.Order(orderOutcome(status, code, string(c.Response().Header.Peek(HeaderReplayed)) == "true"))
	case "/api/payments/callback":
		s.cfg.Metrics.Callback(callbackOutcome(status, code))
	}
	return nil
}

func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

func orderOutcome(status int, code string, replayed bool) string {
	switch {
	case status < 300 && replayed:
		return "replayed"
	case status < 300:
		return "created"
	case code == "sold_out":
		return "sold_out"
	case code == "product_frozen":
		return "frozen"
	case status >= 500:
		return "error"
	default:
		return "rejected"
	}
}

func callbackOutcome(status int, code string) string {
	switch {
	case status < 300:
		return "success"
	case code == "invalid_signature", code == "amount_mismatch":
		return code
	case status >= 500:
		return "error"
	default:
		return "rejected"
	}
}

// metricsHandler serves the Metrics' exposition.
func metricsHandler(m Metrics) fiber.Handler { return adaptor.HTTPHandler(m.Handler()) }

type readyResponse struct {
	Status  string            `json:"status"`
	Checks  map[string]string `json:"checks"`
	Failing []string          `json:"failing,omitempty"`
}

// readyz runs every readiness check (CheckReadiness): 200 when all pass, else 503 naming the
// failing ones.
func (s *Server) readyz(c *fiber.Ctx) error {
	checks, failing := webkit.CheckReadiness(c.UserContext(), s.cfg.Readiness, s.cfg.ReadinessTimeout, s.log)
	out := readyResponse{Status: "ready", Checks: checks, Failing: failing}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if len(out.Failing) > 0 {
		out.Status = "not_ready"
		return c.Status(fiber.StatusServiceUnavailable).JSON(out)
	}
	return c.JSON(out)
}
