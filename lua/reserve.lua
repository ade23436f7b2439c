-- reserve.lua: claim an idempotency key and take qty units of one product.
--
-- KEYS[1]  stock:product:{<pid>}    reservable count (missing: the gate does not know the product)
-- KEYS[2]  sold:product:{<pid>}     reserved-or-sold count
-- KEYS[3]  frozen:product:{<pid>}   present while the product is frozen
-- KEYS[4]  the claim: idem:order:{<pid>}:<buyer>:<key>, or idem:ref:{<pid>}:<ref> when the
--          reservation has no idempotency key
-- ARGV[1]  qty: a positive integer
-- ARGV[2]  the claim's value: <order no>|<fingerprint>|<qty> (qty equal to ARGV[1], so that
--          cancel.lua returns exactly what this script took)
-- ARGV[3]  the claim's TTL in milliseconds: a positive integer
--
-- Returns {code, claim, left}, checked in this order:
--   {2, <existing claim value>, stock or 0}  Replayed: KEYS[4] is already claimed; nothing changed
--   {5, "", 0}                               GateMissing: no stock key; a missing key is never
--                                            "unlimited"; nothing changed
--   {4, "", stock}                           Frozen: nothing changed
--   {3, "", stock}                           SoldOut: stock < qty; nothing changed
--   {1, "", stock after}                     Reserved: stock -= qty, sold += qty, claim set
-- An error reply, before anything is read or written, when ARGV is malformed: a bad qty must
-- never reach DECRBY, where a negative number would add stock.
--
-- Why atomic: the claim and the stock move together. Two separate commands would leave a window
-- where the key is claimed without stock taken (a replay points at an order that holds nothing)
-- or stock is taken without the key (a double click takes it twice); and the check-then-take of
-- the stock would oversell under concurrent buyers.
--
-- Running it twice with the same arguments (a client that re-sends after a lost reply) is
-- harmless: the second run finds its own claim and answers Replayed with the same order number.

local qty, claim, ttl = ARGV[1], ARGV[2], ARGV[3]
if not (qty and string.match(qty, '^[1-9]%d*$') and #qty <= 19) then
  return redis.error_reply('ERR reserve.lua: qty must be a positive integer, got ' .. tostring(qty))
end
if not (claim and string.match(claim, '^[^|]*|.*|' .. qty .. '$')) then
  return redis.error_reply('ERR reserve.lua: claim value must be <order no>|<fingerprint>|<qty>')
end
if not (ttl and string.match(ttl, '^[1-9]%d*$')) then
  return redis.error_reply('ERR reserve.lua: claim TTL must be a positive integer of milliseconds')
end

local stock = redis.call('GET', KEYS[1])
local left = 0
if stock then
  left = tonumber(stock)
  if not left then
    return redis.error_reply('ERR reserve.lua: stock is not an integer')
  end
end

local existing = redis.call('GET', KEYS[4])
if existing then
  return {2, existing, left}
end
if not stock then
  return {5, '', 0}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {4, '', left}
end
if left < tonumber(qty) then
  return {3, '', left}
end
left = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
redis.call('SET', KEYS[4], claim, 'PX', ttl)
return {1, '', left}
