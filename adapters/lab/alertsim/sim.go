package alertsim

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Outage is what a simulator does to every request.
type Outage int

// The outage modes.
const (
	Up       Outage = iota // answers as the service does
	Error5xx               // 502 Bad Gateway with an HTML body, as a front proxy would
	Hang                   // answers nothing until the client gives up or the simulator closes
)

// server is what both simulators share: the HTTP server, the outage switch and the clock.
type server struct {
	srv  *httptest.Server
	stop chan struct{}
	now  func() time.Time

	mu       sync.Mutex
	outage   Outage
	throttle int // the next throttle requests are rate-limited
	retry    int // with this retry_after (Telegram)
	requests int
}

func newServer(now func() time.Time, h http.HandlerFunc) *server {
	if now == nil {
		now = time.Now
	}
	s := &server{stop: make(chan struct{}), now: now}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		o := s.outage
		s.mu.Unlock()
		switch o {
		case Error5xx:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
			return
		case Hang:
			select {
			case <-r.Context().Done():
			case <-s.stop:
			}
			return
		case Up:
		}
		h(w, r)
	}))
	return s
}

// takeThrottle reports whether this request is one of the throttled ones, and its retry time.
func (s *server) takeThrottle() (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.throttle == 0 {
		return false, 0
	}
	s.throttle--
	return true, s.retry
}

// URL is the simulator's base URL.
func (s *server) URL() string { return s.srv.URL }

// SetOutage switches the outage mode.
func (s *server) SetOutage(o Outage) {
	s.mu.Lock()
	s.outage = o
	s.mu.Unlock()
}

// Requests counts every request received, outages included.
func (s *server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Close stops the server; hanging requests end.
func (s *server) Close() {
	close(s.stop)
	s.srv.Close()
}
