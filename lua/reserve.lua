-- reserve.lua: claim an idempotency key and take qty units of one product.
--
-- KEYS[1]  stock:product:{<pid>}    reservable count (missing: the gate does not know the product)
-- KEYS[2]  sold:product:{<pid>}     reserved-or-sold count
-- KEYS[3]  frozen:product:{<pid>}   present while the product is frozen
-- KEYS[4]  the claim: idem:order:{<pid>}:<buyer>:<key>, or idem:ref:{<pid>}:<ref> when the
--          reservation has no idempotency key
-- KEYS[5]  holds:{<pid>}            sorted set: order no scored by Redis's TIME at the reservation (ms)
-- KEYS[6]  holdinfo:{<pid>}         hash: order no -> <qty>|<claim key>
-- KEYS[7]  budget:{<pid>}:<buyer>   units the buyer reserved in the current window
-- KEYS[8]  rebuild:{<pid>}          present while a rebuild from the ledger fences the product
-- KEYS[9]  rules:{<pid>}            hash of the sale rules: starts, ends (unix ms by Redis's clock,
--                                   0 or absent: no bound), limit (units per buyer, 0: none)
-- KEYS[10] held:{<pid>}             hash: buyer -> units held in PENDING and PAID orders and in
--                                   reservations; kept only while the product has a limit
-- KEYS[11] holdbuyer:{<pid>}        hash: order no -> buyer, for every tracked hold
-- KEYS[12] soldout:{<pid>}          present while a sold-out lease (soldout.lua) stands: new
--                                   orders are sold out until it expires, whatever the stock
-- KEYS[13] claimbits:v1:{<pid>}     bitmap: bit ARGV[9] is set for every claim of a buyer's key,
--                                   so that an instance holding a lease can tell that a key was
--                                   never claimed without asking
-- KEYS[14] couponuse:{<pid>}        hash: coupon code -> orders of the product that use it
-- KEYS[15] couponbuyer:{<pid>}      hash: <code>|<buyer> -> the buyer's uses of it on the product
-- KEYS[16] holdcoupon:{<pid>}       hash: order no -> coupon code, for every tracked hold that
--                                   claimed a coupon (what giving the hold back gives back)
-- ARGV[1]  qty: a positive integer
-- ARGV[2]  the claim's value: <order no>|<fingerprint>|<qty> (qty equal to ARGV[1], so that
--          cancel.lua returns exactly what this script took)
-- ARGV[3]  the claim's TTL in milliseconds: a positive integer
-- ARGV[4]  "1" to track the reservation as a hold, scored by this server's clock (TIME), or ""
--          for one that is not tracked
-- ARGV[5]  the buyer's cap of units per window: a non-negative integer, 0 = no cap
-- ARGV[6]  the budget window in milliseconds: a positive integer when ARGV[5] > 0, else "0"
-- ARGV[7]  the buyer (may be empty)
-- ARGV[8]  which rules apply: "1" for a new order (the sale window, the sold-out lease and the
--          buyer's limit); "L" for a late payment's re-reservation (the sale's end, judged by
--          TIME, and the buyer's limit: the order was placed inside the window, so its start has
--          passed, and a lease only holds back new orders); "L<ms>" the same with the end judged
--          at unix ms <ms>, the instant the payment was accepted (an operator's fulfil)
-- ARGV[9]  the claim's bit in KEYS[13]: an integer in [0, 131072) (the gate hashes the claim
--          key, so Redis never has to)
-- ARGV[10] the coupon code to claim a use of: ^[A-Z0-9_-]{3,32}$, or "" for none
-- ARGV[11] how many uses of the coupon the product allows: a non-negative integer, 0 = no limit
-- ARGV[12] how many of them one buyer may have: a non-negative integer, 0 = no limit
-- KEYS[5..16] and ARGV[4..12] may be left out together (4 keys, 3 arguments): then nothing is
-- tracked, there is no cap, no rule, no lease, no coupon and no fence check (the load check's
-- script ceiling, on a scratch product). The gate always sends all of them, and tracks every
-- reservation.
--
-- Returns {code, claim, left}, checked in this order:
--   {2, <existing claim value>, stock or 0}  Replayed: KEYS[4] is already claimed; nothing changed
--   {7, "", stock or 0}                      Rebuilding: KEYS[8] exists; nothing changed
--   {5, "", 0}                               GateMissing: no stock key; a missing key is never
--                                            "unlimited"; nothing changed
--   {4, "", stock}                           Frozen: nothing changed
--   {8, <ms until the start>, stock}         NotStarted: Redis's TIME is before starts (a new
--                                            order only); nothing changed
--   {9, "", stock}                           Ended: TIME (or a late one's <ms>) is at or after
--                                            ends; nothing changed
--   {3, "", 0}                               SoldOut under a lease: KEYS[12] exists (a new order
--                                            only: a late payment is not fenced); nothing changed
--   {10, "", stock}                          HoldingLimit: held + qty > limit, new or late (the
--                                            buyer's count now: what the buyer's other orders
--                                            hold); nothing changed
--   {6, "", stock}                           BuyerLimit: budget + qty > cap; nothing changed
--   {11, "", stock}                          CouponUsedUp: with a coupon and a limit ARGV[11] > 0,
--                                            its uses + 1 > the limit; nothing changed
--   {12, "", stock}                          CouponBuyerLimit: with a coupon, a buyer and a limit
--                                            ARGV[12] > 0, the buyer's uses + 1 > it; nothing
--                                            changed
--   {3, "", stock}                           SoldOut: stock < qty; nothing changed
--   {1, "", stock after}                     Reserved: stock -= qty, sold += qty, claim set; with
--                                            the hold flag, the order is added to KEYS[5] and
--                                            KEYS[6] (and the buyer in KEYS[11]); a new order's
--                                            claim sets bit ARGV[9] of KEYS[13], which then
--                                            lives at least as long as the claim; with a cap,
--                                            KEYS[7] += qty and, if it has no expiry yet, it
--                                            expires after ARGV[6] ms; with a limit, the buyer's
--                                            count in KEYS[10] += qty; with a coupon, its uses
--                                            in KEYS[14] += 1, the buyer's (when there is one)
--                                            in KEYS[15] += 1, and, with the hold flag, the
--                                            order's coupon in KEYS[16]
-- An error reply, before anything is read or written, when ARGV is malformed: a bad qty must
-- never reach DECRBY, where a negative number would add stock.
--
-- A sold-out lease (soldout.lua) is checked after the window, so that an answer given under it
-- is the one an instance holding the lease gives without asking: SoldOut, for any buyer.
--
-- The sale window is judged by Redis's clock, so every instance agrees at the instant of the
-- start whatever its own clock says.
--
-- A late payment's re-reservation claims the order's coupon again, under the same limits: the
-- close that returned the order's stock returned its use too.
--
-- Why atomic: the claim, the stock, the hold, the budget, the holding count and the coupon's
-- uses move together. Two separate commands would leave a window where the key is claimed
-- without stock taken (a replay points at an order that holds nothing) or stock is taken
-- without the key (a double click takes it twice) or without the hold (a crash before the
-- order is written would leak it for good); the check-then-take of the stock would oversell
-- under concurrent buyers, the check-then-add of the budget or the holding count would let
-- concurrent requests of one buyer pass the cap or the limit, and the check-then-add of a
-- coupon's uses would let concurrent orders use it more often than it allows. The uses are
-- counted per product, next to its stock, so that on a Cluster they share the script's slot.
--
-- Running it twice with the same arguments (a client that re-sends after a lost reply) is
-- harmless: the second run finds its own claim and answers Replayed with the same order number,
-- before the hold, the budget or the coupon is touched.

local qty, claim, ttl = ARGV[1], ARGV[2], ARGV[3]
local score, cap, window = ARGV[4], ARGV[5], ARGV[6]
local buyer, enforce, bit = ARGV[7], ARGV[8], ARGV[9]
local coupon, uses, perbuyer = ARGV[10], ARGV[11], ARGV[12]
local full = #KEYS == 16
if #KEYS == 4 and #ARGV == 3 then
  score, cap, window, buyer, enforce, bit = '', '0', '0', '', '', '0'
  coupon, uses, perbuyer = '', '0', '0'
elseif not full then
  return redis.error_reply('ERR reserve.lua: want 16 keys (or 4 with 3 arguments), got ' .. #KEYS)
end
if not (bit and string.match(bit, '^%d+$') and #bit <= 6 and tonumber(bit) < 131072) then
  return redis.error_reply('ERR reserve.lua: the claim bit must be an integer in [0, 131072)')
end
-- late: a late payment's re-reservation; at: the instant its end is judged at (nil: TIME).
local late, at = false, nil
if full and enforce ~= '1' then
  if not (enforce and string.match(enforce, '^L%d*$') and #enforce <= 16) then
    return redis.error_reply('ERR reserve.lua: the rules flag must be "1", "L" or "L<unix ms>"')
  end
  late = true
  if #enforce > 1 then
    at = tonumber(string.sub(enforce, 2))
  end
end
if not buyer then
  return redis.error_reply('ERR reserve.lua: want a buyer (may be empty)')
end
if not (coupon and (coupon == '' or (#coupon >= 3 and #coupon <= 32 and string.match(coupon, '^[A-Z0-9_%-]+$')))) then
  return redis.error_reply('ERR reserve.lua: the coupon must be 3 to 32 of A-Z, 0-9, "_" and "-", or empty')
end
if not (uses and string.match(uses, '^%d+$') and #uses <= 18 and perbuyer and string.match(perbuyer, '^%d+$') and #perbuyer <= 18) then
  return redis.error_reply('ERR reserve.lua: the coupon limits must be non-negative integers')
end
if not (qty and string.match(qty, '^[1-9]%d*$') and #qty <= 19) then
  return redis.error_reply('ERR reserve.lua: qty must be a positive integer, got ' .. tostring(qty))
end
if not (claim and string.match(claim, '^[^|]*|.*|' .. qty .. '$')) then
  return redis.error_reply('ERR reserve.lua: claim value must be <order no>|<fingerprint>|<qty>')
end
if not (ttl and string.match(ttl, '^[1-9]%d*$')) then
  return redis.error_reply('ERR reserve.lua: claim TTL must be a positive integer of milliseconds')
end
if not (score and (score == '' or score == '1')) then
  return redis.error_reply('ERR reserve.lua: the hold flag must be "1" or empty')
end
if not (cap and string.match(cap, '^%d+$') and #cap <= 18) then
  return redis.error_reply('ERR reserve.lua: buyer cap must be a non-negative integer')
end
local capped = tonumber(cap) > 0
if capped and not (window and string.match(window, '^[1-9]%d*$')) then
  return redis.error_reply('ERR reserve.lua: budget window must be a positive integer of milliseconds')
end

-- The string keys this script reads, in one call (each redis.call costs the script about as
-- much as a small command): stock, claim, frozen, and in the full form the rebuild fence and
-- the sold-out lease. They are only ever written as strings, so a value means "present".
local got
if full then
  got = redis.call('MGET', KEYS[1], KEYS[4], KEYS[3], KEYS[8], KEYS[12])
else
  got = redis.call('MGET', KEYS[1], KEYS[4], KEYS[3])
end
local stock, existing, frozen, fenced, leased = got[1], got[2], got[3], got[4], got[5]
local left = 0
if stock then
  left = tonumber(stock)
  if not left then
    return redis.error_reply('ERR reserve.lua: stock is not an integer')
  end
end

if existing then
  return {2, existing, left}
end
if fenced then
  return {7, '', left}
end
if not stock then
  return {5, '', 0}
end
if frozen then
  return {4, '', left}
end
local limit = 0
if full then
  local rules = redis.call('HMGET', KEYS[9], 'starts', 'ends', 'limit')
  local starts, ends = tonumber(rules[1] or '0'), tonumber(rules[2] or '0')
  limit = tonumber(rules[3] or '0')
  if not (starts and ends and limit) then
    return redis.error_reply('ERR reserve.lua: malformed sale rules')
  end
  if enforce == '1' and (starts > 0 or ends > 0) then
    local now = redis.call('TIME')
    local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    if starts > 0 and ms < starts then
      return {8, string.format('%d', starts - ms), left}
    end
    if ends > 0 and ms >= ends then
      return {9, '', left}
    end
  elseif late and ends > 0 then
    -- A payment that comes after the sale's end buys nothing, whenever its order was placed.
    if not at then
      local now = redis.call('TIME')
      at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    end
    if at >= ends then
      return {9, '', left}
    end
  end
  if enforce == '1' and leased then
    return {3, '', 0}
  end
  -- New or late, the buyer may not hold more than the limit: a late payment is checked against
  -- what the buyer holds now, so expired orders paid late cannot add up past it.
  if limit > 0 and buyer ~= '' then
    local held = tonumber(redis.call('HGET', KEYS[10], buyer) or '0')
    if not held then
      return redis.error_reply('ERR reserve.lua: holding count is not an integer')
    end
    if held + tonumber(qty) > limit then
      return {10, '', left}
    end
  end
end
if capped then
  local used = tonumber(redis.call('GET', KEYS[7]) or '0')
  if not used then
    return redis.error_reply('ERR reserve.lua: budget is not an integer')
  end
  if used + tonumber(qty) > tonumber(cap) then
    return {6, '', left}
  end
end
-- The buyer's field in KEYS[15]: the code cannot hold '|', so <code>|<buyer> splits one way.
local couponBuyer
if coupon ~= '' then
  if buyer ~= '' then
    couponBuyer = coupon .. '|' .. buyer
  end
  local most, each = tonumber(uses), tonumber(perbuyer)
  if most > 0 then
    local n = tonumber(redis.call('HGET', KEYS[14], coupon) or '0')
    if not n then
      return redis.error_reply('ERR reserve.lua: coupon uses are not an integer')
    end
    if n + 1 > most then
      return {11, '', left}
    end
  end
  if couponBuyer and each > 0 then
    local n = tonumber(redis.call('HGET', KEYS[15], couponBuyer) or '0')
    if not n then
      return redis.error_reply("ERR reserve.lua: the buyer's coupon uses are not an integer")
    end
    if n + 1 > each then
      return {12, '', left}
    end
  end
end
if left < tonumber(qty) then
  return {3, '', left}
end
left = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
redis.call('SET', KEYS[4], claim, 'PX', ttl)
if full and enforce == '1' then
  redis.call('SETBIT', KEYS[13], bit, 1)
  -- The bitmap must outlive every claim it marks. Extended by a tenth more than needed, so
  -- that the claims of the next tenth of a TTL find it long enough and skip the PEXPIRE.
  local need = tonumber(ttl)
  if redis.call('PTTL', KEYS[13]) < need then
    redis.call('PEXPIRE', KEYS[13], need + math.floor(need / 10))
  end
end
if score ~= '' then
  -- Redis's clock, not the caller's: an instance whose clock is behind must not make its
  -- reservations look old to another instance's orphan sweep.
  local now = redis.call('TIME')
  score = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
  local order = string.sub(claim, 1, string.find(claim, '|', 1, true) - 1)
  redis.call('ZADD', KEYS[5], score, order)
  redis.call('HSET', KEYS[6], order, qty .. '|' .. KEYS[4])
  if buyer ~= '' then
    redis.call('HSET', KEYS[11], order, buyer)
  end
  if coupon ~= '' then
    redis.call('HSET', KEYS[16], order, coupon)
  end
end
if coupon ~= '' then
  redis.call('HINCRBY', KEYS[14], coupon, 1)
  if couponBuyer then
    redis.call('HINCRBY', KEYS[15], couponBuyer, 1)
  end
end
if limit > 0 and buyer ~= '' then
  redis.call('HINCRBY', KEYS[10], buyer, qty)
end
if capped then
  redis.call('INCRBY', KEYS[7], qty)
  if redis.call('PTTL', KEYS[7]) < 0 then
    redis.call('PEXPIRE', KEYS[7], window)
  end
end
return {1, '', left}
