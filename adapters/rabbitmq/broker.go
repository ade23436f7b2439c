package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/domain"
)

// Config configures a Broker. Zero fields take the defaults named on each.
type Config struct {
	URL        string          // amqp://guest:guest@127.0.0.1:5672/
	Prefix     string          // name prefix of every exchange and queue, default "cardshop"
	Delays     []time.Duration // delay buckets added to the default ladder; include the order timeout
	RetryDelay time.Duration   // how far ahead an order is rescheduled when the handler fails, default 5s
	Channels   int             // publisher channel pool size, default 8
	// Unconfirmed is how many ScheduleClose calls may return before the message that carries
	// their order is confirmed, at once; past it a call waits for its confirm. 0: every call
	// waits (see the package documentation, "Answering before the confirm").
	Unconfirmed int
	Logger      *slog.Logger // default slog.Default()
}

// Tuning that is not worth a configuration knob.
const (
	defaultPrefix     = "cardshop"
	defaultRetryDelay = 5 * time.Second
	defaultChannels   = 8

	minBackoff       = 100 * time.Millisecond // first redial pause
	maxBackoff       = 5 * time.Second        // redial pauses double up to this
	dialTimeout      = 5 * time.Second        // TCP connect + AMQP handshake of one attempt
	publishTimeout   = 10 * time.Second       // confirm wait when the caller's context has no deadline
	pingTimeout      = 5 * time.Second        // Ping's wait when the caller's context has no deadline
	prefetch         = 32                     // unacked deliveries the consumer holds
	workers          = 8                      // deliveries handled at once
	handlers         = 32                     // handler calls running at once, over all deliveries
	handlerTimeout   = 30 * time.Second       // bound on one handler call
	nackPause        = time.Second            // pause before a requeue when even the reschedule failed
	republishTimeout = 5 * time.Second        // bound on the consumer's own publishes
)

// ErrUnroutable means the broker returned a mandatory message because no queue is bound for
// its routing key. Errors matching it also match domain.ErrUnavailable.
var ErrUnroutable = errors.New("message unroutable")

// errClosed is the cause reported after Close.
var errClosed = errors.New("rabbitmq broker closed")

// errDisconnected is the cause reported while the connection is being re-established.
var errDisconnected = errors.New("not connected to rabbitmq (reconnecting)")

// Broker is the RabbitMQ adapter: a domain.DelayQueue (ScheduleClose), its consumer (Consume)
// and a domain.EventPublisher (Publish) over one supervised connection. It is safe for
// concurrent use.
type Broker struct {
	cfg      Config
	log      *slog.Logger
	topo     topology
	connName string

	life context.Context // cancelled by Close: stops the supervisor and the consumer
	stop context.CancelFunc
	wg   sync.WaitGroup // supervisor and consumer loop

	pool chan *pubChannel // free publisher channels

	batch           closeBatcher  // ScheduleClose's group commit
	handlerSlots    chan struct{} // bounds the handlers running at once, over all deliveries
	timeoutMessages atomic.Int64  // timeout messages confirmed (batches and re-parks)
	unconfirmed     atomic.Int64  // ScheduleClose calls answered whose message is not confirmed yet
	lostCloses      atomic.Int64  // orders answered before their confirm whose message then failed

	blocked atomic.Pointer[blocking] // set while the broker blocks the connection's publishes

	mu        sync.Mutex
	conn      *amqp.Connection // nil while disconnected and after Close
	up        chan struct{}    // closed while conn != nil
	closing   bool
	closed    bool
	consuming bool
	handler   func(context.Context, domain.OrderNo) error
}

// blocking records a connection.blocked notification: the broker (on a memory or disk alarm)
// has stopped reading from that connection.
type blocking struct {
	conn   *amqp.Connection
	reason string
}

var (
	_ domain.DelayQueue     = (*Broker)(nil)
	_ domain.EventPublisher = (*Broker)(nil)
)

// Dial connects to RabbitMQ, declares the topology (see the package documentation) and starts
// the supervisor that reconnects after a connection loss. It fails, with an error wrapping
// domain.ErrUnavailable, when the broker cannot be reached now; a topology that exists with
// other arguments fails with the broker's PRECONDITION_FAILED.
func Dial(ctx context.Context, cfg Config) (*Broker, error) {
	if cfg.URL == "" {
		return nil, errors.New("rabbitmq: Config.URL is empty")
	}
	if _, err := amqp.ParseURI(cfg.URL); err != nil {
		return nil, fmt.Errorf("rabbitmq: Config.URL: %w", err)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = defaultPrefix
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = defaultRetryDelay
	}
	if cfg.Channels <= 0 {
		cfg.Channels = defaultChannels
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	host, _ := os.Hostname()
	b := &Broker{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "rabbitmq", "prefix", cfg.Prefix),
		topo:     newTopology(cfg.Prefix, append(append([]time.Duration(nil), cfg.Delays...), cfg.RetryDelay)),
		connName: fmt.Sprintf("%s@%s/%d/%08x", cfg.Prefix, host, os.Getpid(), rand.Uint32()),
		pool:     make(chan *pubChannel, cfg.Channels),
		up:       make(chan struct{}),

		handlerSlots: make(chan struct{}, handlers),
	}
	b.batch.linger = defaultLinger
	for range cfg.Channels {
		b.pool <- &pubChannel{}
	}
	conn, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	b.life, b.stop = context.WithCancel(context.Background())
	closes := b.watch(conn)
	b.setConn(conn)
	b.wg.Add(1)
	go b.supervise(conn, closes)
	return b, nil
}

// connect dials once and declares the topology.
func (b *Broker) connect(ctx context.Context) (*amqp.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(b.connName)
	conn, err := amqp.DialConfig(b.cfg.URL, amqp.Config{
		Properties: props,
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake has no heartbeat yet: bound it. amqp091-go clears the deadline
			// once the connection is open.
			deadline, _ := ctx.Deadline()
			if err := c.SetDeadline(deadline); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to rabbitmq at %s: %w: %w", redact(b.cfg.URL), domain.ErrUnavailable, err)
	}
	if err := b.topo.declare(conn); err != nil {
		_ = conn.Close()
		var amqpErr *amqp.Error
		if errors.As(err, &amqpErr) && amqpErr.Code == amqp.PreconditionFailed {
			return nil, fmt.Errorf("declare rabbitmq topology: %w", err)
		}
		return nil, fmt.Errorf("declare rabbitmq topology: %w: %w", domain.ErrUnavailable, err)
	}
	return conn, nil
}

// redact hides the password of an AMQP URL.
func redact(url string) string {
	u, err := amqp.ParseURI(url)
	if err != nil {
		return "(invalid url)"
	}
	u.Password = "xxx"
	return u.String()
}

// supervise waits for conn to close, then redials until it succeeds or the broker is closed.
func (b *Broker) supervise(conn *amqp.Connection, closes chan *amqp.Error) {
	defer b.wg.Done()
	for {
		select {
		case <-b.life.Done():
			return
		case err := <-closes: // nil when the channel was closed without a reason
			b.log.Warn("rabbitmq connection lost; reconnecting", "err", err)
		}
		b.clearConn(conn)
		conn = b.redial()
		if conn == nil {
			return
		}
		// Registered before the connection is published: if it is already dead, the library
		// closes the listener at once and the loop goes round again.
		closes = b.watch(conn)
		if !b.setConn(conn) {
			return
		}
		b.log.Info("rabbitmq connection re-established")
	}
}

// watch registers the listeners of a new connection: the returned channel reports its loss,
// and connection.blocked/unblocked notifications set and clear b.blocked. While blocked, the
// broker reads nothing from the socket, so a publish would hang in its write (amqp091-go's
// writes ignore the context); publishes and Ping fail fast instead.
func (b *Broker) watch(conn *amqp.Connection) chan *amqp.Error {
	blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	go func() { // ends when the connection closes: amqp091-go closes blocks
		for bl := range blocks {
			if bl.Active {
				b.log.Warn("rabbitmq blocks publishing", "reason", bl.Reason)
				b.blocked.Store(&blocking{conn: conn, reason: bl.Reason})
				continue
			}
			b.log.Info("rabbitmq unblocked publishing")
			if cur := b.blocked.Load(); cur != nil && cur.conn == conn {
				b.blocked.CompareAndSwap(cur, nil)
			}
		}
	}()
	return conn.NotifyClose(make(chan *amqp.Error, 1))
}

// redial dials with capped exponential backoff until it succeeds (the new connection) or the
// broker is closed (nil).
func (b *Broker) redial() *amqp.Connection {
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		// Full jitter on the upper half keeps many instances from redialling in step.
		pause := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-b.life.Done():
			return nil
		case <-time.After(pause):
		}
		conn, err := b.connect(b.life)
		if err == nil {
			return conn
		}
		b.log.Warn("rabbitmq redial failed", "attempt", attempt, "err", err)
		backoff = min(2*backoff, maxBackoff)
	}
}

// setConn publishes a live connection; after Close it closes conn instead and reports false.
func (b *Broker) setConn(conn *amqp.Connection) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		_ = conn.Close()
		return false
	}
	b.conn = conn
	close(b.up)
	return true
}

// clearConn marks the broker disconnected if conn is still the current connection.
func (b *Broker) clearConn(conn *amqp.Connection) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != conn || b.conn == nil {
		return
	}
	b.conn = nil
	b.up = make(chan struct{})
}

// current returns the live connection, or the reason there is none.
func (b *Broker) current() (*amqp.Connection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return nil, errClosed
	case b.conn == nil || b.conn.IsClosed():
		return nil, errDisconnected
	}
	if bl := b.blocked.Load(); bl != nil && bl.conn == b.conn {
		return nil, fmt.Errorf("rabbitmq blocks publishing: %s", bl.reason)
	}
	return b.conn, nil
}

// waitConn blocks until there is a live connection, or until ctx ends or the broker closes.
func (b *Broker) waitConn(ctx context.Context) (*amqp.Connection, error) {
	for {
		b.mu.Lock()
		conn, up, closing := b.conn, b.up, b.closing
		b.mu.Unlock()
		if closing {
			return nil, errClosed
		}
		if conn != nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-up:
		}
	}
}

// unavailable wraps cause as an outage of the broker.
func unavailable(what string, cause error) error {
	return fmt.Errorf("%s: %w: %w", what, domain.ErrUnavailable, cause)
}

// Ping checks that the broker is connected and answering: it opens and closes a channel (one
// round trip). While the connection is being re-established it fails at once; every failure
// wraps domain.ErrUnavailable.
func (b *Broker) Ping(ctx context.Context) error {
	conn, err := b.current()
	if err != nil {
		return unavailable("ping rabbitmq", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingTimeout)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() {
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return unavailable("ping rabbitmq", err)
		}
		return nil
	case <-ctx.Done():
		return unavailable("ping rabbitmq", ctx.Err())
	}
}

// Close stops the consumer (no new deliveries; running handlers finish and are acked; the
// deliveries not yet handled go back to the queue), stops the supervisor, flushes the
// ScheduleClose calls still queued (their callers get the result of that publish) and closes
// the connection. Later calls of ScheduleClose, Publish and Ping fail with domain.ErrUnavailable.
// Calling Close again does nothing.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true
	b.mu.Unlock()

	b.stop()
	// Handlers still running may publish (a reschedule): the connection stays up until they
	// are done, and until the batches queued by them or by other callers are flushed.
	b.wg.Wait()
	b.closeBatcher()

	b.mu.Lock()
	b.closed = true
	conn := b.conn
	b.conn = nil
	b.mu.Unlock()
	if conn == nil {
		return nil
	}
	if err := conn.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("close rabbitmq connection: %w", err)
	}
	return nil
}

// QueueDepths returns how many messages wait in each queue of the topology, by name without
// the prefix: "order-timeouts", "delivered", "delay.<ms>". It asks the broker with passive
// declares on a channel of its own. A delay queue's message carries a group of closes (see
// ScheduleClose), so its depth counts groups, not orders.
func (b *Broker) QueueDepths(ctx context.Context) (map[string]int, error) {
	conn, err := b.current()
	if err != nil {
		return nil, unavailable("queue depths", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingTimeout)
		defer cancel()
	}
	type result struct {
		depths map[string]int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := conn.Channel()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer func() { _ = ch.Close() }()
		depths := make(map[string]int)
		for _, q := range b.topo.queues() {
			info, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
			if err != nil {
				done <- result{err: fmt.Errorf("queue %s: %w", q, err)}
				return
			}
			depths[strings.TrimPrefix(q, b.topo.prefix+".")] = info.Messages
		}
		done <- result{depths: depths}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, unavailable("queue depths", r.err)
		}
		return r.depths, nil
	case <-ctx.Done():
		return nil, unavailable("queue depths", ctx.Err())
	}
}

// CloseConfirms reports the ScheduleClose calls answered before their confirm
// (Config.Unconfirmed) whose message is not confirmed yet, and how many such orders have had
// their message fail since Dial (the sweeper closes those).
func (b *Broker) CloseConfirms() (unconfirmed, lost int64) {
	return b.unconfirmed.Load(), b.lostCloses.Load()
}
