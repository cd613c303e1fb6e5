-- wrk: counts every response whose status is not 2xx (wrk's own "status"
-- error counts only >= 400) and prints one parseable line at the end with
-- wrk's socket errors next to it.  Used by bench/reload-under-load.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non2xx = 0
  responses = 0
end

function response(status, headers, body)
  responses = responses + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad, answered = 0, 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("non2xx")
    answered = answered + thread:get("responses")
  end
  local e = summary.errors
  io.write(string.format(
    "wrk-result requests=%d responses=%d non2xx=%d connect=%d read=%d write=%d timeout=%d p99_ms=%.1f\n",
    summary.requests, answered, bad, e.connect, e.read, e.write, e.timeout,
    latency:percentile(99) / 1000))
end
