-- wrk script of the load check: every request is POST /api/order with its own buyer and
-- idempotency key. Arguments (after "--"): product id, max qty (1 = always 1), duplicates
-- (each key is sent this many times in a row, i.e. concurrently on different connections),
-- tokens file (one buyer token per line), run tag (keeps keys unique across runs).
-- It counts response codes and prints "status <code> <count>" lines when done.
local threads = {}
local nthreads = 0

function setup(thread)
  nthreads = nthreads + 1
  thread:set("id", nthreads)
  table.insert(threads, thread)
end

function init(args)
  pid = args[1]
  qtymax = tonumber(args[2])
  dup = tonumber(args[3])
  tag = args[5]
  tokens = {}
  for line in io.lines(args[4]) do
    if #line > 0 then tokens[#tokens + 1] = line end
  end
  counter = 0
  statuses = {}
end

function request()
  local n = math.floor(counter / dup)
  counter = counter + 1
  -- buyer and qty depend on n only, so the duplicates of one key carry the same request
  local tok = tokens[(n * 7919 + id * 104729) % #tokens + 1]
  local qty = 1 + (n * 31 + id * 17) % qtymax
  local key = string.format("lc-%s-%d-%d", tag, id, n)
  return wrk.format("POST", "/api/order", {
    ["Authorization"] = "Bearer " .. tok,
    ["Idempotency-Key"] = key,
    ["Content-Type"] = "application/json",
  }, '{"product_id":' .. pid .. ',"qty":' .. qty .. '}')
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for code, n in pairs(s) do total[code] = (total[code] or 0) + n end
  end
  for code, n in pairs(total) do io.write(string.format("status %d %d\n", code, n)) end
end
