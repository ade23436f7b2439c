package ratelimit

// Internals the external tests look at.
var (
	RedisKey = redisKey
	Rate     = rate
)

// Len returns how many keys m holds.
func Len(m *Memory) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tats)
}
