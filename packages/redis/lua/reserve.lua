--[[
reserve: leases up to `want` tokens from the N limits of one key, at least `min`, all or nothing.
The lease call of the two-tier limiter: it takes as many whole tokens as every limit holds, up to
`want`, and nothing at all if that is fewer than `min`.

KEYS[i]      the bucket of limit i, i = 1..N: a hash { tokens = double, ts = µs of Redis TIME }.
             All N keys carry the same {hash tag}, so they sit in one Cluster slot.
ARGV[1]      want: most tokens to take (a whole number ≥ min)
ARGV[2]      min: fewest tokens worth taking (a whole number ≥ 1)
ARGV[2i+1]   capacity of limit i (a whole number)
ARGV[2i+2]   refillPerSecond of limit i (fractions allowed)

Reply        { granted, remaining, retryAfterMs, resetMs, limit }, all integers:
             granted       tokens taken from every limit: min(want, floor(fewest tokens + 1e-9)),
                           or 0 when that is below min
             remaining     whole tokens left in the tightest limit (fewest whole tokens; first on a tie)
             retryAfterMs  0 if granted > 0, else ms until min tokens are in every limit (≥ 1)
             resetMs       ms until every limit is full
             limit         capacity of the tightest limit

Arithmetic, clock, storage and expiry as in take.lua. A reserve that grants nothing writes nothing.
]]

redis.replicate_commands() -- Redis < 5 needs it to write after TIME; a no-op since 5

local EPSILON = 1e-9 -- core's TOKEN_EPSILON
local TTL_MARGIN_MS = 50 -- KEY_TTL_MARGIN_MS of src/keys.ts, which says why; a test keeps them equal
local MAX_MS = 9007199254740991 -- 2^53 - 1: keeps replies and PEXPIRE whole and in range

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local n = #KEYS
local caps, rates, tokens, stamps = {}, {}, {}, {}

local function load(i, offset)
  local cap = tonumber(ARGV[offset + 2 * i - 1])
  local rate = tonumber(ARGV[offset + 2 * i]) / 1000
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local t, ts = tonumber(state[1]), tonumber(state[2])
  if t == nil or ts == nil then
    t, ts = cap, now
  else
    local elapsed = (now - ts) / 1000
    if elapsed > 0 then
      t = t + elapsed * rate
      ts = now
    end
    if not (t < cap) then t = cap end
  end
  caps[i], rates[i], tokens[i], stamps[i] = cap, rate, t, ts
end

local function whole(t)
  local w = math.floor(t + EPSILON)
  if w > 0 then return w end
  return 0
end

-- core's msUntilTokens: the slack comes off the deficit (it is in tokens), and the answer is
-- checked with the refill's own sum, as the division and the product round apart
local function ms_until(t, want, rate)
  local deficit = want - t
  if deficit <= EPSILON then return 0 end
  local ms = math.ceil((deficit - EPSILON) / rate)
  if ms < 1 then ms = 1 end
  if t + ms * rate + EPSILON < want then ms = ms + 1 end
  if ms > MAX_MS then return MAX_MS end
  return ms
end

local function save(i)
  local full_in = ms_until(tokens[i], caps[i], rates[i])
  if full_in == 0 then
    redis.call('DEL', KEYS[i])
  else
    redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', tokens[i]), 'ts', string.format('%.17g', stamps[i]))
    redis.call('PEXPIRE', KEYS[i], string.format('%.17g', full_in + TTL_MARGIN_MS))
  end
end

local function tightest()
  local at, remaining, reset = 1, nil, 0
  for i = 1, n do
    local w = whole(tokens[i])
    if remaining == nil or w < remaining then at, remaining = i, w end
    local full_in = ms_until(tokens[i], caps[i], rates[i])
    if full_in > reset then reset = full_in end
  end
  return remaining, reset, caps[at]
end

local want, min = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, n do load(i, 2) end

local granted = want
for i = 1, n do
  local w = whole(tokens[i])
  if w < granted then granted = w end
end

local retry = 0
if granted < min then
  granted = 0
  for i = 1, n do
    local wait = ms_until(tokens[i], min, rates[i])
    if wait > retry then retry = wait end
  end
else
  for i = 1, n do
    local left = tokens[i] - granted
    if left > 0 then tokens[i] = left else tokens[i] = 0 end
    save(i)
  end
end

local remaining, reset, limit = tightest()
return { granted, remaining, retry, reset, limit }
