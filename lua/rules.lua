-- rules.lua: replace a product's sale rules (window and per-buyer holding limit).
--
-- KEYS[1]  rules:{<pid>}   hash: starts, ends (unix ms by Redis's clock, 0: no bound), limit
-- KEYS[2]  held:{<pid>}    buyer -> units held, kept only while the limit is above 0
-- KEYS[3]  rebuild:{<pid>} present while a rebuild from the ledger fences the product
-- ARGV[1]  starts, ARGV[2] ends, ARGV[3] limit: non-negative integers
--
-- Returns 1. Returns -1, writing nothing, while KEYS[3] exists: the rebuild writes the rules it
-- read from the ledger when it finishes, and would overwrite these with what may be older ones;
-- the caller sends them again after the fence. Rules without a limit delete the holding counts: nothing keeps them up to date
-- while there is no limit, so a limit switched on later must come with a rebuild from the
-- ledger (finish.lua), which writes the rules and the counts in one step. An error reply,
-- writing nothing, when ARGV is malformed.
--
-- Why atomic: the three fields and the counts change in one step, so a reservation never
-- sees a new start with an old end, or a limit with counts that were just deleted.

if #KEYS ~= 3 then
  return redis.error_reply('ERR rules.lua: want 3 keys, got ' .. #KEYS)
end
for i = 1, 3 do
  if not (ARGV[i] and string.match(ARGV[i], '^%d+$') and #ARGV[i] <= 15) then
    return redis.error_reply('ERR rules.lua: starts, ends and limit must be non-negative integers')
  end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return -1
end
redis.call('HSET', KEYS[1], 'starts', ARGV[1], 'ends', ARGV[2], 'limit', ARGV[3])
if ARGV[3] == '0' then
  redis.call('DEL', KEYS[2])
end
return 1
