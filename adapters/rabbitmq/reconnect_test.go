package rabbitmq_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/adapters/porttest"
	"cardshop/adapters/rabbitmq"
	"cardshop/domain"
)

// closeConnectionFromBroker finds the broker's connection by its client-provided name and has
// RabbitMQ close it (connection.close 320 CONNECTION_FORCED), as an operator or a node restart
// would.
func closeConnectionFromBroker(t *testing.T, connectionName string) {
	t.Helper()
	ctl, err := exec.LookPath("rabbitmqctl")
	porttest.RequireService(t, "rabbitmqctl", err)
	out, err := exec.CommandContext(t.Context(), ctl, "list_connections", "pid", "client_properties", "--quiet", "--no-table-headers").Output()
	if err != nil {
		t.Fatalf("rabbitmqctl list_connections: %v", err)
	}
	// One line per connection: <pid> TAB [{"connection_name","..."},...]
	var names []string
	for line := range strings.Lines(string(out)) {
		pid, props, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && strings.Contains(props, `{"connection_name","`+connectionName+`"}`) {
			names = append(names, pid)
		}
	}
	if len(names) != 1 {
		t.Fatalf("found %d connections named %s, want 1", len(names), connectionName)
	}
	if out, err := exec.CommandContext(t.Context(), ctl, "close_connection", names[0], "test").CombinedOutput(); err != nil {
		t.Fatalf("rabbitmqctl close_connection: %v\n%s", err, out)
	}
}

func deliveredEvent(no domain.OrderNo) domain.OutboxMessage {
	return domain.OutboxMessage{ID: 7, Topic: domain.TopicDelivered, Key: string(no), Payload: []byte(`{}`), At: time.Now()}
}

func TestReconnectAfterBrokerClosesConnection(t *testing.T) {
	b := dial(t, rabbitmq.Config{})
	s := newSink()
	b.Consume(s.handle)

	before := newOrderNo()
	beforeDue := time.Now().Add(1500 * time.Millisecond)
	if err := b.ScheduleClose(t.Context(), before, beforeDue); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}
	oldConn := b.CurrentConn()
	dropped := time.Now()
	closeConnectionFromBroker(t, b.ConnectionName())
	waitFor(t, 5*time.Second, "a new connection", func() bool {
		c := b.CurrentConn()
		return c != nil && c != oldConn
	})

	after := newOrderNo()
	waitFor(t, 5*time.Second, "ScheduleClose and Publish succeed again", func() bool {
		return b.ScheduleClose(t.Context(), after, time.Now()) == nil &&
			b.Publish(t.Context(), deliveredEvent(after)) == nil
	})
	t.Logf("publishing again %s after the broker closed the connection", time.Since(dropped))
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping after reconnect: %v", err)
	}

	want := map[domain.OrderNo]bool{before: true, after: true}
	for len(want) > 0 {
		a := s.next(t, 10*time.Second)
		if a.no == before && a.at.Before(beforeDue) {
			t.Fatalf("order scheduled before the drop delivered %s early", beforeDue.Sub(a.at))
		}
		delete(want, a.no)
	}
}

// proxied starts a proxy in front of the test broker and returns it with the URL that goes
// through it.
func proxied(t *testing.T) (*proxy, string) {
	t.Helper()
	u, err := amqp.ParseURI(porttest.AMQPURL)
	if err != nil {
		t.Fatalf("TEST_AMQP_URL: %v", err)
	}
	p := startProxy(t, net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
	host, port, _ := net.SplitHostPort(p.addr())
	u.Host = host
	u.Port, _ = strconv.Atoi(port)
	return p, u.String()
}

func TestOutageFailsFastThenRecovers(t *testing.T) {
	p, url := proxied(t)
	b := dial(t, rabbitmq.Config{URL: url})
	s := newSink()
	b.Consume(s.handle)
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	before := newOrderNo()
	if err := b.ScheduleClose(t.Context(), before, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("ScheduleClose: %v", err)
	}

	p.cut()
	waitFor(t, 5*time.Second, "Ping fails during the outage", func() bool {
		return errors.Is(b.Ping(t.Context()), domain.ErrUnavailable)
	})
	for name, call := range map[string]func(ctx context.Context) error{
		"ScheduleClose": func(ctx context.Context) error { return b.ScheduleClose(ctx, newOrderNo(), time.Now()) },
		"Publish":       func(ctx context.Context) error { return b.Publish(ctx, deliveredEvent(before)) },
		"Ping":          b.Ping,
	} {
		start := time.Now()
		err := call(t.Context())
		if !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("%s during the outage: %v, want ErrUnavailable", name, err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Fatalf("%s took %s to fail during the outage, want fail-fast", name, took)
		}
	}
	// Long enough for the message scheduled before the cut to fall due, and for several
	// redial attempts to be refused.
	time.Sleep(1500 * time.Millisecond)
	select {
	case a := <-s.ch:
		t.Fatalf("handler called during the outage: %+v", a)
	default:
	}

	p.restore()
	restored := time.Now()
	waitFor(t, 10*time.Second, "Ping recovers", func() bool { return b.Ping(t.Context()) == nil })
	t.Logf("Ping recovered %s after the outage ended", time.Since(restored))
	after := newOrderNo()
	if err := b.ScheduleClose(t.Context(), after, time.Now()); err != nil {
		t.Fatalf("ScheduleClose after recovery: %v", err)
	}
	if err := b.Publish(t.Context(), deliveredEvent(after)); err != nil {
		t.Fatalf("Publish after recovery: %v", err)
	}
	want := map[domain.OrderNo]bool{before: true, after: true}
	for len(want) > 0 {
		delete(want, s.next(t, 10*time.Second).no)
	}
}

// While the broker blocks the connection (memory or disk alarm) it reads nothing from it, so
// a publish would hang in its socket write: publishes and Ping fail fast instead, and work
// again once the broker unblocks.
func TestBlockedConnectionFailsFast(t *testing.T) {
	p, url := proxied(t)
	b := dial(t, rabbitmq.Config{URL: url})
	p.block("low on memory")
	waitFor(t, 5*time.Second, "Ping reports the block", func() bool {
		err := b.Ping(t.Context())
		return errors.Is(err, domain.ErrUnavailable) && strings.Contains(err.Error(), "low on memory")
	})
	start := time.Now()
	if err := b.ScheduleClose(t.Context(), newOrderNo(), time.Now()); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("ScheduleClose while blocked: %v, want ErrUnavailable", err)
	}
	if err := b.Publish(t.Context(), deliveredEvent(newOrderNo())); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Publish while blocked: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("failing while blocked took %s, want fail-fast", took)
	}
	p.unblock()
	waitFor(t, 5*time.Second, "publishing after unblock", func() bool {
		return b.Publish(t.Context(), deliveredEvent(newOrderNo())) == nil
	})
}
