-- rebuild.lua: overwrite a product's counters and frozen flag (initialisation and repair).
--
-- KEYS[1]  stock:product:{<pid>}
-- KEYS[2]  sold:product:{<pid>}
-- KEYS[3]  frozen:product:{<pid>}
-- KEYS[4]  holds:{<pid>}      deleted: the new counters come from the ledger, which does not
-- KEYS[5]  holdinfo:{<pid>}   count reservations without an order, so releasing one of the old
--                             holds later would return its units twice
-- KEYS[6]  held:{<pid>}       deleted with them: holding counts start again from the rules
-- KEYS[7]  holdbuyer:{<pid>}  a new product's SetRules brings (nobody holds anything yet)
-- KEYS[8]  couponuse:{<pid>}   deleted too: a new product's coupons are used by no order yet,
-- KEYS[9]  couponbuyer:{<pid>} and the holds that claimed uses are gone
-- KEYS[10] holdcoupon:{<pid>}
-- ARGV[1]  stock: an integer
-- ARGV[2]  sold: an integer
-- ARGV[3]  frozen: 1 to freeze, 0 to clear the flag
--
-- Returns 1. An error reply, before anything is written, when ARGV is malformed. Claims, budgets
-- and applied markers are left alone.
--
-- Why atomic: a reservation running between separate writes could see the new stock with the old
-- sold (breaking stock + sold = live codes for reconciliation), sell from a product that the
-- rebuild is about to freeze, or add a hold that the rebuild then drops although its units are
-- counted in the new sold.

local function integer(s)
  return s and (s == '0' or string.match(s, '^-?[1-9]%d*$')) and #s <= 20
end

if #KEYS ~= 10 then
  return redis.error_reply('ERR rebuild.lua: want 10 keys, got ' .. #KEYS)
end
local stock, sold, frozen = ARGV[1], ARGV[2], ARGV[3]
if not (integer(stock) and integer(sold)) then
  return redis.error_reply('ERR rebuild.lua: stock and sold must be integers')
end
if frozen ~= '0' and frozen ~= '1' then
  return redis.error_reply('ERR rebuild.lua: frozen must be 0 or 1')
end
redis.call('SET', KEYS[1], stock)
redis.call('SET', KEYS[2], sold)
if frozen == '1' then
  redis.call('SET', KEYS[3], '1')
else
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10])
return 1
