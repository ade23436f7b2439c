-- forget.lua: stop tracking the holds of orders that were written.
--
-- KEYS[1]  holds:{<pid>}      the tracked holds
-- KEYS[2]  holdinfo:{<pid>}   order no -> <qty>|<claim key>
-- KEYS[3]  holdbuyer:{<pid>}  order no -> buyer (the buyer's holding count stays: the units
--                             now follow the order, and its close or refund gives them back)
-- ARGV[1]  an order number; ARGV[2], ... more of them (at least one)
--
-- Returns how many of the orders were tracked. Unknown numbers are ignored, so running it again
-- changes nothing. An error reply without any order number.
--
-- Why atomic: the sorted set and the hash change together, so no hold is ever listed without its
-- qty, nor kept in the hash after leaving the set.

if #KEYS ~= 3 then
  return redis.error_reply('ERR forget.lua: want 3 keys, got ' .. #KEYS)
end
if #ARGV == 0 then
  return redis.error_reply('ERR forget.lua: at least one order number is required')
end
local n = redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
redis.call('HDEL', KEYS[3], unpack(ARGV))
return n
