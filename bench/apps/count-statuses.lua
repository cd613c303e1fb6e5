-- wrk: counts every response whose status is not 2xx (wrk's own "status"
-- error counts only >= 400) and prints one parseable line at the end with
-- wrk's socket errors next to it.  Used by bench/reload-under-load.
--
-- With the argument "versions" (wrk ... -s count-statuses.lua URL -- versions)
-- it also checks each body of a deployed app (bench/reload-under-load --kind
-- deploy): one version's marker "vN;" repeated, nothing else.  A body that
-- is not counts as mixed; the versions seen are listed.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non2xx = 0
  responses = 0
  mixed = 0
  seen = ""
  check_versions = args[1] == "versions"
end

-- The body's version ("v3;"), or nil when it is not one marker repeated.
local function version_of(body)
  local marker = body:match("^v%d+;")
  if marker == nil or #body % #marker ~= 0 then
    return nil
  end
  if string.rep(marker, #body / #marker) ~= body then
    return nil
  end
  return marker
end

function response(status, headers, body)
  responses = responses + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
  if check_versions then
    local marker = version_of(body)
    if marker == nil then
      mixed = mixed + 1
    elseif not seen:find(marker, 1, true) then
      seen = seen .. marker
    end
  end
end

function done(summary, latency, requests)
  local bad, answered, mixed_bodies, versions = 0, 0, 0, {}
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non2xx")
    answered = answered + thread:get("responses")
    mixed_bodies = mixed_bodies + thread:get("mixed")
    for marker in thread:get("seen"):gmatch("v(%d+);") do
      versions[tonumber(marker)] = true
    end
  end
  local list = {}
  for v in pairs(versions) do
    table.insert(list, v)
  end
  table.sort(list)
  local e = summary.errors
  io.write(string.format(
    "wrk-result requests=%d responses=%d non2xx=%d connect=%d read=%d write=%d timeout=%d p99_ms=%.1f "
      .. "mixed=%d versions=%s\n",
    summary.requests, answered, bad, e.connect, e.read, e.write, e.timeout,
    latency:percentile(99) / 1000, mixed_bodies, #list > 0 and table.concat(list, ",") or "-"))
end
