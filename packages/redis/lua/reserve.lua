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

Arithmetic, clock, storage and expiry: bucket.lua. A reserve that grants nothing writes nothing.
]]

-- Runs after bucket.lua (see src/scripts.ts), which defines n, load, save, tightest, ….

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
