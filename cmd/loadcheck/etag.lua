-- wrk script of the refresh storm's revalidations: GET of the URL's path, where every
-- <every>-th request of a thread (1 = each one) carries If-None-Match with the last ETag the
-- thread was answered, as a browser revalidates its copy. Argument (after "--"): every.
-- It counts response codes ("status <code> <n>") and, when done, prints
-- "count conditional <n>" (requests sent with If-None-Match), "count new-tag <n>" (200 answers
-- whose ETag differed from the thread's last one, its first included), "count bad-304 <n>"
-- (304 answers that carried a body) and "count untagged-200 <n>" (200 answers without an ETag).
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  every = tonumber(args[1])
  plain = wrk.format("GET")
  counter, etag, revalidate = 0, nil, nil
  statuses = {}
  counts = { conditional = 0, ["new-tag"] = 0, ["bad-304"] = 0, ["untagged-200"] = 0 }
end

function request()
  counter = counter + 1
  if revalidate and counter % every == 0 then
    counts.conditional = counts.conditional + 1
    return revalidate
  end
  return plain
end

-- header returns the value of the header name (lower case) whatever its case on the wire.
function header(headers, name)
  for k, v in pairs(headers) do
    if string.lower(k) == name then return v end
  end
  return nil
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 304 then
    if #body > 0 then counts["bad-304"] = counts["bad-304"] + 1 end
    return
  end
  if status ~= 200 then return end
  local tag = header(headers, "etag")
  if tag == nil then
    counts["untagged-200"] = counts["untagged-200"] + 1
  elseif tag ~= etag then
    -- a new snapshot: build the conditional request once per tag, not once per request
    counts["new-tag"] = counts["new-tag"] + 1
    etag = tag
    revalidate = wrk.format("GET", nil, { ["If-None-Match"] = tag })
  end
end

function done(summary, latency, requests)
  local total, sums = {}, {}
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses")) do total[code] = (total[code] or 0) + n end
    for name, n in pairs(t:get("counts")) do sums[name] = (sums[name] or 0) + n end
  end
  for code, n in pairs(total) do io.write(string.format("status %d %d\n", code, n)) end
  for name, n in pairs(sums) do io.write(string.format("count %s %d\n", name, n)) end
end
