--[[
apply: one atomic step on each of E entries, in order; an entry is core's BucketOp on the N limits
of one key (packages/core/src/store.ts): settle, reports, credit, debit, then take or reserve.
Entries on one key see each other's effects (the state is cached for the call), and each key is
written once at the end, only if an entry changed it.

KEYS         the bucket keys of every entry in order, N per entry (one per limit). Within a call all
             keys sit in one Cluster slot; an entry's N keys share the user key's {hash tag}.
ARGV[1]      every number below, as one JSON array (a number per ARGV cost Redis and the caller
             more than the whole decode: 170 numbers, 32-39 µs a call as arguments, 19-21 µs as
             JSON): E, the number of entries; S, the number of limit sets; K, the ms a key is
             kept once its bucket is full (the store's keepAfterFullMs); then S sets:
               N                          limits
               capacity, refillPerSecond  N pairs, one per limit
             then per entry, in this order:
               set                        which limit set (1-based) it runs on; written -set,
                                          with nothing after it, for a take of 1 and nothing else
                                          on a set of one limit (flags 1, take 1: the commonest
                                          entry, in one number; its reply is short, see Reply)
               flags                      which fields follow: 1 take, 2 reserve, 4 credit, 8 debit,
                                          16 aheadMs, 32 reports (a field left out is 0); or 64
                                          alone, a reset: the key's buckets become full, their
                                          leases forgotten behind a fence (core's
                                          resetSharedBucket; no key if none was held), no field follows
               take                       tokens to take all-or-nothing
               want, min, holdMs          a lease to reserve, held holdMs ms
               credit, debit              tokens to give back / to take regardless
               aheadMs                    ms of refill the take or lease may borrow
               R                          reports, then R triples: generation, spent, returned
             or, for a heartbeat entry (its one key the fleet's sorted set):
               0, i, ttlMs                instance ARGV[1 + i] counts as alive for ttlMs (0: it leaves)
ARGV[2…]     the instances the heartbeat entries name

Reply        7 integers per entry (but a -set entry's, below), in order:
               ok           take: admitted; reserve: something granted; else 1 if a cost of 1 passes now
               granted      tokens taken or leased
               generation   the lease's generation (0 when nothing was leased)
               remaining    whole tokens left in the limit the reply speaks of
               retryAfterMs 0 when ok, else ms until what was asked could pass
               resetMs      ms until that limit is full with nothing on lease
               limitIndex   0-based index of that limit (core's isTighter: longest wait, fewest
                            tokens, longest until full, first listed)
             A heartbeat entry replies 1, the number of live instances, then five zeros; a reset
             entry 1, 0, 0, the first limit's capacity, then three zeros. A -set entry (a take of
             1 on one limit) replies 2 integers when admitted, remaining + 1 (so at least 1) and
             resetMs, or 3 when refused, -remaining (so at most 0), retryAfterMs and resetMs: the
             other fields are known (granted 1 or 0, generation 0, limitIndex 0), and each integer
             costs Redis and the client as much to write and read as the take's arithmetic.

Arithmetic, clock, storage and expiry: bucket.lua.
]]

-- Runs after bucket.lua (see src/scripts.ts), which defines now, load, save, settle, ….

local reply = {}
local KEYS = KEYS
local args = cjson.decode(ARGV[1])
local keep_ms = args[3]
local at_arg, at_key = 4, 1
local states = {}

-- The limit sets, read once: each { n, caps, rates }.
local sets = {}
for k = 1, args[2] do
  local n = args[at_arg]
  local caps, rates = {}, {}
  for i = 1, n do
    caps[i] = args[at_arg + 2 * i - 1]
    rates[i] = args[at_arg + 2 * i] / 1000
  end
  sets[k] = { n = n, caps = caps, rates = rates }
  at_arg = at_arg + 1 + 2 * n
end

-- The next number.
local function next_number()
  local value = args[at_arg]
  at_arg = at_arg + 1
  return value
end

local function heartbeat(key, instance, ttl_ms)
  -- A registration of no life is a leave (a limiter closing): it stops counting now.
  if ttl_ms == 0 then
    call('ZREM', key, instance)
    call('ZREMRANGEBYSCORE', key, '-inf', now)
    return call('ZCARD', key)
  end
  -- Members are scored by when they stop counting (µs of Redis TIME); the dead are dropped here.
  call('ZADD', key, now + ttl_ms * 1000, instance)
  call('ZREMRANGEBYSCORE', key, '-inf', now)
  -- The key only ever gets a longer life: an instance with a short registration (a small round)
  -- beating after one with a long one must not let the key, and the long one with it, expire first.
  local keep_ms = ttl_ms * 2
  if call('PTTL', key) < keep_ms then call('PEXPIRE', key, keep_ms) end
  return call('ZCARD', key)
end

-- A short take's reply after `base`, as the header's Reply says: remaining + 1 and resetMs when
-- admitted, -remaining, retryAfterMs and resetMs when not.
local function short_reply(base, ok, w, retry, full)
  if ok == 1 then
    reply[base + 1], reply[base + 2] = w + 1, full
  else
    reply[base + 1], reply[base + 2], reply[base + 3] = -w, retry, full
  end
end

-- A take on one limit of a key with nothing on lease: the general entry below with every branch
-- that cannot run left out (the reply and state are the same to the bit; a property test holds
-- them equal). Most entries are this one (every RequestLimiter decision, a two-tier limiter's
-- sparse keys), and the general entry's calls and loops cost about a tenth of its server time
-- (covers and whole are written out here for the same reason).
local function plain_take(st, cap, rate, need, ahead_ms, short)
  st.cap, st.rate = cap, rate
  local t, at = st.t, st.at
  if t == nil or at == nil then t, at = cap, now end
  if t > cap then t = cap end
  -- settle with nothing on lease: refill_under into the whole capacity
  local elapsed = now - at
  if elapsed > 0 and t < cap then
    local nx = t + (elapsed / 1000) * rate
    if nx < cap then t = nx else t = cap end
  end
  if now > at then at = now end
  st.at = at
  local ok, granted, retry = 0, 0, 0
  if t + ahead_ms * rate + EPSILON >= need then
    local left = t - need
    if left > 0 or left <= -EPSILON then t = left else t = 0 end
    st.dirty = true
    ok, granted = 1, need
  else
    -- ms_until with nothing on lease
    local short = need - ahead_ms * rate
    if t + EPSILON < short then retry = ms_until_tokens(t, short, rate) end
  end
  st.t = t
  local full = 0
  if t + EPSILON < cap then full = ms_until_tokens(t, cap, rate) end
  st.full = full
  local base = #reply
  local w = floor(t + EPSILON)
  if not (w > 0) then w = 0 end
  if short then
    short_reply(base, ok, w, retry, full)
    return
  end
  reply[base + 1] = ok
  reply[base + 2] = granted
  reply[base + 3] = 0
  reply[base + 4] = w
  reply[base + 5] = retry
  reply[base + 6] = full
  reply[base + 7] = 0
end

-- A reset: in the call's order, so ops sent before it count and ops after it find a full bucket.
local function reset_entry(set)
  for i = 1, set.n do
    local st = load(KEYS[at_key])
    at_key = at_key + 1
    -- core's resetSharedBucket: full, what is on lease forgotten behind a fence at its last release
    settle(st, set.caps[i], set.rates[i])
    local last = st.held[#st.held]
    st.held = {}
    if last then st.held[1] = { last[1], 0 } end
    st.t, st.at, st.full, st.dirty = set.caps[i], now, nil, true
  end
  at_arg = at_arg + 2
  local base = #reply
  reply[base + 1], reply[base + 2], reply[base + 3], reply[base + 4] = 1, 0, 0, set.caps[1]
  for j = 5, 7 do reply[base + j] = 0 end
end

-- short: the entry is a take of 1 written as one number (-set), whose fields are not in args
local function apply_entry(set, flags, short)
  local n, caps, rates = set.n, set.caps, set.rates
  if short then at_arg = at_arg + 1 else at_arg = at_arg + 2 end
  for i = 1, n do
    local st = load(KEYS[at_key])
    at_key = at_key + 1
    settle(st, caps[i], rates[i])
    -- This entry may change the state: the ms until full that save() can reuse is the reply's below.
    st.full = nil
    states[i] = st
  end
  -- The flags' fields, in order (Lua 5.1 has no bit operators: a bit is a remainder).
  local take, want, min, hold_ms, credit, debit, ahead_ms, reports = 0, 0, 0, 0, 0, 0, 0, 0
  if short then take = 1 elseif flags % 2 == 1 then take = next_number() end
  if flags % 4 >= 2 then
    want = next_number()
    min = next_number()
    hold_ms = next_number()
  end
  if flags % 8 >= 4 then credit = next_number() end
  if flags % 16 >= 8 then debit = next_number() end
  if flags % 32 >= 16 then ahead_ms = next_number() end
  if flags >= 32 then reports = next_number() end
  for r = 1, reports do
    local id, spent, returned = args[at_arg], args[at_arg + 1], args[at_arg + 2]
    at_arg = at_arg + 3
    for i = 1, n do
      report(states[i], id, spent, returned)
      states[i].dirty = true
    end
  end
  if credit > 0 or debit > 0 then
    for i = 1, n do
      local st = states[i]
      local cap = st.cap
      if credit > 0 then
        local room = cap - held_total(st.held)
        if st.t < room then
          if st.t + credit < room then st.t = st.t + credit else st.t = room end
        end
      end
      -- Never back up: a bucket already deeper than a capacity (a take or lease that borrowed
      -- aheadMs of refill) stays where it is.
      if debit > 0 and st.t > -cap then
        if st.t - debit > -cap then st.t = st.t - debit else st.t = -cap end
      end
      st.dirty = true
    end
  end

  local granted, generation, need, decided = 0, 0, 1, false
  if take > 0 then
    need, decided = take, true
    local ok = true
    for i = 1, n do
      if not covers(states[i].t + ahead_ms * states[i].rate, need) then ok = false end
    end
    if ok then
      for i = 1, n do
        take_from(states[i], need)
        states[i].dirty = true
      end
      granted = need
    end
  elseif want > 0 then
    need, decided, granted = min, true, want
    for i = 1, n do
      local w = whole(states[i].t + ahead_ms * states[i].rate)
      if w < granted then granted = w end
    end
    if granted < min then granted = 0 end
    if granted > 0 then
      generation = generation_for(hold_ms)
      -- past any reset's fence: no lease after a reset shares a generation with one before it
      for i = 1, n do
        local fence = fence_of(states[i])
        if fence and generation <= fence then generation = fence + 1 end
      end
      for i = 1, n do
        take_from(states[i], granted)
        hold(states[i], generation, granted)
        states[i].dirty = true
      end
    end
  end

  -- core's isTighter: the wait for what was asked when refused, else for the next token
  local admitted = decided and granted > 0
  local wait_for = need
  if admitted then wait_for = 1 end
  local at, at_wait, at_rem, at_full = 1, 0, 0, 0
  for i = 1, n do
    local st = states[i]
    -- An admitted entry on one limit replies no wait: the one limit is the one it speaks of.
    local wait = 0
    if n > 1 or not admitted then wait = ms_until(st, st.cap, st.rate, wait_for - ahead_ms * st.rate) end
    local w = whole(st.t)
    local full = ms_until(st, st.cap, st.rate, st.cap)
    st.full = full
    if i == 1 or tighter(wait, w, full, at_wait, at_rem, at_full) then
      at, at_wait, at_rem, at_full = i, wait, w, full
    end
  end
  local ok
  if decided then ok = admitted else ok = at_wait == 0 end
  local retry = at_wait
  if admitted then retry = 0 end
  local base = #reply
  reply[base + 1] = ok and 1 or 0
  reply[base + 2] = granted
  reply[base + 3] = generation
  reply[base + 4] = at_rem
  reply[base + 5] = retry
  reply[base + 6] = at_full
  reply[base + 7] = at - 1
end

for e = 1, args[1] do
  local set_index = args[at_arg]
  if set_index == 0 then
    local live = heartbeat(KEYS[at_key], ARGV[1 + args[at_arg + 1]], args[at_arg + 2])
    at_key, at_arg = at_key + 1, at_arg + 3
    local base = #reply
    reply[base + 1], reply[base + 2] = 1, live
    for j = 3, 7 do reply[base + j] = 0 end
  elseif set_index < 0 then
    -- -set: a take of 1 on one limit and nothing else, the commonest entry, in one number rather
    -- than three (cjson's decode costs about a fiftieth of a take's server time a number); its
    -- reply is short too
    local set = sets[-set_index]
    local st = nil
    if set.n == 1 then
      st = load(KEYS[at_key])
      if #st.held > 0 then st = nil end
    end
    if st then
      plain_take(st, set.caps[1], set.rates[1], 1, 0, true)
      at_key, at_arg = at_key + 1, at_arg + 1
    else
      -- its general reply, shortened as the plain take's (one limit: no generation, index 0)
      local base = #reply
      apply_entry(set, 1, true)
      local ok, w, retry, full = reply[base + 1], reply[base + 4], reply[base + 5], reply[base + 6]
      for j = base + 7, base + 1, -1 do reply[j] = nil end
      short_reply(base, ok, w, retry, full)
    end
  else
    local set = sets[set_index]
    local flags = args[at_arg + 1]
    local st = nil
    -- flags 1: a take; 17: a take with aheadMs. A take of no tokens is a peek, apply_entry's:
    -- taken here, a take of -1 put a token in a full bucket, past its capacity.
    if set.n == 1 and (flags == 1 or flags == 17) and args[at_arg + 2] > 0 then
      st = load(KEYS[at_key])
      if #st.held > 0 then st = nil end
    end
    if st then
      local ahead_ms, width = 0, 3
      if flags == 17 then ahead_ms, width = args[at_arg + 3], 4 end
      plain_take(st, set.caps[1], set.rates[1], args[at_arg + 2], ahead_ms)
      at_key, at_arg = at_key + 1, at_arg + width
    elseif flags == 64 then
      reset_entry(set)
    else
      apply_entry(set, flags)
    end
  end
end

for i = 1, #order do
  local key = order[i]
  if cache[key].dirty then save(key, keep_ms) end
end

return reply
