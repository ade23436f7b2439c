-- forget.lua: stop tracking the holds of orders that were written.
--
-- KEYS[1]  holds:{<pid>}      the tracked holds
-- KEYS[2]  holdinfo:{<pid>}   order no -> <qty>|<claim key>
-- KEYS[3]  holdbuyer:{<pid>}  order no -> buyer (the buyer's holding count stays: the units
--                             now follow the order, and its close or refund gives them back)
-- KEYS[4]  holdcoupon:{<pid>} order no -> coupon (the coupon's uses stay: the use now follows
--                             the order, and its close gives it back through apply.lua)
-- ARGV[1]  an order number; ARGV[2], ... more of them (at least one)
--
-- Returns how many of the orders were tracked. Unknown numbers are ignored, so running it again
-- changes nothing. An error reply without any order number.
--
-- Why atomic: the sorted set and the hashes change together, so no hold is ever listed without
-- its qty, nor kept in a hash after leaving the set (a coupon left in KEYS[4] would be given
-- back by a later cancel of a new hold of the same order, and again by the order's close).

if #KEYS ~= 4 then
  return redis.error_reply('ERR forget.lua: want 4 keys, got ' .. #KEYS)
end
if #ARGV == 0 then
  return redis.error_reply('ERR forget.lua: at least one order number is required')
end
local n = redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
redis.call('HDEL', KEYS[3], unpack(ARGV))
redis.call('HDEL', KEYS[4], unpack(ARGV))
return n
