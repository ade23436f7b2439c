-- cancel.lua: give back a reservation whose order could not be written.
--
-- KEYS[1]  stock:product:{<pid>}
-- KEYS[2]  sold:product:{<pid>}
-- KEYS[3]  the claim reserve.lua set: idem:order:{<pid>}:<buyer>:<key> or idem:ref:{<pid>}:<ref>
-- KEYS[4]  holds:{<pid>}      the tracked holds (order no scored by time)
-- KEYS[5]  holdinfo:{<pid>}   order no -> <qty>|<claim key>
-- ARGV[1]  the order number the reservation was made for
--
-- Returns 1 when the claim existed and pointed at ARGV[1]: the claim is deleted, the order's hold
-- is dropped if it was made by this claim (a keyless claim of the same order leaves the keyed
-- reservation's hold alone) and, if the product's stock key still exists, the claim's qty goes
-- back from sold to stock. Returns 0, changing nothing, otherwise (no claim, or a claim of
-- another order). An error reply for a claim that does not end in its qty (not written by
-- reserve.lua); nothing changed.
--
-- Why atomic: reading the claim, deleting it, dropping its hold and returning its units must be
-- one step, or two concurrent cancels (or a cancel and release.lua) could both see the claim and
-- return the units twice, and a Reserve slipping in between could replay a claim whose units
-- are already gone. Deleting the claim is what makes a second run (a retry, or a client re-send
-- after a lost reply) return 0 and change nothing.

if #KEYS ~= 5 then
  return redis.error_reply('ERR cancel.lua: want 5 keys, got ' .. #KEYS)
end
local claim = redis.call('GET', KEYS[3])
if not claim then
  return 0
end
local sep = string.find(claim, '|', 1, true)
if not sep or string.sub(claim, 1, sep - 1) ~= ARGV[1] then
  return 0
end
local qty = string.match(claim, '|([1-9]%d*)$')
if not qty then
  return redis.error_reply('ERR cancel.lua: malformed claim value')
end
redis.call('DEL', KEYS[3])
local info = redis.call('HGET', KEYS[5], ARGV[1])
if info then
  local isep = string.find(info, '|', 1, true)
  if isep and string.sub(info, isep + 1) == KEYS[3] then
    redis.call('ZREM', KEYS[4], ARGV[1])
    redis.call('HDEL', KEYS[5], ARGV[1])
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCRBY', KEYS[1], qty)
  redis.call('DECRBY', KEYS[2], qty)
end
return 1
