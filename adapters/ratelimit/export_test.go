package ratelimit

// Internals the external tests look at.
var Rate = rate

// RedisKey names the Redis key that holds key's limit on a limiter without a key prefix.
func RedisKey(key string) string { return (&Redis{}).redisKey(key) }

// Len returns how many keys m holds.
func Len(m *Memory) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tats)
}
