package main

// The chaos mode's Redis failover scenario: a primary with two replicas under one Sentinel,
// started for the scenario, the instance on CARDSHOP_REDIS_MASTER (and so replica acks), the
// primary SIGKILLed mid-sale.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	faultRedisFailover = "redis-failover" // SIGKILL the Sentinel set's primary: a replica is promoted
	sentinelMaster     = "cardshop-chaos"
)

// sentinelSet is a Redis primary, two replicas and a Sentinel of the chaos mode's own.
type sentinelSet struct {
	primary, sentinel string
	replicas          []string
	procs             map[string]*exec.Cmd
	exits             map[string]chan struct{}
}

func startSentinelSet(ctx context.Context, dir string) (*sentinelSet, error) {
	s := &sentinelSet{procs: map[string]*exec.Cmd{}, exits: map[string]chan struct{}{}}
	addrs, err := freeAddrs(4)
	if err != nil {
		return nil, err
	}
	s.primary, s.replicas, s.sentinel = addrs[0], addrs[1:3], addrs[3]
	node := func(name, addr string, extra ...string) error {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		args := append([]string{"--port", port(addr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d,
			"--maxclients", "10000"}, extra...)
		return s.start(ctx, filepath.Join(d, "redis.log"), name, addr, args...)
	}
	// No delay before the initial sync (Redis waits 5 s by default for more replicas to join).
	if err := node("primary", s.primary, "--repl-diskless-sync-delay", "0"); err != nil {
		s.stop()
		return nil, err
	}
	for i, r := range s.replicas {
		if err := node(fmt.Sprintf("replica-%d", i+1), r, "--replicaof", "127.0.0.1", port(s.primary)); err != nil {
			s.stop()
			return nil, err
		}
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n",
		port(s.sentinel), dir, sentinelMaster, port(s.primary), sentinelMaster, sentinelMaster)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.start(ctx, filepath.Join(dir, "sentinel.log"), "sentinel", s.sentinel, conf, "--sentinel"); err != nil {
		s.stop()
		return nil, err
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel})
	defer sc.Close()
	pc := redis.NewClient(&redis.Options{Addr: s.primary})
	defer pc.Close()
	if err := waitUntil(ctx, 30*time.Second, "both replicas in sync and known to the Sentinel", func() error {
		info, err := pc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if n := strings.Count(info, "state=online"); n < len(s.replicas) {
			return fmt.Errorf("%d replicas online", n)
		}
		reps, err := sc.Replicas(ctx, sentinelMaster).Result()
		if err != nil {
			return err
		}
		if len(reps) < len(s.replicas) {
			return fmt.Errorf("%d replicas known to the Sentinel", len(reps))
		}
		return nil
	}); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *sentinelSet) start(ctx context.Context, log, name, addr string, args ...string) error {
	cmd, exited, err := startRedisServer(ctx, log, name, addr, args...)
	if cmd != nil {
		s.procs[name], s.exits[name] = cmd, exited
	}
	return err
}

func (s *sentinelSet) stop() {
	for name, cmd := range s.procs {
		kill(cmd, s.exits[name])
	}
}

// client is a go-redis failover client of the set (the harness's reads of the gate).
func (s *sentinelSet) client() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sentinelMaster, SentinelAddrs: []string{s.sentinel}, PoolSize: 64})
}

// failOver SIGKILLs the primary and waits until the Sentinel names another one.
func (s *sentinelSet) failOver(ctx context.Context) error {
	kill(s.procs["primary"], s.exits["primary"])
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinel})
	defer sc.Close()
	return waitUntil(ctx, 60*time.Second, "the Sentinel to promote a replica", func() error {
		a, err := sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
		if err != nil {
			return err
		}
		if len(a) != 2 || net.JoinHostPort(a[0], a[1]) == s.primary {
			return fmt.Errorf("master still %v", a)
		}
		return nil
	})
}

// useSentinelSet starts the scenario's Sentinel set and its own instance on it (the shared
// instances are stopped: they run on the standalone Redis), and points the harness's Redis
// reads at the set; the returned function undoes it.
func (e *env) useSentinelSet(ctx context.Context) (*instance, func(), error) {
	for len(e.instances) > 0 {
		e.stopInstance(e.instances[len(e.instances)-1])
	}
	set, err := startSentinelSet(ctx, filepath.Join(e.dir, "sentinel-set"))
	if err != nil {
		return nil, nil, err
	}
	old, c := e.rdb, set.client()
	e.rdb, e.sentinels = c, set
	restore := func() {
		for len(e.instances) > 0 {
			e.stopInstance(e.instances[len(e.instances)-1])
		}
		e.rdb, e.sentinels = old, nil
		_ = c.Close()
		set.stop()
	}
	in, err := e.startInstance(ctx, "sentinel-instance", "127.0.0.1:6091", "CARDSHOP_REDIS_ADDRS="+set.sentinel,
		"CARDSHOP_REDIS_MASTER="+sentinelMaster)
	if err != nil {
		restore()
		return nil, nil, err
	}
	return in, restore, nil
}
