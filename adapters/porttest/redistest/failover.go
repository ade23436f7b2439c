package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cardshop/adapters/lab/netfault"
	"cardshop/adapters/porttest"
)

// FailoverMaster is the master name the Sentinel of a Failover set monitors.
const FailoverMaster = "cardshop"

// Failover is a Redis primary, one replica and one Sentinel of the test's own (own ports, own
// directory, nothing on disk), stopped with the test: killing its primary harms nothing else.
type Failover struct {
	Primary, Replica, Sentinel string // host:port of each
	// Link, in a partitionable set, is a TCP proxy in front of the primary: the replica and the
	// Sentinel know the primary by its address only (so the Sentinel never "fixes" the
	// replica's master), and Link.Cut partitions the primary from both while a client on
	// Primary keeps writing to it, what the replica will never see. Nil otherwise.
	Link  *netfault.Proxy
	procs map[string]*exec.Cmd
	dir   string
}

// StartFailover starts the set and waits until the Sentinel monitors the primary and knows the
// replica. It stops the test as porttest.RequireService says when redis-server is missing.
func StartFailover(t testing.TB, partitionable bool) *Failover {
	t.Helper()
	_, err := exec.LookPath("redis-server")
	porttest.RequireService(t, "redis-server (for a Sentinel set of the test's own)", err)
	dir := t.TempDir()
	f := &Failover{procs: map[string]*exec.Cmd{}, dir: dir}
	for _, d := range []string{"primary", "replica"} { // a full sync writes its RDB there
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.Primary, f.Replica, f.Sentinel = freePort(t), freePort(t), freePort(t)
	// The replica's full sync starts at once (the default waits 5 s for more replicas).
	f.start(t, dir, "primary", "--port", port(f.Primary), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", filepath.Join(dir, "primary"), "--repl-diskless-sync-delay", "0")
	waitPing(t, f.Primary)
	known := f.Primary // the primary's address the replica and the Sentinel use
	if partitionable {
		f.Link = netfault.NewProxy(t, f.Primary)
		known = f.Link.Addr()
	}
	linkHost, linkPort, _ := net.SplitHostPort(known)
	f.start(t, dir, "replica", "--port", port(f.Replica), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", filepath.Join(dir, "replica"),
		"--replicaof", linkHost, linkPort, "--replica-announce-ip", "127.0.0.1", "--replica-announce-port", port(f.Replica))
	waitPing(t, f.Replica)
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %s 1\n"+
		"sentinel down-after-milliseconds %s 500\nsentinel failover-timeout %s 5000\n",
		port(f.Sentinel), dir, FailoverMaster, port(known), FailoverMaster, FailoverMaster)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	f.start(t, dir, "sentinel", conf, "--sentinel")
	s := redis.NewSentinelClient(&redis.Options{Addr: f.Sentinel})
	defer s.Close()
	// The Sentinel reads the primary's INFO every 10 s: a replica that linked up just after one
	// read is known at the next, so the wait allows three reads and a loaded machine.
	f.wait(t, 40*time.Second, "the Sentinel to know the replica", func(ctx context.Context) bool {
		reps, err := s.Replicas(ctx, FailoverMaster).Result()
		if err != nil || len(reps) == 0 {
			return false
		}
		r := redis.NewClient(&redis.Options{Addr: f.Replica})
		defer r.Close()
		info, err := r.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	return f
}

func (f *Failover) start(t testing.TB, dir, name string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (%s): %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	f.procs[name] = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})
}

// Client is a go-redis failover client of the set (through its Sentinel), closed with the test.
func (f *Failover) Client(t testing.TB) *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: FailoverMaster, SentinelAddrs: []string{f.Sentinel},
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// KillPrimary sends SIGKILL to the primary.
func (f *Failover) KillPrimary() { _ = f.procs["primary"].Process.Signal(syscall.SIGKILL) }

// WaitPromoted waits until the Sentinel names the replica as the master.
func (f *Failover) WaitPromoted(t testing.TB) {
	t.Helper()
	s := redis.NewSentinelClient(&redis.Options{Addr: f.Sentinel})
	defer s.Close()
	f.wait(t, 30*time.Second, "the Sentinel to promote the replica", func(ctx context.Context) bool {
		addr, err := s.GetMasterAddrByName(ctx, FailoverMaster).Result()
		if err != nil || len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != f.Replica {
			return false
		}
		r := redis.NewClient(&redis.Options{Addr: f.Replica})
		defer r.Close()
		role, err := r.Do(ctx, "role").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
}

// wait is wait with the set's logs printed when it gives up, so a failure tells its cause.
func (f *Failover) wait(t testing.TB, limit time.Duration, what string, ok func(context.Context) bool) {
	t.Helper()
	if waitUntil(limit, ok) {
		return
	}
	for _, name := range []string{"primary", "replica", "sentinel"} {
		b, _ := os.ReadFile(filepath.Join(f.dir, name+".log"))
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("%s.log (tail):\n%s", name, b)
	}
	t.Fatalf("waited %s for %s", limit, what)
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func waitPing(t testing.TB, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	wait(t, 10*time.Second, "redis-server on "+addr, func(ctx context.Context) bool { return c.Ping(ctx).Err() == nil })
}

func wait(t testing.TB, limit time.Duration, what string, ok func(context.Context) bool) {
	t.Helper()
	if !waitUntil(limit, ok) {
		t.Fatalf("waited %s for %s", limit, what)
	}
}

// waitUntil polls ok (each call given a second) until it holds or limit has passed.
func waitUntil(limit time.Duration, ok func(context.Context) bool) bool {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := ok(ctx)
		cancel()
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
