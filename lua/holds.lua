-- holds.lua: list a product's oldest tracked holds.
--
-- KEYS[1]  holds:{<pid>}      sorted set: order no scored by Redis's TIME at the reservation (unix ms)
-- KEYS[2]  holdinfo:{<pid>}   hash: order no -> <qty>|<claim key>
-- KEYS[3]  holdbuyer:{<pid>}  hash: order no -> buyer
-- KEYS[4]  holdcoupon:{<pid>} hash: order no -> the coupon whose use the hold claimed
-- ARGV[1]  the minimum age in milliseconds (a non-negative integer): holds scored at or before
--          this server's TIME minus it are listed
-- ARGV[2]  limit: a positive integer
--
-- Returns a flat array {order no, score, info, buyer, coupon, order no, ...}, five values a
-- hold, oldest first (equal scores by order no), at most ARGV[2] holds; buyer and coupon are ""
-- when the hold has none. A member without info (which reserve.lua never writes) is returned
-- with info "" for the caller to skip. An error reply when ARGV is malformed.
--
-- Why atomic: the sorted set and the hashes are read in one step, so every listed hold comes
-- with the qty it holds: between two separate reads a release or a cancel could remove it.

if #KEYS ~= 4 then
  return redis.error_reply('ERR holds.lua: want 4 keys, got ' .. #KEYS)
end
local age, limit = ARGV[1], ARGV[2]
if not (age and string.match(age, '^%d+$') and #age <= 15) then
  return redis.error_reply('ERR holds.lua: minimum age must be a non-negative integer of milliseconds')
end
if not (limit and string.match(limit, '^[1-9]%d*$')) then
  return redis.error_reply('ERR holds.lua: limit must be a positive integer')
end
local now = redis.call('TIME')
local cutoff = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(age)
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', cutoff), 'WITHSCORES', 'LIMIT', 0, limit)
local out = {}
for i = 1, #found, 2 do
  out[#out + 1] = found[i]
  out[#out + 1] = found[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], found[i]) or ''
  out[#out + 1] = redis.call('HGET', KEYS[3], found[i]) or ''
  out[#out + 1] = redis.call('HGET', KEYS[4], found[i]) or ''
end
return out
