-- ratelimit.lua: charge one request to a rate limit (GCRA, the generic cell rate algorithm).
--
-- KEYS[1]  rl:{<key>}  the limit's theoretical arrival time (TAT): microseconds of Redis's
--          clock at which the limit is back to empty; missing = empty. It expires when the TAT
--          passes, so an idle key costs nothing.
-- ARGV[1]  interval: microseconds between requests at the sustained rate (window / limit), a
--          positive integer
-- ARGV[2]  burst: limit * interval in microseconds, an integer >= interval: how far ahead of now
--          the TAT may run, i.e. how many requests may come at once
--
-- Returns {allowed, wait}:
--   {1, 0}     allowed: TAT = max(TAT, now) + interval, kept until it passes
--   {0, wait}  refused: nothing changed; wait is the microseconds until a request would be
--              allowed (the Retry-After)
-- An error reply, before anything is read or written, when ARGV is malformed.
--
-- Why atomic: the read of the TAT, the comparison and the write are one step. As separate
-- commands, two service instances would read the same TAT, both allow and both write: the limit
-- would hold per instance, not across them.
--
-- Time is Redis's own (TIME), never a caller's: instances with skewed clocks still agree, and a
-- key lives on one server (its hash tag names one slot), so one clock judges it. Redis replicates
-- the script's effects (the SET with its computed value), not the script, so TIME is safe here
-- (Redis 5 and later).
--
-- Running it twice (go-redis re-sends a script after a lost reply) charges the request twice:
-- the error is on the safe side for a limit, and Redis being unreachable fails open anyway.

local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
if not interval or interval < 1 or interval % 1 ~= 0 or not burst or burst < interval or burst % 1 ~= 0 then
  return redis.error_reply('ERR ratelimit.lua: interval and burst must be integers with 1 <= interval <= burst')
end

local t = redis.call('TIME')
-- Microseconds since the epoch are about 1.8e15, well inside a double's exact integers (2^53).
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat then
    return redis.error_reply('ERR ratelimit.lua: ' .. KEYS[1] .. ' does not hold a number')
  end
  if tat < now then
    tat = now
  end
end

local next_tat = tat + interval
local wait = next_tat - burst - now
if wait > 0 then
  return {0, wait}
end

-- string.format('%d'), not the number itself: redis.call turns a Lua number into text with
-- 14 significant digits, which would round a 16-digit TAT.
local ttl_ms = math.ceil((next_tat - now) / 1000)
redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', string.format('%d', ttl_ms))
return {1, 0}
