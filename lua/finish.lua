-- finish.lua: write a product's counters rebuilt from the ledger and lift the fence.
--
-- KEYS[1]  stock:product:{<pid>}
-- KEYS[2]  sold:product:{<pid>}
-- KEYS[3]  frozen:product:{<pid>}
-- KEYS[4]  rebuild:{<pid>}    the fence fence.lua set
-- KEYS[5]  holds:{<pid>}      the tracked holds
-- KEYS[6]  holdinfo:{<pid>}   order no -> <qty>|<claim key>
-- KEYS[7]  rules:{<pid>}      the sale rules, overwritten
-- KEYS[8]  held:{<pid>}       buyer -> units held, rewritten
-- KEYS[9]  holdbuyer:{<pid>}  order no -> buyer of each tracked hold
-- KEYS[10] couponuse:{<pid>}   coupon code -> uses, rewritten
-- KEYS[11] couponbuyer:{<pid>} <code>|<buyer> -> the buyer's uses, rewritten
-- KEYS[12] holdcoupon:{<pid>}  order no -> coupon of each tracked hold that claimed one
-- KEYS[13…] markers gate:applied:{<pid>}:<ref> of the changes the new counters already count
-- ARGV[1]  the rebuild's token
-- ARGV[2]  stock: an integer
-- ARGV[3]  sold: an integer
-- ARGV[4]  frozen: 1 to freeze, 0 to leave the flag as it is
-- ARGV[5]  the markers' TTL in milliseconds: a positive integer
-- ARGV[6]  starts, ARGV[7] ends (unix ms, 0: no bound), ARGV[8] limit (units per buyer, 0: none)
-- ARGV[9]  n: how many order numbers follow
-- ARGV[10] h: how many buyer, units pairs follow the order numbers
-- ARGV[11] u: how many code, uses pairs follow those
-- ARGV[12…11+n] order numbers of the holds the new counters already count (their orders are
--          written): they stop being tracked, as forget.lua does
-- then h pairs buyer, units (a positive integer): what each buyer holds in the ledger's orders
-- then u pairs code, uses (a positive integer): the coupons' uses on the product, the holds
--          still tracked included (the caller adds them: fence.lua listed each one's coupon)
-- then the rest, pairs <code>|<buyer>, uses (a positive integer): each buyer's uses
--
-- Returns 1: counters and rules set, holds dropped, markers set, the flag set when ARGV[4] is
-- 1, the holding counts rewritten (only with a limit: the ledger's pairs plus the units of the
-- holds still tracked, by their buyer), the coupon counts replaced by the pairs given (the
-- dropped holds' coupons forgotten with them), the fence deleted.
-- Returns 0, writing nothing, when the fence is gone or held under another token (it expired:
-- changes went on meanwhile, and these counters may no longer be right). An error reply, before
-- anything is written, when ARGV is malformed.
--
-- A rebuild never clears the frozen flag: an operator's or an inconsistency's freeze that landed
-- after the ledger was read must stand; unfreezing is SetFrozen's alone.
--
-- Why atomic: the counters (the coupon counts too), the markers and the end of the fence must
-- appear together. A reservation between them would see the new stock before the changes it
-- counts are marked (the relay could count them again) or the fence lifted before the counters
-- are written; and a counted hold must stop being tracked while the fence still keeps out a new
-- hold of the same order number (a retried late attempt), which dropping it afterwards could
-- forget.

local function integer(s)
  return s and (s == '0' or string.match(s, '^-?[1-9]%d*$')) and #s <= 20
end

if #KEYS < 12 then
  return redis.error_reply('ERR finish.lua: want at least 12 keys, got ' .. #KEYS)
end
local token, stock, sold, frozen, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local starts, ends, limit, n, h, u = ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
if not (integer(stock) and integer(sold)) then
  return redis.error_reply('ERR finish.lua: stock and sold must be integers')
end
if frozen ~= '0' and frozen ~= '1' then
  return redis.error_reply('ERR finish.lua: frozen must be 0 or 1')
end
if not (ttl and string.match(ttl, '^[1-9]%d*$')) then
  return redis.error_reply('ERR finish.lua: marker TTL must be a positive integer of milliseconds')
end
if not (integer(starts) and integer(ends) and integer(limit) and integer(n) and integer(h) and integer(u)) then
  return redis.error_reply('ERR finish.lua: rules and the numbers of holds and pairs must be integers')
end
local drops, helds, codes = tonumber(n), tonumber(h), tonumber(u)
-- first: the first buyer, units pair; uses: the first code, uses pair; buyers: the first
-- <code>|<buyer>, uses pair.
local first = 12 + drops
local uses = first + 2 * helds
local buyers = uses + 2 * codes
if drops < 0 or helds < 0 or codes < 0 or buyers - 1 > #ARGV or (#ARGV - buyers + 1) % 2 ~= 0 then
  return redis.error_reply('ERR finish.lua: want n order numbers, then h and u pairs, then pairs')
end
for i = first + 1, #ARGV, 2 do
  if not string.match(ARGV[i], '^[1-9]%d*$') or #ARGV[i] > 18 then
    return redis.error_reply('ERR finish.lua: units and uses must be positive integers')
  end
end
if redis.call('GET', KEYS[4]) ~= token then
  return 0
end
redis.call('SET', KEYS[1], stock)
redis.call('SET', KEYS[2], sold)
if frozen == '1' then
  redis.call('SET', KEYS[3], '1')
end
for i = 12, 11 + drops, 1000 do
  local last = math.min(i + 999, 11 + drops)
  redis.call('ZREM', KEYS[5], unpack(ARGV, i, last))
  redis.call('HDEL', KEYS[6], unpack(ARGV, i, last))
  redis.call('HDEL', KEYS[9], unpack(ARGV, i, last))
  redis.call('HDEL', KEYS[12], unpack(ARGV, i, last))
end
redis.call('HSET', KEYS[7], 'starts', starts, 'ends', ends, 'limit', limit)
redis.call('DEL', KEYS[8])
if tonumber(limit) > 0 then
  for i = first, uses - 1, 2 do
    redis.call('HINCRBY', KEYS[8], ARGV[i], ARGV[i + 1])
  end
  -- The holds still tracked: reservations whose orders the ledger did not show yet.
  local kept = redis.call('HGETALL', KEYS[6])
  for i = 1, #kept, 2 do
    local buyer = redis.call('HGET', KEYS[9], kept[i])
    local qty = string.match(kept[i + 1], '^([1-9]%d*)|')
    if buyer and qty then
      redis.call('HINCRBY', KEYS[8], buyer, qty)
    end
  end
end
redis.call('DEL', KEYS[10], KEYS[11])
for i = uses, buyers - 1, 1000 do
  redis.call('HSET', KEYS[10], unpack(ARGV, i, math.min(i + 999, buyers - 1)))
end
for i = buyers, #ARGV, 1000 do
  redis.call('HSET', KEYS[11], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
for i = 13, #KEYS do
  redis.call('SET', KEYS[i], '1', 'PX', ttl)
end
redis.call('DEL', KEYS[4])
return 1
