package main

// The chaos mode's RabbitMQ scenario (18): a RabbitMQ node of the load check's own, started for
// the scenario only, its Erlang VM SIGKILLed mid-sale and started again on the same data
// directory. The machine's shared node (5672) is never touched. What the scenario shows: the
// orders go on being placed while the broker is away (an order's timeout message is best
// effort: PlaceOrder keeps the order when ScheduleClose fails, and the sweeper closes it), the
// unpaid orders whose timeouts were scheduled before the kill, or could not be scheduled
// during it, are still closed on time, and the delivery events of the orders paid meanwhile
// wait in the outbox and all reach the broker once it is back.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"cardshop/domain"
)

// faultRabbitRestart SIGKILLs the own RabbitMQ node's Erlang VM and starts it again.
const faultRabbitRestart = "rabbit-restart"

// The own node's name and ports. Fixed ports below the ephemeral range (32768 and up) rather
// than free ones: the node must come back on the port the instance dials, and a free port
// picked from the ephemeral range could meanwhile become the local port of one of the load's
// own connections. The runs are serialised (flock), so a fixed port is free unless a node of a
// killed run is left behind, which the start reports.
const (
	rabbitNode     = "cardshop-chaos@localhost"
	rabbitAMQPPort = 5682
	rabbitDistPort = 25682
)

// rabbitBootNice is the node's priority while it boots: high, so that the restart under the
// sale takes 4-8 s rather than the 14-21 s of a boot starved by the sale on the same two cores
// (in production the broker has a machine of its own). Once it answers AMQP, its threads go
// back to the default priority.
const rabbitBootNice = -10

// rabbitServerScript is the RabbitMQ server's start script (a link into its release directory,
// whose plugins directory holds every Erlang application of the server).
const rabbitServerScript = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// rabbitSweepEvery is the scenario instance's CARDSHOP_SWEEP_INTERVAL (the load check's usual
// 1 s, stated here because the on-time bound of the closes is made of it).
const rabbitSweepEvery = time.Second

// rabbitCloseSlack is how late past its expiry plus a sweep interval an unpaid order may be
// closed and still count as closed on time: the close is a transaction on a MariaDB that is
// serving the sale on the same two cores.
const rabbitCloseSlack = 2 * time.Second

// rabbitScenarioNum is the RabbitMQ scenario's number.
const rabbitScenarioNum = 18

// rabbitPace is the scenario's order rate. Its check is whether unpaid orders close on time,
// and that needs a load whose expiries the shop can close: at the saturating load of the other
// scenarios (3,000-4,000 orders a second on these two cores, most of them left unpaid because
// the chaos provider pays 600-900 a second) the closes lag the expiries by tens of seconds
// with the broker up or down, which is a measure of capacity, not of the fault. 1,000 orders a
// second is a sale the provider pays at its pace (the share that pays) and the shop closes the
// rest of, on time, when nothing fails.
const rabbitPace = 1000

// rabbitScenario is the chaos scenario of the RabbitMQ restart.
func rabbitScenario(codes int) scenario {
	return scenario{num: rabbitScenarioNum, name: "RabbitMQ SIGKILLed mid-sale and restarted (same data)", codes: codes, qtyMax: 1, dup: 1,
		instances: 1, fault: faultRabbitRestart, pace: rabbitPace}
}

// rabbitDownFor is how long the node stays dead before it is started again: 8 s in the full
// form, 3 s in the short one. Its boot (3 s on an idle machine, 4-8 s under the sale) adds to
// the outage.
func (e *env) rabbitDownFor() time.Duration {
	if e.o.short {
		return 3 * time.Second
	}
	return 8 * time.Second
}

// rabbitFaultFor is how much longer the scenario's load runs than the others': the time down,
// the boot (4-8 s under the sale, at high priority), and a few seconds of orders after the
// broker is back. Not more: the payment provider of the chaos mode pays slower than wrk orders,
// and a longer load leaves it more than its 30 s after the load to catch up.
func (e *env) rabbitFaultFor() time.Duration { return e.rabbitDownFor() + 10*time.Second }

// ownRabbit is the RabbitMQ node of the chaos mode: own node name, ports, data, logs and
// Erlang cookie (HOME), all under dir.
type ownRabbit struct {
	dir      string
	erl      string
	nice     string
	env      []string
	cmd      *exec.Cmd
	exited   chan struct{}
	killedAt time.Time
	backAt   time.Time // when it answered AMQP again after the restart

	mu         sync.Mutex
	readyAgain time.Duration // from backAt to the instance's first /readyz 200; 0 if not seen
}

func (r *ownRabbit) url() string {
	return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", rabbitAMQPPort)
}

// startOwnRabbit prepares the node's directory and starts it.
func startOwnRabbit(ctx context.Context, dir string) (*ownRabbit, error) {
	for _, p := range []int{rabbitAMQPPort, rabbitDistPort} {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return nil, fmt.Errorf("own RabbitMQ: port %d is taken (a node left over by a killed run? `ss -ltnp | grep %d`): %w", p, p, err)
		}
		ln.Close()
	}
	erl, err := exec.LookPath("erl")
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: %w", err)
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: %w", err)
	}
	script, err := filepath.EvalSymlinks(rabbitServerScript)
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: %w", err)
	}
	home := filepath.Dir(filepath.Dir(script))
	libs := filepath.Join(dir, "lib")
	for _, d := range []string{libs, filepath.Join(dir, "mnesia"), filepath.Join(dir, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(filepath.Join(home, "plugins"))
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: %w", err)
	}
	var apps []string
	for _, ent := range ents {
		if ent.IsDir() {
			apps = append(apps, ent.Name())
		}
	}
	for _, app := range bootApps(apps) {
		if err := os.Symlink(filepath.Join(home, "plugins", app), filepath.Join(libs, app)); err != nil {
			return nil, err
		}
	}
	// No plugin enabled (so no management listener); an empty env file instead of the
	// machine's /etc/rabbitmq/rabbitmq-env.conf (which names the shared node); no config file
	// (the machine's rabbitmq.conf listens on 5672, and a new-style file costs seconds of
	// schema translation at every boot).
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rabbitmq-env.conf"), nil, 0o644); err != nil {
		return nil, err
	}
	r := &ownRabbit{dir: dir, erl: erl, nice: nice}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RABBITMQ_") && !strings.HasPrefix(kv, "ERL_") && !strings.HasPrefix(kv, "HOME=") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "HOME="+dir, "ERL_LIBS="+libs, "ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_HOME="+home, "RABBITMQ_PLUGINS_DIR="+libs,
		"RABBITMQ_NODENAME="+rabbitNode, "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(rabbitAMQPPort), "RABBITMQ_DIST_PORT="+strconv.Itoa(rabbitDistPort),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"), "RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "rabbitmq.pid"))
	fmt.Printf("   rabbitmq  starting the chaos mode's own node %s (AMQP 127.0.0.1:%d, data %s) …\n", rabbitNode, rabbitAMQPPort, dir)
	if err := r.start(ctx); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// bootApps are the Erlang applications of the server's plugins directory the node is started
// with: all but the optional rabbitmq_* plugins (rabbitmq_prelaunch is the server's own boot
// application). A short code path is part of what makes the node boot in about 3 s instead
// of 15 on this machine: the VM looks every module up in each directory of the path, and a
// file lookup is slow here.
func bootApps(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "rabbitmq_") && !strings.HasPrefix(n, "rabbitmq_prelaunch-") {
			continue
		}
		out = append(out, n)
	}
	return out
}

// start runs the node's Erlang VM on the data directory and waits until AMQP answers. It runs
// erl with the arguments rabbitmq-server's script would give it (the script only turns the
// environment into them; the scheduler busy-wait is off, as on the machine's node) rather than
// the script itself: that way the process started is the VM (nice, erl and erlexec exec into
// beam.smp), and a SIGKILL of it is a SIGKILL of the broker.
func (r *ownRabbit) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(r.dir, "node.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.nice, "-n", strconv.Itoa(rabbitBootNice), r.erl, "-noinput", "-noshell", "-s", "rabbit", "boot",
		"-boot", "start_sasl", "+W", "w",
		"+MBas", "ageffcbf", "+MHas", "ageffcbf", "+MBlmbcs", "512", "+MHlmbcs", "512", "+MMmcs", "30",
		"+P", "1048576", "+t", "5000000", "+stbt", "db", "+zdbbl", "128000", "+B", "i",
		"+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none",
		"-kernel", "inet_dist_use_interface", "{127,0,0,1}", "-kernel", "prevent_overlapping_partitions", "false",
		"-syslog", "logger", "[]", "-syslog", "syslog_error_logger", "false")
	cmd.Dir, cmd.Env = r.dir, r.env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("own RabbitMQ: %w", err)
	}
	r.cmd, r.exited = cmd, waitExit(cmd, logf)
	if err := r.waitAMQP(ctx, 60*time.Second); err != nil {
		return err
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
	if err != nil || strings.TrimSpace(string(comm)) != "beam.smp" {
		return fmt.Errorf("own RabbitMQ: process %d is %q, not the Erlang VM (beam.smp): its SIGKILL would miss the broker",
			cmd.Process.Pid, strings.TrimSpace(string(comm)))
	}
	normalPriority(cmd.Process.Pid)
	return nil
}

// normalPriority puts every thread of the process back to the default priority (nice 0).
// Linux keeps a priority per thread, and the VM's threads were made during the boot.
func normalPriority(pid int) {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, 0)
		}
	}
}

// waitAMQP dials the node until an AMQP handshake succeeds; it gives up when the VM exits.
func (r *ownRabbit) waitAMQP(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := amqp.DialConfig(r.url(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-r.exited:
			b, _ := os.ReadFile(filepath.Join(r.dir, "node.out"))
			return fmt.Errorf("own RabbitMQ exited while starting:\n%s", tail(string(b), 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("own RabbitMQ not answering AMQP on %d after %s: %w", rabbitAMQPPort, limit, err)
		}
	}
}

func tail(s string, n int) string { return s[max(len(s)-n, 0):] }

// kill SIGKILLs the node's VM and waits for it to be gone.
func (r *ownRabbit) kill() {
	if r == nil {
		return
	}
	kill(r.cmd, r.exited)
}

// stop ends the node (its data is thrown away with the run's directory, so no graceful stop).
func (r *ownRabbit) stop() { r.kill() }

// useOwnRabbit starts the own node and the scenario's instance on it (the shared instances
// are stopped: they run on the shared node); the returned function undoes it.
func (e *env) useOwnRabbit(ctx context.Context) (*instance, func(), error) {
	for len(e.instances) > 0 {
		e.stopInstance(e.instances[len(e.instances)-1])
	}
	r, err := startOwnRabbit(ctx, filepath.Join(e.dir, "rabbitmq"))
	if err != nil {
		return nil, nil, err
	}
	e.own.rabbit = r
	restore := func() {
		for len(e.instances) > 0 {
			e.stopInstance(e.instances[len(e.instances)-1])
		}
		r.stop()
		e.own.rabbit = nil
	}
	in, err := e.startInstance(ctx, "rabbit-instance", "127.0.0.1:6096", "CARDSHOP_AMQP_URL="+r.url(),
		"CARDSHOP_SWEEP_INTERVAL="+rabbitSweepEvery.String())
	if err != nil {
		restore()
		return nil, nil, err
	}
	return in, restore, nil
}

// injectRabbitRestart SIGKILLs the node, samples the instance half-way through the time down,
// starts the node again on the same data and returns once it answers AMQP. It then watches,
// in the background, for the instance's /readyz to pass again (it pings the broker).
func (e *env) injectRabbitRestart(ctx context.Context, cr *chaosResult, in *instance) error {
	r := e.own.rabbit
	if r == nil {
		return fmt.Errorf("%s: the own RabbitMQ node is not running", faultRabbitRestart)
	}
	down := e.rabbitDownFor()
	r.killedAt = time.Now()
	r.kill()
	sleepCtx(ctx, down/2)
	cr.goroutines[1], cr.fds[1] = e.instanceLoad(ctx, in)
	sleepCtx(ctx, down-down/2)
	if err := r.start(ctx); err != nil {
		return err
	}
	r.backAt = time.Now()
	go r.watchReady(ctx, in.base)
	return nil
}

// watchReady records how long after the node was back the instance's /readyz passed.
func (r *ownRabbit) watchReady(ctx context.Context, base string) {
	client := &http.Client{Timeout: time.Second}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				r.mu.Lock()
				r.readyAgain = time.Since(r.backAt)
				r.mu.Unlock()
				return
			}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// closedOrder is a CLOSED order's times, as offsets from the kill.
type closedOrder struct {
	created, due time.Duration
	late         time.Duration // ended_at − expires_at
}

// closeSummary sorts the closed orders by what their timeout went through: scheduled and due
// before the kill (the usual path), scheduled before the kill and due after it (a message in
// the delay queue when the node died), scheduled while the node was down (ScheduleClose failed:
// only the sweeper knows them) and scheduled after it was back.
type closeSummary struct {
	usual, queued, unscheduled, after lateGroup
	n, over                           int
	overEx                            []string // the orders closed later than the bound
	// closedDown and closedBack count the closes made while the node was down (the sweeper
	// alone) and in the closeRateWindow after it was back.
	closedDown, closedBack int
}

// closeRateWindow is the stretch after the node is back over which the close rate is given.
const closeRateWindow = 10 * time.Second

type lateGroup struct {
	n      int
	latest time.Duration
}

func (g *lateGroup) add(late time.Duration) {
	g.n++
	g.latest = max(g.latest, late)
}

func (g lateGroup) String() string {
	if g.n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (latest %s after expiry)", g.n, g.latest.Round(10*time.Millisecond))
}

// summarizeCloses makes the closeSummary of orders (nos are their numbers); backAfter is how
// long after the kill the node answered again.
func summarizeCloses(orders []closedOrder, nos []string, backAfter, bound time.Duration) closeSummary {
	s := closeSummary{n: len(orders)}
	for i, o := range orders {
		switch {
		case o.created < 0 && o.due < 0:
			s.usual.add(o.late)
		case o.created < 0:
			s.queued.add(o.late)
		case o.created < backAfter:
			s.unscheduled.add(o.late)
		default:
			s.after.add(o.late)
		}
		switch ended := o.due + o.late; {
		case ended >= 0 && ended < backAfter:
			s.closedDown++
		case ended >= backAfter && ended < backAfter+closeRateWindow:
			s.closedBack++
		}
		if o.late > bound {
			s.over++
			s.overEx = append(s.overEx, fmt.Sprintf("%s %s late", nos[i], o.late.Round(10*time.Millisecond)))
		}
	}
	return s
}

// sqlTime formats t as the ledger stores times (UTC DATETIME(6)): the harness's connection
// compares and subtracts them in SQL.
func sqlTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

// rabbitChecks are the RabbitMQ scenario's own checks; run after settle, with the node up.
func (e *env) rabbitChecks(ctx context.Context, pid int64, cr *chaosResult) ([]Check, error) {
	r := e.own.rabbit
	if r == nil || cr == nil || r.killedAt.IsZero() || r.backAt.IsZero() {
		return nil, fmt.Errorf("%s: the fault did not run", faultRabbitRestart)
	}
	killed, backAfter := sqlTime(r.killedAt), r.backAt.Sub(r.killedAt)
	r.mu.Lock()
	readyAgain := r.readyAgain
	r.mu.Unlock()
	var out []Check

	// Orders placed while the node was down, and nothing refused meanwhile.
	var placedDown int64
	if err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id=? AND created_at >= ? AND created_at < ?",
		pid, killed, sqlTime(r.backAt)).Scan(&placedDown); err != nil {
		return nil, err
	}
	ready := "never within 30 s"
	if readyAgain > 0 {
		ready = readyAgain.Round(100*time.Millisecond).String() + " after it was back"
	}
	out = append(out, Check{Name: "rabbitmq: orders are placed while RabbitMQ is down, none refused",
		Detail: fmt.Sprintf("node down %s (killed, %s dead, booted): %d orders placed meanwhile; refused from the kill to the recovery: %d (%s); "+
			"the instance's /readyz (which pings the broker) passed again %s",
			backAfter.Round(100*time.Millisecond), e.rabbitDownFor(), placedDown, cr.refused, statusMix(cr.refusedMix), ready),
		OK: placedDown > 0 && cr.refused == 0})

	// (a) Every unpaid order closed on time, by the delay queue or the sweeper.
	var closed []closedOrder
	var nos []string
	err := query(ctx, e.db, "SELECT order_no, TIMESTAMPDIFF(MICROSECOND, ?, created_at), TIMESTAMPDIFF(MICROSECOND, ?, expires_at), "+
		"TIMESTAMPDIFF(MICROSECOND, expires_at, ended_at) FROM orders WHERE product_id=? AND status='CLOSED' ORDER BY created_at",
		[]any{killed, killed, pid}, func(rows *sql.Rows) error {
			var no string
			var created, due, late int64
			if err := rows.Scan(&no, &created, &due, &late); err != nil {
				return err
			}
			nos = append(nos, no)
			closed = append(closed, closedOrder{created: time.Duration(created) * time.Microsecond,
				due: time.Duration(due) * time.Microsecond, late: time.Duration(late) * time.Microsecond})
			return nil
		})
	if err != nil {
		return nil, err
	}
	s := summarizeCloses(closed, nos, backAfter, rabbitSweepEvery+rabbitCloseSlack)
	out = append(out, Check{Name: "rabbitmq: every unpaid order is closed on time, its timeout scheduled before, during or after the outage",
		Detail: fmt.Sprintf("CLOSED %d, ended_at − expires_at at most the sweep interval %s + %s: timeout scheduled and due before the kill %s · "+
			"queued at the kill %s · scheduled while down (refused) %s · after %s · later than the bound %d%s; "+
			"closes/s while down (the sweeper alone) %.0f, in the %s after %.0f",
			s.n, rabbitSweepEvery, rabbitCloseSlack, s.usual, s.queued, s.unscheduled, s.after, s.over, examples(s.overEx),
			float64(s.closedDown)/backAfter.Seconds(), closeRateWindow, float64(s.closedBack)/closeRateWindow.Seconds()),
		OK: s.over == 0 && s.queued.n > 0 && s.unscheduled.n > 0})

	// (b) The outbox drained: no row of any topic left unsent after the settle.
	unsent := map[string]int64{}
	var unsentN int64
	if err := query(ctx, e.db, "SELECT topic, COUNT(*) FROM outbox WHERE sent_at IS NULL GROUP BY topic", nil, func(rows *sql.Rows) error {
		var topic string
		var n int64
		if err := rows.Scan(&topic, &n); err != nil {
			return err
		}
		unsent[topic] = n
		unsentN += n
		return nil
	}); err != nil {
		return nil, err
	}
	out = append(out, Check{Name: "rabbitmq: the outbox is drained after the settle (nothing left unsent)",
		Detail: fmt.Sprintf("unsent outbox rows: %d%s", unsentN, countsString(unsent)), OK: unsentN == 0})

	// (b) Each PAID order's delivery event reached the node's delivered queue, those written
	// while it was down after it was back.
	var paid []string
	var heldN, heldSent int64
	var lastSent time.Duration
	err = query(ctx, e.db, "SELECT o.order_no, x.sent_at IS NOT NULL, COALESCE(TIMESTAMPDIFF(MICROSECOND, ?, x.created_at), -1), "+
		"COALESCE(TIMESTAMPDIFF(MICROSECOND, ?, x.sent_at), -1) FROM orders o "+
		"LEFT JOIN outbox x ON x.msg_key = o.order_no AND x.topic = ? WHERE o.product_id = ? AND o.status = 'PAID'",
		[]any{killed, killed, domain.TopicDelivered, pid}, func(rows *sql.Rows) error {
			var no string
			var sent bool
			var created, sentAt int64
			if err := rows.Scan(&no, &sent, &created, &sentAt); err != nil {
				return err
			}
			paid = append(paid, no)
			c, st := time.Duration(created)*time.Microsecond, time.Duration(sentAt)*time.Microsecond
			if c >= 0 && c < backAfter {
				heldN++
				if sent {
					heldSent++
					lastSent = max(lastSent, st-backAfter)
				}
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	seen, err := r.drainDelivered(ctx)
	if err != nil {
		return nil, err
	}
	missing, extra := missingFrom(paid, seen)
	var copies int
	for _, n := range seen {
		copies += n
	}
	out = append(out, Check{Name: "rabbitmq: every PAID order's delivery event is in the node's delivered queue after the restart",
		Detail: fmt.Sprintf("PAID %d: events in %s.delivered %d (%d copies of the same event, at-least-once), PAID orders without one %d%s; "+
			"written while the node was down %d, relayed after it was back %d, the last %s after (%.0f/s)",
			len(paid), amqpPrefix, copies, extra, len(missing), examples(missing), heldN, heldSent, lastSent.Round(100*time.Millisecond),
			float64(heldSent)/max(lastSent.Seconds(), 0.001)),
		OK: len(paid) > 0 && len(missing) == 0 && heldN > 0 && heldSent == heldN})
	return out, nil
}

// missingFrom returns the items of want that seen does not count, and how many copies seen
// holds beyond one per item.
func missingFrom(want []string, seen map[string]int) (missing []string, extra int) {
	for _, w := range want {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	for _, n := range seen {
		extra += max(n-1, 0)
	}
	return missing, extra
}

// drainDelivered takes every message off the node's delivered queue (nobody else reads it on
// this node) and counts them by order number (the message's correlation id).
func (r *ownRabbit) drainDelivered(ctx context.Context) (map[string]int, error) {
	conn, err := amqp.DialConfig(r.url(), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	queue := amqpPrefix + ".delivered"
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: queue %s: %w", queue, err)
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		return nil, err
	}
	dels, err := ch.Consume(queue, "loadcheck-drain", false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("own RabbitMQ: consume %s: %w", queue, err)
	}
	seen := make(map[string]int, q.Messages)
	for n := 0; n < q.Messages; n++ {
		select {
		case d, ok := <-dels:
			if !ok {
				return nil, errors.New("own RabbitMQ: the delivered queue's consumer was closed")
			}
			seen[d.CorrelationId]++
			if n%500 == 499 || n == q.Messages-1 {
				if err := d.Ack(true); err != nil {
					return nil, err
				}
			}
		case <-time.After(10 * time.Second):
			return nil, fmt.Errorf("own RabbitMQ: %d of the %d messages of %s read, then nothing for 10 s", n, q.Messages, queue)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return seen, nil
}
