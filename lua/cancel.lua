-- cancel.lua: give back a reservation whose order could not be written.
--
-- KEYS[1]  stock:product:{<pid>}
-- KEYS[2]  sold:product:{<pid>}
-- KEYS[3]  the claim reserve.lua set: idem:order:{<pid>}:<buyer>:<key> or idem:ref:{<pid>}:<ref>
-- KEYS[4]  holds:{<pid>}      the tracked holds (order no scored by time)
-- KEYS[5]  holdinfo:{<pid>}   order no -> <qty>|<claim key>
-- KEYS[6]  rebuild:{<pid>}    present while a rebuild from the ledger fences the product
-- KEYS[7]  rules:{<pid>}      the sale rules (field limit: the per-buyer holding limit)
-- KEYS[8]  held:{<pid>}       buyer -> units held, kept while the limit is above 0
-- KEYS[9]  holdbuyer:{<pid>}  order no -> buyer: the hold's units go back to that buyer's count
-- KEYS[10] couponuse:{<pid>}  coupon code -> uses on the product
-- KEYS[11] couponbuyer:{<pid>} <code>|<buyer> -> the buyer's uses of it
-- KEYS[12] holdcoupon:{<pid>} order no -> the coupon whose use the hold claimed
-- ARGV[1]  the order number the reservation was made for
-- ARGV[2]  the reservation's fingerprint (a late reservation's attempt token)
--
-- Returns 1 when the claim exists, points at ARGV[1] with fingerprint ARGV[2], and the order's
-- hold is still tracked as made by this claim: the claim is deleted, the hold dropped, the
-- coupon use it claimed (if any) given back and, if the product's stock key still exists, the
-- claim's qty goes back from sold to stock. Returns 0, changing nothing, otherwise: no claim,
-- another order's or another attempt's claim, or a hold no longer tracked (its units follow the
-- order: forgotten, or counted by a rebuild). Returns -1, changing nothing, while KEYS[6]
-- exists. An error reply for a claim that does not end in its qty (not written by
-- reserve.lua); nothing changed.
--
-- Why atomic: reading the claim, deleting it, dropping its hold and returning its units must be
-- one step, or two concurrent cancels (or a cancel and release.lua) could both see the claim and
-- return the units (or the coupon's use) twice, and a Reserve slipping in between could replay
-- a claim whose units are already gone. Deleting the claim is what makes a second run (a retry,
-- or a client re-send after a lost reply) return 0 and change nothing. Checking the fingerprint
-- and the hold is what keeps a call from giving back units it did not take.

if #KEYS ~= 12 then
  return redis.error_reply('ERR cancel.lua: want 12 keys, got ' .. #KEYS)
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  return -1
end
local claim = redis.call('GET', KEYS[3])
if not claim then
  return 0
end
local order, fingerprint, qty = string.match(claim, '^([^|]*)|(.*)|([^|]*)$')
if not order or order ~= ARGV[1] then
  return 0
end
if not string.match(qty, '^[1-9]%d*$') then
  return redis.error_reply('ERR cancel.lua: malformed claim value')
end
if fingerprint ~= ARGV[2] then
  return 0
end
local info = redis.call('HGET', KEYS[5], ARGV[1])
if not info then
  return 0
end
local isep = string.find(info, '|', 1, true)
if not isep or string.sub(info, isep + 1) ~= KEYS[3] then
  return 0
end
redis.call('DEL', KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
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
return 1
