package memory

import (
	"context"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"cardshop/domain"
)

type alertChannels struct{ s *store }

// maxChannelError bounds a stored failure, in characters, as the port says.
const maxChannelError = 500

func (r alertChannels) nameTaken(name string, except int64) bool {
	for id, c := range r.s.data.channels {
		if id != except && c.Name == name {
			return true
		}
	}
	return false
}

// Create stores c under the next id; ids are not reused after a rollback.
func (r alertChannels) Create(_ context.Context, c domain.AlertChannel) (int64, error) {
	release, err := r.s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	if r.nameTaken(c.Name, 0) {
		return 0, domain.ErrAlertChannelExists
	}
	d := r.s.data
	d.lastChannel++
	c.ID = d.lastChannel
	c.Kinds = slices.Clone(c.Kinds)
	c.LastOKAt, c.LastErrorAt, c.LastError = time.Time{}, time.Time{}, ""
	c.UpdatedAt = c.UpdatedAt.UTC()
	put(r.s, d.channels, c.ID, c)
	return c.ID, nil
}

// Update replaces the settings, keeping the outcome and, for an empty c.Secret, the secret.
func (r alertChannels) Update(_ context.Context, c domain.AlertChannel) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	old, ok := r.s.data.channels[c.ID]
	if !ok {
		return domain.ErrAlertChannelNotFound
	}
	if r.nameTaken(c.Name, c.ID) {
		return domain.ErrAlertChannelExists
	}
	n := old
	n.Name, n.Target, n.Kinds, n.Stock, n.Enabled, n.UpdatedAt = c.Name, c.Target, slices.Clone(c.Kinds), c.Stock, c.Enabled, c.UpdatedAt.UTC()
	if c.Secret != "" {
		n.Secret = c.Secret
	}
	put(r.s, r.s.data.channels, c.ID, n)
	return nil
}

// Channel returns a copy of the channel.
func (r alertChannels) Channel(_ context.Context, id int64) (domain.AlertChannel, error) {
	release, err := r.s.acquire()
	if err != nil {
		return domain.AlertChannel{}, err
	}
	defer release()
	c, ok := r.s.data.channels[id]
	if !ok {
		return domain.AlertChannel{}, domain.ErrAlertChannelNotFound
	}
	c.Kinds = slices.Clone(c.Kinds)
	return c, nil
}

// Channels returns copies of every channel by id.
func (r alertChannels) Channels(_ context.Context) ([]domain.AlertChannel, error) {
	release, err := r.s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	out := make([]domain.AlertChannel, 0, len(r.s.data.channels))
	for _, c := range r.s.data.channels {
		c.Kinds = slices.Clone(c.Kinds)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Remove deletes the channel.
func (r alertChannels) Remove(_ context.Context, id int64) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	if _, ok := r.s.data.channels[id]; !ok {
		return domain.ErrAlertChannelNotFound
	}
	del(r.s, r.s.data.channels, id)
	return nil
}

// RecordOutcome stores the outcome on the channel, when it still exists.
func (r alertChannels) RecordOutcome(_ context.Context, id int64, at time.Time, failure string) error {
	release, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer release()
	c, ok := r.s.data.channels[id]
	if !ok {
		return nil
	}
	if failure == "" {
		c.LastOKAt = at.UTC()
	} else {
		if utf8.RuneCountInString(failure) > maxChannelError {
			failure = string([]rune(failure)[:maxChannelError])
		}
		c.LastErrorAt, c.LastError = at.UTC(), failure
	}
	put(r.s, r.s.data.channels, id, c)
	return nil
}
