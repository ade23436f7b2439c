-- soldout.lua: grant a sold-out lease on a product whose stock is gone, and hand over the
-- bitmap of its claims, so that an instance may answer "sold out" without asking until the
-- lease ends.
--
-- KEYS[1]  stock:product:{<pid>}   reservable count
-- KEYS[2]  frozen:product:{<pid>}  present while the product is frozen
-- KEYS[3]  rebuild:{<pid>}         present while a rebuild fences the product
-- KEYS[4]  rules:{<pid>}           hash of the sale rules: starts, ends (unix ms by Redis's clock)
-- KEYS[5]  soldout:{<pid>}         the lease: present until it ends (by Redis's clock)
-- KEYS[6]  claimbits:v1:{<pid>}    bitmap of the product's buyers' claims (reserve.lua sets it)
-- ARGV[1]  the lease period in milliseconds: a positive integer
--
-- Returns {1, <ms the lease has left>, <bitmap, or "" when no claim is recorded>} when the lease
-- stands: set now, or already set (then extended, never shortened). Returns {0} and changes
-- nothing when reserve.lua would not answer SoldOut to every new order that has no claim: the
-- product is unknown (no stock key), has stock, is frozen, is fenced, has not started, or its
-- sale ends before the lease would. An error reply when ARGV is malformed.
--
-- A lease ends at the next multiple of ARGV[1] ms of Redis's clock (the one after it when that
-- is less than a quarter period away), so that units given back during a lease become
-- reservable at the latest 1.25 periods later: a lease is granted only while the stock is
-- below 1, and every instance's lease of the product ends at the same instant.
--
-- While the lease stands, reserve.lua answers SoldOut to every new order that has no claim
-- (a late payment's re-reservation is not fenced), so no claim is added to the bitmap: an
-- instance that holds the bitmap and finds a key's bit clear knows that Redis would answer
-- SoldOut to it, and answers so itself until its copy of the lease ends.
--
-- Why atomic: the stock check, the lease and the bitmap belong to one instant. A lease set
-- after a separate check could stand over units given back in between, which reserve.lua
-- would then refuse for a whole period without the stock ever having been 0 under the lease;
-- a bitmap read after the lease could miss a claim taken before it, and the instance would
-- answer "sold out" to the replay of an order that was placed.

if #KEYS ~= 6 then
  return redis.error_reply('ERR soldout.lua: want 6 keys, got ' .. #KEYS)
end
local period = ARGV[1]
if not (period and string.match(period, '^[1-9]%d*$') and #period <= 9) then
  return redis.error_reply('ERR soldout.lua: the lease period must be a positive integer of milliseconds')
end
period = tonumber(period)

local stock = redis.call('GET', KEYS[1])
if not stock then
  return {0}
end
local left = tonumber(stock)
if not left then
  return redis.error_reply('ERR soldout.lua: stock is not an integer')
end
if left >= 1 or redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then
  return {0}
end

local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ends = (math.floor(ms / period) + 1) * period
if ends - ms < period / 4 then
  ends = ends + period
end
local rules = redis.call('HMGET', KEYS[4], 'starts', 'ends')
local starts, closes = tonumber(rules[1] or '0'), tonumber(rules[2] or '0')
if not (starts and closes) then
  return redis.error_reply('ERR soldout.lua: malformed sale rules')
end
if (starts > 0 and ms < starts) or (closes > 0 and closes <= ends) then
  return {0}
end

local pttl = redis.call('PTTL', KEYS[5])
if pttl > 0 and ms + pttl > ends then
  ends = ms + pttl
end
redis.call('SET', KEYS[5], '1', 'PX', ends - ms)
return {1, ends - ms, redis.call('GET', KEYS[6]) or ''}
