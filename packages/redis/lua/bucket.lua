--[[
bucket: the shared token-bucket arithmetic, core's shared-bucket.ts (packages/core/src) line for
line; a property test keeps the two equal. It is not a script of its own: src/scripts.ts puts it in
front of apply.lua.

It reads Redis's own clock (TIME) once per call, never the caller's, and defines:
  now                         the call's time in whole µs (absolute times are whole µs, so every
                              difference is exact; durations are ms)
  load(key), save(key, keep_ms)
                              a key's state { t = tokens, at = µs, held = { {id, count}, ... },
                              full = ms until full, when the caller computed it for this state },
                              cached per call so that several entries on one key see each other's
                              effects; save writes it back (or deletes a full bucket with nothing
                              on lease) with a TTL of ms until full + TTL_MARGIN_MS + keep_ms
  settle(st, cap, rate)       releases generations due by now, refilling piecewise into the room
                              capacity - held (core's settleSharedBucket)
  ms_until(st, cap, rate, need)
                              ms until need tokens, through releases (core's msUntilShared)
  report, hold, take_from, generation_for, fence_of, tighter, whole, covers

State per key: a string, the byte 1 then little-endian doubles (struct.pack '<Bdd', then '<dd'
per generation): tokens, ts the µs of Redis TIME it was last brought up to, and releaseUs and count
of the tokens on lease per generation, earliest first. The text format of earlier versions,
"<tokens> <ts>[ <releaseUs>:<count>]…", is read and written over in the new one. tokens + held
never exceeds the capacity: the bucket does not refill into room that leased tokens hold.
]]

redis.replicate_commands() -- Redis < 5 needs it to write after TIME; a no-op since 5

local EPSILON = 1e-9 -- core's TOKEN_EPSILON
local TTL_MARGIN_MS = 50 -- KEY_TTL_MARGIN_MS of src/keys.ts, which says why; a test keeps them equal
local MAX_MS = 4503599627370496 -- 2^52, core's MAX_WAIT_MS: replies every client reads exactly, PEXPIRE in range

local floor, ceil, match, gmatch, byte, format = math.floor, math.ceil, string.match, string.gmatch, string.byte, string.format
local pack, unpack_at = struct.pack, struct.unpack
-- Globals cost a table lookup each time they are named: a take names these once or twice.
local call = redis.call

local time = call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local function covers(t, cost) return t + EPSILON >= cost end

local function whole(t)
  local w = floor(t + EPSILON)
  if w > 0 then return w end
  return 0
end

local function clamp_ms(ms)
  if ms > MAX_MS then return MAX_MS end
  return ms
end

-- core's msUntilTokens
local function ms_until_tokens(t, want, rate)
  local deficit = want - t
  if deficit <= EPSILON then return 0 end
  local ms = ceil((deficit - EPSILON) / rate)
  if ms < 1 then ms = 1 end
  if t + ms * rate + EPSILON < want then ms = ms + 1 end
  return clamp_ms(ms)
end

local function refill_under(t, elapsed_us, rate, room)
  if not (elapsed_us > 0) or not (t < room) then return t end
  local nx = t + (elapsed_us / 1000) * rate
  if nx < room then return nx end
  return room
end

local function held_total(held)
  local sum = 0
  for i = 1, #held do sum = sum + held[i][2] end
  return sum
end

local cache, order = {}, {}

-- Most keys hold nothing on lease: they share this one empty list rather than each making its own
-- (an allocation and a collection per key-op). Writing to it is a bug: it refuses assignments, though
-- not table.insert's raw sets, so a state that comes to hold a generation gets a list of its own
-- first (own_held), which every write to a state's list goes through.
local NO_HELD = setmetatable({}, { __newindex = function() error('NO_HELD is shared: written to') end })
local function own_held(st)
  local held = st.held
  if held == NO_HELD then
    held = {}
    st.held = held
  end
  return held
end

-- Binary, not text: doubles hold every value exactly (tokens are doubles, µs stay below 2^53), and
-- struct.pack and struct.unpack cost less than %.17g formatting and a pattern's parse, which took a
-- tenth of a take's server time. The first byte names the format: text starts with a digit or '-'.
-- One GET reads a bucket and one SET … PX writes it with its TTL: two commands a key-op, where a
-- hash took three or four.
local FORMAT = 1
local function not_ours(key)
  -- Fail the call rather than overwrite what someone else keeps there.
  error({ err = 'WRONGTYPE ' .. key .. ' holds no tiered-limiter bucket' })
end

-- The text format before it, "<tokens> <ts>[ <releaseUs>:<count>]…", is still read: a key written
-- by an earlier version is taken over, not refused.
local function load_text(st, key, raw)
  local t, ts, rest = match(raw, '^(%S+) (%S+)(.*)$')
  st.t, st.at = tonumber(t), tonumber(ts)
  if st.t == nil or st.at == nil then not_ours(key) end
  if rest ~= '' then
    local held = own_held(st)
    for id, count in gmatch(rest, '(%d+):(%d+)') do held[#held + 1] = { tonumber(id), tonumber(count) } end
  end
end

local function load(key)
  local st = cache[key]
  if st then return st end
  local raw = call('GET', key)
  st = { t = nil, at = nil, held = NO_HELD, dirty = false, cap = 0, rate = 0 }
  if raw then
    if byte(raw, 1) == FORMAT then
      local size = #raw
      if size < 17 or (size - 1) % 16 ~= 0 then not_ours(key) end
      local t, at = unpack_at('<dd', raw, 2)
      if t ~= t or at ~= at then not_ours(key) end
      st.t, st.at = t, at
      if size > 17 then
        local held = own_held(st)
        for p = 18, size, 16 do
          local id, count = unpack_at('<dd', raw, p)
          held[#held + 1] = { id, count }
        end
      end
    else
      load_text(st, key, raw)
    end
  end
  cache[key] = st
  order[#order + 1] = key
  return st
end

-- core's settleSharedBucket; a key never seen is a full bucket
local function settle(st, cap, rate)
  st.cap, st.rate = cap, rate
  if st.t == nil or st.at == nil then
    st.t, st.at = cap, now
  end
  local t = st.t
  if t > cap then t = cap end
  local at = st.at
  local held = st.held
  if #held == 0 then
    st.t = refill_under(t, now - at, rate, cap)
    if now > at then st.at = now end
    return
  end
  local sum = held_total(held)
  local released = 0
  for i = 1, #held do
    local g = held[i]
    if g[1] > now then break end
    t = refill_under(t, g[1] - at, rate, cap - sum)
    if g[1] > at then at = g[1] end
    sum = sum - g[2]
    released = i
  end
  if released > 0 then
    local rest = {}
    for i = released + 1, #held do rest[#rest + 1] = held[i] end
    st.held = rest
  end
  t = refill_under(t, now - at, rate, cap - sum)
  st.t = t
  if now > at then at = now end
  st.at = at
end

-- core's msUntilShared
local function ms_until(st, cap, rate, need)
  local t = st.t
  if covers(t, need) then return 0 end
  if #st.held == 0 then return ms_until_tokens(t, need, rate) end
  local at = now
  local sum = held_total(st.held)
  for i = 1, #st.held do
    local g = st.held[i]
    local room = cap - sum
    if covers(room, need) then
      local ms = ms_until_tokens(t, need, rate)
      if at + ms * 1000 <= g[1] then return clamp_ms(ceil((at - now) / 1000) + ms) end
    end
    t = refill_under(t, g[1] - at, rate, room)
    at = g[1]
    sum = sum - g[2]
  end
  return clamp_ms(ceil((at - now) / 1000) + ms_until_tokens(t, need, rate))
end

-- core's report: hand back `returned`, account `spent`; a released generation changes nothing
local function report(st, id, spent, returned)
  local held = st.held
  for i = 1, #held do
    local g = held[i]
    if g[1] == id then
      -- a reset's fence (core's resetSharedBucket): the lease reported was from before the reset
      if g[2] == 0 then return end
      local back = returned
      if back > g[2] then back = g[2] end
      st.t = st.t + back
      local left = g[2] - back - spent
      if left > 0 then g[2] = left else table.remove(held, i) end
      return
    end
  end
end

local function hold(st, id, count)
  local held = own_held(st)
  local i = #held
  while i > 0 and held[i][1] > id do i = i - 1 end
  if i > 0 and held[i][1] == id then
    held[i][2] = held[i][2] + count
  else
    table.insert(held, i + 1, { id, count })
  end
end

local function take_from(st, count)
  local left = st.t - count
  if left > 0 or left <= -EPSILON then st.t = left else st.t = 0 end
end

-- core's generationFor
local function generation_for(hold_ms)
  local q = 1000
  while q * 16 <= hold_ms * 1000 do q = q * 2 end
  return ceil((now + hold_ms * 1000) / q) * q
end

-- core's fenceOf: the last release before a reset, while it is due
local function fence_of(st)
  local first = st.held[1]
  if first and first[2] == 0 then return first[1] end
  return nil
end

-- core's isTighter
local function tighter(aw, ar, af, bw, br, bf)
  if aw ~= bw then return aw > bw end
  if ar ~= br then return ar < br end
  return af > bf
end

-- A whole ms count as Redis reads it. Redis turns a number argument into text with a %.17g
-- printf on every call, a thirtieth of a take's server time; most keys of a call share their TTL
-- (the same limit, the same take), so each distinct count is written once per call. '%d' is
-- exact: counts are whole and below 2^53.
local ttl_texts = {}
local function ttl_text(ms)
  local text = ttl_texts[ms]
  if text == nil then
    text = format('%d', ms)
    ttl_texts[ms] = text
  end
  return text
end

-- keep_ms: the store's keepAfterFullMs. A key seen again within it is rewritten, not expired
-- and made anew: an expiry costs Redis's expiry cycle, which blocks every client while it runs.
local function save(key, keep_ms)
  local st = cache[key]
  local held, cap = st.held, st.cap
  if #held == 0 and covers(st.t, cap) then
    call('DEL', key)
    return
  end
  local value = pack('<Bdd', FORMAT, st.t, st.at)
  for i = 1, #held do value = value .. pack('<dd', held[i][1], held[i][2]) end
  -- The last entry on the key replied its ms until full (apply.lua keeps it in st.full) from
  -- this very state: computed once, not twice. A number argument reaches Redis in its shortest
  -- exact form: a whole ms count stays whole.
  local full = st.full
  if full == nil then full = ms_until(st, cap, st.rate, cap) end
  -- A reset's fence holds no tokens, yet the key must outlive it (the last release it fences).
  local last = held[#held]
  if last then
    local fence_ms = ceil((last[1] - now) / 1000)
    if fence_ms > full then full = fence_ms end
  end
  call('SET', key, value, 'PX', ttl_text(full + TTL_MARGIN_MS + keep_ms))
end
