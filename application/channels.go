package application

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cardshop/domain"
)

// The audit log's actions of the payment channels.
const (
	ActionChannelSave    = "payment_channel.save"
	ActionChannelDisable = "payment_channel.disable"
	ActionChannelTest    = "payment_channel.test"
)

// DefaultChannelsEvery is how often the service reads the stored channels again (see
// Channels.Reload) when its configuration does not say.
const DefaultChannelsEvery = 3 * time.Second

// ChannelField is one setting of a provider configured in the console.
type ChannelField struct {
	Name      string
	Secret    bool     // stored encrypted, never shown back (a fingerprint only)
	Required  bool     // the channel cannot be enabled without it
	Choices   []string // the values allowed; empty: free text
	Multiline bool     // a PEM key or certificate
}

// ChannelSpec is what a provider configured in the console takes.
type ChannelSpec struct {
	Provider domain.Provider
	Fields   []ChannelField
}

// field returns the spec's field of that name.
func (s ChannelSpec) field(name string) (ChannelField, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return ChannelField{}, false
}

// ChannelKit builds payment gateways from channel settings with the provider adapters' own
// constructors, so a setting they would refuse is refused when it is saved.
type ChannelKit interface {
	// Specs lists the providers the console may configure, with their fields.
	Specs() []ChannelSpec
	// Build returns the gateway of s, or an error saying in plain words what is wrong (a
	// malformed key, an unknown sign variant, a bad URL). It must not keep s.
	Build(s domain.ChannelSettings) (domain.PaymentGateway, error)
}

// gatewaySet is the payment providers in force: immutable, swapped whole (core.gateways), so
// that a request reads one consistent set without a lock while the channels change.
type gatewaySet struct {
	// all answers notifications, queries, closes and refunds: the environment's providers,
	// and every console channel whose settings build, enabled or not (a disabled channel still
	// completes the payments it already has).
	all map[domain.Provider]domain.PaymentGateway
	// offered are the providers new payments may use, by name: the environment's and the
	// enabled console channels.
	offered []domain.Provider
	// built are the console channels in the set: the stored version each was built from.
	built map[domain.Provider]builtChannel
}

type builtChannel struct {
	version int64
	enabled bool
	gw      domain.PaymentGateway // nil: the stored settings do not build (problem says why)
	problem string
}

func newGatewaySet(env map[domain.Provider]domain.PaymentGateway, built map[domain.Provider]builtChannel) *gatewaySet {
	set := &gatewaySet{all: maps.Clone(env), built: built}
	if set.all == nil {
		set.all = map[domain.Provider]domain.PaymentGateway{}
	}
	set.offered = slices.Sorted(maps.Keys(env))
	for p, b := range built {
		if b.gw == nil {
			continue
		}
		set.all[p] = b.gw
		if b.enabled {
			set.offered = append(set.offered, p)
		}
	}
	slices.Sort(set.offered)
	return set
}

// offer returns the gateway of a provider offered to new payments.
func (g *gatewaySet) offer(p domain.Provider) (domain.PaymentGateway, bool) {
	if !slices.Contains(g.offered, p) {
		return nil, false
	}
	gw, ok := g.all[p]
	return gw, ok
}

// gateway returns the provider's gateway for a payment that exists: offered or not.
func (s *core) gateway(p domain.Provider) (domain.PaymentGateway, bool) {
	gw, ok := s.gateways.Load().all[p]
	return gw, ok
}

// Channels runs the payment channels configured in the console: their settings (secrets
// stored encrypted, never shown back), their validation when saved, a test call, and the
// swap of the providers in force when the stored settings change, on every instance (Reload,
// which each instance runs every few seconds).
//
// The environment and the console combine so: a provider configured by the environment is
// managed there (shown read-only, a console save refused, a stored channel of it ignored); any
// other provider the kit knows can be configured in the console. An enabled channel is offered
// to new orders; a disabled one is not, but keeps answering its notifications, queries and
// refunds for the payments it already has, as long as its stored settings build.
type Channels struct {
	*core
	kit ChannelKit               // nil: no console channels
	env map[domain.Provider]bool // the providers the environment configures

	mu sync.Mutex // one Reload at a time
}

func newChannels(c *core, env map[domain.Provider]domain.PaymentGateway, kit ChannelKit) *Channels {
	e := make(map[domain.Provider]bool, len(env))
	for p := range env {
		e[p] = true
	}
	return &Channels{core: c, kit: kit, env: e}
}

// ChannelSource is where a provider's settings come from.
type ChannelSource string

// The sources of a provider's settings.
const (
	SourceNone        ChannelSource = ""            // not configured
	SourceEnvironment ChannelSource = "environment" // CARDSHOP_* variables: read-only in the console
	SourceConsole     ChannelSource = "console"     // stored by an operator
)

// ChannelView is one provider as the console shows it: never a secret, only its fingerprint.
type ChannelView struct {
	Provider domain.Provider
	Source   ChannelSource
	// Enabled: offered to new orders. Active: its gateway is in force (answers notifications,
	// queries and refunds), enabled or not.
	Enabled, Active bool
	Spec            ChannelSpec       // empty for a provider only the environment knows
	Fields          map[string]string // the plain settings
	Fingerprints    map[string]string // each stored secret's fingerprint (Fingerprint)
	Version         int64             // the stored version (0: never saved)
	UpdatedAt       time.Time
	UpdatedBy       domain.OperatorName
	// Problem says why the stored settings are not in force on this instance (they no longer
	// build, e.g. after a change of the shop's currency); empty when they are, or not enabled.
	Problem string
}

// Fingerprint names a secret without giving it away: the first 8 hex digits of its SHA-256
// and its last four characters when it is long enough that they tell nothing useful (at least
// 24); a PEM key shows its digest only.
func Fingerprint(s domain.Secret) string {
	v := s.Reveal()
	sum := sha256.Sum256([]byte(v))
	out := "sha256:" + hex.EncodeToString(sum[:4])
	if utf8.RuneCountInString(v) >= 24 && !strings.Contains(v, "-----") {
		r := []rune(v)
		out += " …" + string(r[len(r)-4:])
	}
	return out
}

// List returns every provider the environment or the kit knows, by name.
func (s *Channels) List(ctx context.Context) ([]ChannelView, error) {
	stored, err := s.stored(ctx)
	if err != nil {
		return nil, err
	}
	set := s.gateways.Load()
	views := map[domain.Provider]ChannelView{}
	for p := range s.env {
		views[p] = ChannelView{Provider: p, Source: SourceEnvironment, Enabled: true, Active: true}
	}
	for _, spec := range s.specs() {
		if s.env[spec.Provider] {
			v := views[spec.Provider]
			v.Spec = spec
			views[spec.Provider] = v
			continue
		}
		v := ChannelView{Provider: spec.Provider, Spec: spec, Fields: map[string]string{}, Fingerprints: map[string]string{}}
		if c, ok := stored[spec.Provider]; ok {
			v.Source, v.Enabled, v.Version, v.UpdatedAt, v.UpdatedBy = SourceConsole, c.Enabled, c.Version, c.UpdatedAt, c.UpdatedBy
			v.Fields = maps.Clone(c.Fields)
			for name, sec := range c.Secrets {
				v.Fingerprints[name] = Fingerprint(sec)
			}
			// A version this instance has not read yet shows no problem: it is read within seconds.
			if b, in := set.built[spec.Provider]; in {
				v.Active = b.gw != nil
				if b.version == c.Version {
					v.Problem = b.problem
				}
			}
		}
		views[spec.Provider] = v
	}
	out := slices.Collect(maps.Values(views))
	slices.SortFunc(out, func(a, b ChannelView) int { return strings.Compare(string(a.Provider), string(b.Provider)) })
	return out, nil
}

func (s *Channels) specs() []ChannelSpec {
	if s.kit == nil {
		return nil
	}
	return s.kit.Specs()
}

func (s *Channels) spec(p domain.Provider) (ChannelSpec, bool) {
	for _, sp := range s.specs() {
		if sp.Provider == p {
			return sp, true
		}
	}
	return ChannelSpec{}, false
}

// stored reads the stored channels by provider.
func (s *Channels) stored(ctx context.Context) (map[domain.Provider]domain.ChannelSettings, error) {
	all, err := s.ledger.Channels().Channels(ctx)
	if err != nil {
		return nil, fmt.Errorf("load payment channels: %w", err)
	}
	out := make(map[domain.Provider]domain.ChannelSettings, len(all))
	for _, c := range all {
		out[c.Provider] = c
	}
	return out, nil
}

// ChannelChange is a save of a channel's settings from the console.
type ChannelChange struct {
	Provider domain.Provider
	Enabled  bool
	// Fields are the plain settings as typed: an empty one is unset.
	Fields map[string]string
	// Secrets are the secret settings typed anew: an empty or missing one keeps the stored
	// secret (the form never shows it back).
	Secrets map[string]string
	// Version is the stored version the change was made on (0: never saved); another save
	// since refuses this one.
	Version int64
}

// ErrChannelChanged refuses a save made on a version another save has replaced (it matches
// domain.ErrInvalidInput).
var ErrChannelChanged = domain.Invalid("version", "the channel was changed meanwhile: reload it and apply your change again")

// Save validates and stores a channel's settings, then applies them on this instance at once
// (the others within their reload interval). A channel cannot be enabled without every
// required field; complete settings are built with the provider adapter's own constructor and
// refused, storing nothing, when it refuses them or the provider cannot charge the shop's
// currency. A provider the environment configures is refused.
//
// Errors: ErrInvalidInput (a *domain.ValidationError naming the field, in plain words),
// ErrChannelChanged, ErrUnavailable.
func (s *Channels) Save(ctx context.Context, by domain.OperatorName, ch ChannelChange) (domain.ChannelSettings, error) {
	spec, err := s.configurable(ch.Provider)
	if err != nil {
		return domain.ChannelSettings{}, err
	}
	stored, err := s.stored(ctx)
	if err != nil {
		return domain.ChannelSettings{}, err
	}
	cur := stored[ch.Provider]
	if cur.Version != ch.Version {
		return domain.ChannelSettings{}, ErrChannelChanged
	}
	next := domain.ChannelSettings{Provider: ch.Provider, Enabled: ch.Enabled, Fields: map[string]string{},
		Secrets: map[string]domain.Secret{}, Version: cur.Version + 1, UpdatedAt: s.clock.Now(), UpdatedBy: by}
	for name := range ch.Fields {
		if f, ok := spec.field(name); !ok || f.Secret {
			return domain.ChannelSettings{}, domain.Invalid(name, "not a setting of "+string(ch.Provider))
		}
	}
	for name := range ch.Secrets {
		if f, ok := spec.field(name); !ok || !f.Secret {
			return domain.ChannelSettings{}, domain.Invalid(name, "not a secret setting of "+string(ch.Provider))
		}
	}
	var missing []string
	for _, f := range spec.Fields {
		if f.Secret {
			v := ch.Secrets[f.Name]
			if !f.Multiline {
				v = strings.TrimSpace(v)
			}
			switch {
			case strings.TrimSpace(v) != "":
				next.Secrets[f.Name] = domain.Secret(v)
			case cur.Secrets[f.Name] != "":
				next.Secrets[f.Name] = cur.Secrets[f.Name]
			}
		} else if v := strings.TrimSpace(ch.Fields[f.Name]); v != "" {
			if len(f.Choices) > 0 && !slices.Contains(f.Choices, v) {
				return domain.ChannelSettings{}, domain.Invalid(f.Name, "want one of "+strings.Join(f.Choices, ", "))
			}
			next.Fields[f.Name] = v
		}
		_, plain := next.Fields[f.Name]
		_, secret := next.Secrets[f.Name]
		if f.Required && !plain && !secret {
			missing = append(missing, f.Name)
		}
	}
	if err := next.Check(); err != nil {
		return domain.ChannelSettings{}, err
	}
	if len(missing) > 0 && next.Enabled {
		return domain.ChannelSettings{}, domain.Invalid(missing[0],
			"required to enable the channel (missing: "+strings.Join(missing, ", ")+")")
	}
	if len(missing) == 0 {
		if err := s.check(next); err != nil {
			return domain.ChannelSettings{}, err
		}
	}
	won, err := s.ledger.Channels().Save(ctx, next)
	if err != nil {
		return domain.ChannelSettings{}, fmt.Errorf("store payment channel %s: %w", ch.Provider, err)
	}
	if !won {
		return domain.ChannelSettings{}, ErrChannelChanged
	}
	if err := s.Reload(ctx); err != nil {
		s.log.WarnContext(ctx, "payment channels saved but not reloaded here yet", "provider", ch.Provider, "err", err)
	}
	return next, nil
}

// Disable stops offering a console channel to new orders (its payments still complete).
// Errors as Save's.
func (s *Channels) Disable(ctx context.Context, by domain.OperatorName, p domain.Provider, version int64) error {
	if _, err := s.configurable(p); err != nil {
		return err
	}
	stored, err := s.stored(ctx)
	if err != nil {
		return err
	}
	cur, ok := stored[p]
	if !ok {
		return domain.Invalid("provider", string(p)+" is not configured")
	}
	if cur.Version != version {
		return ErrChannelChanged
	}
	next := cur
	next.Enabled, next.Version, next.UpdatedAt, next.UpdatedBy = false, cur.Version+1, s.clock.Now(), by
	won, err := s.ledger.Channels().Save(ctx, next)
	if err != nil {
		return fmt.Errorf("store payment channel %s: %w", p, err)
	}
	if !won {
		return ErrChannelChanged
	}
	if err := s.Reload(ctx); err != nil {
		s.log.WarnContext(ctx, "payment channels saved but not reloaded here yet", "provider", p, "err", err)
	}
	return nil
}

// configurable returns the spec of a provider the console may configure.
func (s *Channels) configurable(p domain.Provider) (ChannelSpec, error) {
	if s.env[p] {
		return ChannelSpec{}, domain.Invalid("provider", string(p)+" is configured by environment variables: change it there")
	}
	spec, ok := s.spec(p)
	if !ok {
		return ChannelSpec{}, domain.Invalid("provider", "not a payment provider the console configures")
	}
	return spec, nil
}

// check builds the settings' gateway and checks it charges the shop's currency.
func (s *Channels) check(c domain.ChannelSettings) error {
	gw, err := s.kit.Build(c)
	if err != nil {
		return domain.Invalid("settings", plainReason(err))
	}
	if !gw.Supports(s.cfg.Currency) {
		return domain.Invalid("settings", fmt.Sprintf("%s cannot charge %s, the shop's currency", c.Provider, s.cfg.Currency))
	}
	return nil
}

// plainReason is an adapter's refusal as one short line.
func plainReason(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if r := []rune(msg); len(r) > 300 {
		msg = string(r[:300]) + "…"
	}
	return msg
}

// Reload reads the stored channels and, when any changed since the set in force was built,
// builds the changed ones and swaps the set whole: a payment in flight keeps the gateway it
// took, the next request takes the new one. Stored settings that no longer build leave that
// channel out (its problem shown in List and logged) and the others in force. Every instance
// runs it every few seconds; a save runs it at once. It reports whether the set changed.
func (s *Channels) Reload(ctx context.Context) error {
	_, err := s.reload(ctx)
	return err
}

// ReloadPass is Reload for a periodic worker: 1 when the set changed.
func (s *Channels) ReloadPass(ctx context.Context) (int, error) {
	changed, err := s.reload(ctx)
	if changed {
		return 1, err
	}
	return 0, err
}

func (s *Channels) reload(ctx context.Context) (bool, error) {
	if s.kit == nil {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := s.stored(ctx)
	if err != nil {
		return false, err
	}
	cur := s.gateways.Load()
	built := make(map[domain.Provider]builtChannel, len(stored))
	changed := false
	for p, c := range stored {
		if s.env[p] {
			continue // the environment manages it
		}
		if _, known := s.spec(p); !known {
			continue
		}
		if b, ok := cur.built[p]; ok && b.version == c.Version {
			built[p] = b
			continue
		}
		changed = true
		b := builtChannel{version: c.Version, enabled: c.Enabled}
		gw, err := s.kit.Build(c)
		switch {
		case err != nil:
			b.problem = plainReason(err)
		case !gw.Supports(s.cfg.Currency):
			b.problem = fmt.Sprintf("%s cannot charge %s, the shop's currency", p, s.cfg.Currency)
		default:
			b.gw = gw
		}
		if b.problem != "" && c.Enabled {
			s.log.WarnContext(ctx, "payment channel not in force: its stored settings do not build", "provider", p,
				"version", c.Version, "problem", b.problem)
		}
		built[p] = b
	}
	changed = changed || len(built) != len(cur.built)
	if !changed {
		return false, nil
	}
	env := make(map[domain.Provider]domain.PaymentGateway, len(s.env))
	for p := range s.env {
		env[p] = cur.all[p]
	}
	s.gateways.Store(newGatewaySet(env, built))
	s.log.InfoContext(ctx, "payment channels in force", "offered", s.gateways.Load().offered)
	return true, nil
}

// ChannelTest is what a test call of a channel found.
type ChannelTest struct {
	Provider domain.Provider
	OrderNo  domain.OrderNo // the made-up order asked about
	// Authenticated: the provider accepted the call's credentials and answered about the
	// order (not found, or unpaid). Reachable is false when it could not be reached.
	Authenticated, Reachable bool
	// Answer is the provider's answer, in its words where it gave some (never a secret).
	Answer string
}

// Test makes one harmless authenticated call to the provider: a query of a made-up order
// number, which the provider answers with "no such order" (or "not paid") when the
// credentials are right and with a refusal when not. It tests the channel in force, or else
// the stored settings of a console channel not (yet) in force. It changes nothing.
//
// Errors: ErrProviderUnknown (neither in force nor stored complete), ErrUnavailable (the
// ledger).
func (s *Channels) Test(ctx context.Context, p domain.Provider) (ChannelTest, error) {
	gw, ok := s.gateway(p)
	if !ok {
		stored, err := s.stored(ctx)
		if err != nil {
			return ChannelTest{}, err
		}
		c, has := stored[p]
		if !has || s.kit == nil {
			return ChannelTest{}, domain.ErrProviderUnknown
		}
		if gw, err = s.kit.Build(c); err != nil {
			return ChannelTest{Provider: p, Reachable: false, Answer: "the stored settings do not build: " + plainReason(err)}, nil
		}
	}
	now := s.clock.Now()
	no := domain.NewOrderNo(now, "channel-test", rand.Uint64()) //nolint:gosec // G404: a made-up order number, not a secret
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if pr, ok := gw.(domain.CredentialProber); ok {
		answer, err := pr.Probe(ctx, string(no))
		out := ChannelTest{Provider: p, OrderNo: no, Reachable: true, Authenticated: err == nil, Answer: answer}
		if err != nil {
			out.Reachable, out.Answer = !errors.Is(err, domain.ErrUnavailable), plainReason(err)
		}
		return out, nil
	}
	st, err := gw.Query(ctx, domain.Payment{OrderNo: no, Provider: p, Amount: 1, Currency: s.cfg.Currency,
		Status: domain.PaymentOpen, CreatedAt: now, UpdatedAt: now})
	out := ChannelTest{Provider: p, OrderNo: no, Reachable: true}
	switch {
	case err == nil:
		out.Authenticated, out.Answer = true, "the order is "+strings.ToLower(st.Outcome.String())
	case errors.Is(err, domain.ErrPaymentNotFound):
		out.Authenticated, out.Answer = true, plainReason(err)
	case errors.Is(err, domain.ErrUnavailable):
		out.Reachable, out.Answer = false, plainReason(err)
	default:
		out.Answer = plainReason(err)
	}
	return out, nil
}
