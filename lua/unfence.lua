-- unfence.lua: lift a rebuild's fence without writing counters (the rebuild gave up).
--
-- KEYS[1]  rebuild:{<pid>}   the fence fence.lua set
-- ARGV[1]  the rebuild's token
--
-- Returns 1 when the fence was held under ARGV[1] and is deleted, 0 otherwise (changing
-- nothing: another rebuild's fence stays).
--
-- Why atomic: the check and the delete in two commands could delete a fence another rebuild
-- took in between.

if #KEYS ~= 1 then
  return redis.error_reply('ERR unfence.lua: want 1 key, got ' .. #KEYS)
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
