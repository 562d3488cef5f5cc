--[[
peek: the state of the N limits of one key, taking nothing and writing nothing.

KEYS[i]      the bucket of limit i, i = 1..N: a hash { tokens = double, ts = µs of Redis TIME }.
             All N keys carry the same {hash tag}, so they sit in one Cluster slot.
ARGV[2i-1]   capacity of limit i (a whole number)
ARGV[2i]     refillPerSecond of limit i (fractions allowed)

Reply        { remaining, resetMs, limit }, all integers:
             remaining     whole tokens in the tightest limit (fewest whole tokens; first on a tie)
             resetMs       ms until every limit is full
             limit         capacity of the tightest limit

Arithmetic and clock as in take.lua.
]]

local EPSILON = 1e-9 -- core's TOKEN_EPSILON
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

for i = 1, n do load(i, 0) end

local remaining, reset, limit = tightest()
return { remaining, reset, limit }
