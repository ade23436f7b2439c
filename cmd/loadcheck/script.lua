-- wrk script of the load check: every request is POST /api/order with its own buyer and
-- idempotency key. Arguments (after "--"): product id, max qty (1 = always 1), duplicates
-- (each key is sent this many times in a row, i.e. concurrently on different connections),
-- tokens file (one buyer token per line), run tag (keeps keys unique across runs), and
-- optionally "codes", "seconds" or "codes,seconds".
-- It counts response codes and prints "status <code> <count>" lines when done. With "codes" it
-- also tallies each refusal (status >= 400) by the error code of its body, and whether it
-- carried a Retry-After header of whole seconds, as "count <status>:<code> <n>",
-- "count retry-after:<status>:<code> <n>", "count bad-retry-after:<status>:<code> <n>" and
-- "count max:retry-after <seconds>" lines (the storefront scenarios check them; the others
-- leave it off, so that their hot path parses no body). With "seconds" it also tallies each
-- answer by the wall-clock second it arrived in and its status, as "count sec:<unix s>:<status>
-- <n>" lines (the chaos scenarios split their run into before, during and after the fault),
-- and writes the order number of every 201 answer to the file "<7th argument>-<thread>",
-- one per line (the chaos scenarios check that each of them is in the ledger). An 8th
-- argument is the pause in milliseconds each connection makes before each request, which the
-- paced form of the script (the same script with a delay function, see pacedAppendix) uses.
-- A 9th argument is a coupon code every order gives ("coupon" in the body).
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
  local mode = args[6] or ""
  codes = string.find(mode, "codes", 1, true) ~= nil
  seconds = string.find(mode, "seconds", 1, true) ~= nil
  if seconds and args[7] then created = io.open(args[7] .. "-" .. id, "w") end
  pause = tonumber(args[8] or "0") or 0
  coupon = ""
  if args[9] and #args[9] > 0 then coupon = ',"coupon":"' .. args[9] .. '"' end
  counter = 0
  statuses = {}
  counts = {}
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
  }, '{"product_id":' .. pid .. ',"qty":' .. qty .. coupon .. '}')
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if codes and status >= 400 then tally(status, headers, body) end
  if seconds then add("sec:" .. os.time() .. ":" .. status, 1) end
  if created and status == 201 then
    created:write((string.match(body, '"order_no":"([^"]*)"') or "?"), "\n")
    created:flush()
  end
end

-- header returns the value of the header name (lower case) whatever its case on the wire.
function header(headers, name)
  for k, v in pairs(headers) do
    if string.lower(k) == name then return v end
  end
  return nil
end

function add(name, n)
  counts[name] = (counts[name] or 0) + n
end

function tally(status, headers, body)
  local name = status .. ":" .. (string.match(body, '"code":"([^"]*)"') or "?")
  add(name, 1)
  local ra = header(headers, "retry-after")
  if ra == nil then return end
  if string.match(ra, "^%d+$") then
    add("retry-after:" .. name, 1)
    counts["max:retry-after"] = math.max(counts["max:retry-after"] or 0, tonumber(ra))
  else
    add("bad-retry-after:" .. name, 1)
  end
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for code, n in pairs(s) do total[code] = (total[code] or 0) + n end
  end
  for code, n in pairs(total) do io.write(string.format("status %d %d\n", code, n)) end
  local sums = {}
  for _, t in ipairs(threads) do
    for name, n in pairs(t:get("counts")) do
      if string.sub(name, 1, 4) == "max:" then
        sums[name] = math.max(sums[name] or 0, n)
      else
        sums[name] = (sums[name] or 0) + n
      end
    end
  end
  for name, n in pairs(sums) do io.write(string.format("count %s %d\n", name, n)) end
end
