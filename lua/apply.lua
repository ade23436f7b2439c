-- apply.lua: add a change to a product's counters once per reference.
--
-- KEYS[1]  stock:product:{<pid>}
-- KEYS[2]  sold:product:{<pid>}
-- KEYS[3]  the marker: gate:applied:{<pid>}:<ref>
-- KEYS[4]  rebuild:{<pid>}  present while a rebuild from the ledger fences the product
-- KEYS[5]  rules:{<pid>}    the sale rules (field limit: the per-buyer holding limit)
-- KEYS[6]  held:{<pid>}     buyer -> units held, kept while the limit is above 0
-- KEYS[7]  couponuse:{<pid>}   coupon code -> uses on the product
-- KEYS[8]  couponbuyer:{<pid>} <code>|<buyer> -> the buyer's uses of it
-- ARGV[1]  dStock: a signed integer added to stock
-- ARGV[2]  dSold: a signed integer added to sold
-- ARGV[3]  the marker's TTL in milliseconds (7 days): a positive integer
-- ARGV[4]  the buyer whose holding count changes (may be empty)
-- ARGV[5]  dHeld: a signed integer added to the buyer's count, only while the limit is above 0
--          (a count that reaches 0 is deleted)
-- ARGV[6]  the coupon whose uses change: ^[A-Z0-9_-]{3,32}$, or "" for none
-- ARGV[7]  dUses: a signed integer added to the coupon's uses and, with a buyer, to the
--          buyer's (a count that reaches 0 or less is deleted); ignored without a coupon
--
-- Returns 1 when the change was applied (the counters, the holding count and the coupon's
-- uses moved, and the marker set), 0 when it was not: the product's stock key is missing (the
-- coupon's uses are left alone too), or the marker exists (already applied). Returns -1,
-- changing nothing, while KEYS[4] exists: the rebuild either counts this change (and marks it)
-- or not, and the relay applies it again after the fence. An error reply, before anything is
-- written, when ARGV is malformed.
--
-- A change that finds the stock key missing still sets its marker: the gate lost the product
-- (Redis restarted empty) and the rebuild that follows copies the ledger, which already counts
-- every committed change. Without the marker, a relay applying the same change after that
-- rebuild would count it twice (stock above the codes); with it, that second apply changes
-- nothing.
--
-- Why atomic: the marker check, the increments and the marker must be one step, or two
-- deliveries of one outbox message could both miss the marker and apply the change twice, or a
-- crash between the increments and the marker could leave a change applied but unrecorded. The
-- marker is also what makes a second run (a client re-send after a lost reply) return 0 and
-- change nothing.

local function integer(s)
  return s and (s == '0' or string.match(s, '^-?[1-9]%d*$')) and #s <= 20
end

local dStock, dSold, ttl, buyer, dHeld = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local coupon, dUses = ARGV[6], ARGV[7]
if not (integer(dStock) and integer(dSold) and integer(dHeld) and integer(dUses) and buyer) then
  return redis.error_reply('ERR apply.lua: deltas must be integers, and a buyer (maybe empty) given')
end
if not (coupon and (coupon == '' or (#coupon >= 3 and #coupon <= 32 and string.match(coupon, '^[A-Z0-9_%-]+$')))) then
  return redis.error_reply('ERR apply.lua: the coupon must be 3 to 32 of A-Z, 0-9, "_" and "-", or empty')
end
if not (ttl and string.match(ttl, '^[1-9]%d*$')) then
  return redis.error_reply('ERR apply.lua: marker TTL must be a positive integer of milliseconds')
end
if #KEYS ~= 8 then
  return redis.error_reply('ERR apply.lua: want 8 keys, got ' .. #KEYS)
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[3], '1', 'PX', ttl)
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
redis.call('INCRBY', KEYS[1], dStock)
redis.call('INCRBY', KEYS[2], dSold)
if buyer ~= '' and dHeld ~= '0' then
  local limit = tonumber(redis.call('HGET', KEYS[5], 'limit') or '0')
  if limit and limit > 0 and redis.call('HINCRBY', KEYS[6], buyer, dHeld) <= 0 then
    redis.call('HDEL', KEYS[6], buyer)
  end
end
if coupon ~= '' and dUses ~= '0' then
  if redis.call('HINCRBY', KEYS[7], coupon, dUses) <= 0 then
    redis.call('HDEL', KEYS[7], coupon)
  end
  if buyer ~= '' and redis.call('HINCRBY', KEYS[8], coupon .. '|' .. buyer, dUses) <= 0 then
    redis.call('HDEL', KEYS[8], coupon .. '|' .. buyer)
  end
end
redis.call('SET', KEYS[3], '1', 'PX', ttl)
return 1
