-- release.lua: give back a hold whose order was never written (an orphan).
--
-- KEYS[1]  stock:product:{<pid>}
-- KEYS[2]  sold:product:{<pid>}
-- KEYS[3]  holds:{<pid>}      the tracked holds
-- KEYS[4]  holdinfo:{<pid>}   order no -> <qty>|<claim key>
-- KEYS[5]  the claim named in the hold's info (idem:order:… or idem:ref:…)
-- KEYS[6]  rebuild:{<pid>}    present while a rebuild from the ledger fences the product
-- KEYS[7]  rules:{<pid>}      the sale rules (field limit: the per-buyer holding limit)
-- KEYS[8]  held:{<pid>}       buyer -> units held, kept while the limit is above 0
-- KEYS[9]  holdbuyer:{<pid>}  order no -> buyer: the hold's units go back to that buyer's count
-- KEYS[10] couponuse:{<pid>}  coupon code -> uses on the product
-- KEYS[11] couponbuyer:{<pid>} <code>|<buyer> -> the buyer's uses of it
-- KEYS[12] holdcoupon:{<pid>} order no -> the coupon whose use the hold claimed
-- ARGV[1]  the order number of the hold
--
-- Returns 1 when the hold was still tracked: it is removed from KEYS[3] and KEYS[4], the coupon
-- use it claimed (if any) goes back, its qty goes back from sold to stock if the product's
-- stock key exists, and the claim KEYS[5] is deleted if it still points at ARGV[1] (so the
-- buyer's key can be used again). Returns 0, changing nothing, when the hold is not tracked
-- (released, forgotten, cancelled, or dropped by a rebuild). Returns -1, changing nothing,
-- while KEYS[6] exists. An error reply, changing nothing, when the hold's info is malformed or
-- names another claim than KEYS[5].
--
-- Why atomic: checking the hold, removing it and returning its units must be one step, or two
-- sweepers (or a sweeper and cancel.lua) could both see it and return the units (or the
-- coupon's use) twice. Removing the hold is what makes a second run (another sweeper, a client
-- re-send after a lost reply) return 0 and change nothing.

if #KEYS ~= 12 then
  return redis.error_reply('ERR release.lua: want 12 keys, got ' .. #KEYS)
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return -1
end
local info = redis.call('HGET', KEYS[4], ARGV[1])
if not info then
  return 0
end
local qty, claimKey = string.match(info, '^([1-9]%d*)|(.+)$')
if not qty then
  return redis.error_reply('ERR release.lua: malformed hold info')
end
if claimKey ~= KEYS[5] then
  return redis.error_reply('ERR release.lua: the hold belongs to another claim key')
end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local buyer = redis.call('HGET', KEYS[9], ARGV[1])
if buyer then
  redis.call('HDEL', KEYS[9], ARGV[1])
  local limit = tonumber(redis.call('HGET', KEYS[7], 'limit') or '0')
  if limit and limit > 0 and redis.call('HINCRBY', KEYS[8], buyer, -tonumber(qty)) <= 0 then
    redis.call('HDEL', KEYS[8], buyer)
  end
end
-- The coupon use the hold claimed (KEYS[12]) goes back with it: the code's count and the
-- buyer's, a count that reaches 0 deleted.
local code = redis.call('HGET', KEYS[12], ARGV[1])
if code then
  redis.call('HDEL', KEYS[12], ARGV[1])
  if redis.call('HINCRBY', KEYS[10], code, -1) <= 0 then
    redis.call('HDEL', KEYS[10], code)
  end
  if buyer and redis.call('HINCRBY', KEYS[11], code .. '|' .. buyer, -1) <= 0 then
    redis.call('HDEL', KEYS[11], code .. '|' .. buyer)
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCRBY', KEYS[1], qty)
  redis.call('DECRBY', KEYS[2], qty)
end
local claim = redis.call('GET', KEYS[5])
if claim then
  local sep = string.find(claim, '|', 1, true)
  if sep and string.sub(claim, 1, sep - 1) == ARGV[1] then
    redis.call('DEL', KEYS[5])
  end
end
return 1
