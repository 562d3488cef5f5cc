--[[
bucket: the token-bucket arithmetic every script of this folder shares. It is not a script of its
own: src/scripts.ts puts it in front of take.lua, reserve.lua, refund.lua and peek.lua, so the four
agree by construction and each file keeps only what its operation does.

It reads Redis's own clock (TIME, µs) once per call, never the caller's, and defines:
  n                      the number of limits (#KEYS)
  caps, rates, tokens, stamps
                         per limit i: capacity, refill per ms, tokens now, ts of the stored state
  load(i, offset)        reads limit i's hash and refills it to now; its capacity and
                         refillPerSecond are ARGV[offset + 2i - 1] and ARGV[offset + 2i]
  whole(t)               whole tokens in t, never negative (core's wholeTokens)
  ms_until(t, want, r)   ms until t reaches want at r per ms (core's msUntilTokens)
  save(i)                writes limit i back with PEXPIRE = ms until full + TTL_MARGIN_MS, or
                         deletes it when it is full: a full bucket is no key
  tightest()             remaining, resetMs, limit of the tightest limit (first on a tie)

State per key: a hash { tokens = double, ts = µs of Redis TIME }, written with %.17g because Lua's
tostring keeps 14 digits and would lose the µs. Arithmetic is core's (packages/core/src/bucket.ts)
line for line; a property test keeps the two equal.
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
