-- fence.lua: close a product's gate for a rebuild from the ledger, and list its holds.
--
-- KEYS[1]  rebuild:{<pid>}    the fence: <token>, expiring after ARGV[2] ms
-- KEYS[2]  holds:{<pid>}      sorted set: order no scored by the reservation's time (ms)
-- KEYS[3]  holdinfo:{<pid>}   hash: order no -> <qty>|<claim key>
-- KEYS[4]  holdbuyer:{<pid>}  hash: order no -> buyer
-- KEYS[5]  holdcoupon:{<pid>} hash: order no -> the coupon whose use the hold claimed
-- ARGV[1]  the rebuild's token: a non-empty string
-- ARGV[2]  the fence's TTL in milliseconds: a positive integer
--
-- Returns {1, order, score, info, buyer, coupon, order, …}: the fence is set (or renewed, for
-- the same token) and every hold of the product is listed, five values a hold (buyer and coupon
-- "" when it has none: the rebuild counts a kept hold's coupon use). Returns {0}, changing
-- nothing, when the fence is held under another token. An error reply, before anything is
-- written, when ARGV is malformed.
--
-- While the fence stands, reserve.lua answers Rebuilding (replays excepted) and apply.lua,
-- cancel.lua and release.lua answer -1 and change nothing, so between this script and
-- finish.lua no unit moves at the gate except through forget.lua (which changes no counter).
--
-- Why atomic: setting the fence and listing the holds in one step means the list is exactly
-- the set of reservations whose units the rebuild has to account for: none can be added after
-- it (Reserve is fenced) and none given back (Cancel and ReleaseOrphan are fenced).

if #KEYS ~= 5 then
  return redis.error_reply('ERR fence.lua: want 5 keys, got ' .. #KEYS)
end
local token, ttl = ARGV[1], ARGV[2]
if not token or token == '' then
  return redis.error_reply('ERR fence.lua: token must not be empty')
end
if not (ttl and string.match(ttl, '^[1-9]%d*$')) then
  return redis.error_reply('ERR fence.lua: TTL must be a positive integer of milliseconds')
end
local held = redis.call('GET', KEYS[1])
if held and held ~= token then
  return {0}
end
redis.call('SET', KEYS[1], token, 'PX', ttl)
local out = {1}
local found = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #found, 2 do
  out[#out + 1] = found[i]
  out[#out + 1] = found[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[3], found[i]) or ''
  out[#out + 1] = redis.call('HGET', KEYS[4], found[i]) or ''
  out[#out + 1] = redis.call('HGET', KEYS[5], found[i]) or ''
end
return out
