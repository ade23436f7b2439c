package memory

import (
	"context"
	"maps"
	"sort"

	"cardshop/domain"
)

// channelRepo keeps the payment channels' settings in the process's memory, secrets included
// in the clear like every code of the memory ledger: nothing of it outlives the process.
type channelRepo struct{ s *store }

func (r channelRepo) Channels(_ context.Context) ([]domain.ChannelSettings, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.ChannelSettings, 0, len(r.s.data.payChannels))
	for _, c := range r.s.data.payChannels {
		out = append(out, copyChannel(c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out, nil
}

// Save stores s when the stored version is s.Version-1, as the table's conditional update
// does.
func (r channelRepo) Save(_ context.Context, s domain.ChannelSettings) (bool, error) {
	if err := s.Check(); err != nil {
		return false, err
	}
	if s.Version < 1 {
		return false, domain.Invalid("version", "must be at least 1")
	}
	release, err := r.s.acquire()
	if err != nil {
		return false, err
	}
	defer release()
	if r.s.data.payChannels[s.Provider].Version != s.Version-1 {
		return false, nil
	}
	s.UpdatedAt = s.UpdatedAt.UTC()
	put(r.s, r.s.data.payChannels, s.Provider, copyChannel(s))
	return true, nil
}

// copyChannel copies c's maps: a stored channel never shares them with a caller.
func copyChannel(c domain.ChannelSettings) domain.ChannelSettings {
	c.Fields, c.Secrets = maps.Clone(c.Fields), maps.Clone(c.Secrets)
	if c.Fields == nil {
		c.Fields = map[string]string{}
	}
	if c.Secrets == nil {
		c.Secrets = map[string]domain.Secret{}
	}
	return c
}
