-- wrk script: one new Place Bet per request, a unique bet uid for every request of every thread.
-- Arguments (after --): <Authorization header value> <number of users> <path> <first bet uid>
local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  auth = args[1]
  users = tonumber(args[2])
  path = args[3]
  counter = 0
  base = tonumber(args[4]) + id * 100000000
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json"
  wrk.headers["Authorization"] = auth
  wrk.headers["X-Callback-Event"] = "create:fantasy_team"
end

function request()
  counter = counter + 1
  local uid = base + counter
  local body = string.format(
    '{"bets":[{"user":{"client":"bench","uid":"u%d","name":"Bench User","ip":"127.0.0.1"},' ..
    '"pool":{"client":"bench","game":"fantasy","uid":1,"name":"Bench Cup","currency":"EUR",' ..
    '"overdraw":"0.00","category":"admin_created","amount":1.00},' ..
    '"bet":{"uid":%d,"uuid":"1|%d","base_amount":1.00,"amount":1.00,"rake":0.10,"currency":"EUR"}}]}',
    uid % users, uid, uid)
  return wrk.format(nil, path, nil, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "socket_errors": %d, "non_2xx": %d, ' ..
    '"p50_us": %d, "p99_us": %d}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
