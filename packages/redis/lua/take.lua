--[[
take: one atomic token-bucket step over the N limits of one key, all or nothing.

KEYS[i]      the bucket of limit i, i = 1..N: a hash { tokens = double, ts = µs of Redis TIME }.
             All N keys carry the same {hash tag}, so they sit in one Cluster slot.
ARGV[1]      cost: whole tokens to take from every limit (1 ≤ cost ≤ the smallest capacity)
ARGV[2i]     capacity of limit i (a whole number)
ARGV[2i+1]   refillPerSecond of limit i (fractions allowed)

Reply        { allowed, remaining, retryAfterMs, resetMs, limit }, all integers:
             allowed       1 if cost was taken from every limit, else 0 (nothing taken)
             remaining     whole tokens left in the tightest limit (fewest whole tokens; first on a tie)
             retryAfterMs  0 if allowed, else ms until cost tokens are in every limit (≥ 1)
             resetMs       ms until every limit is full
             limit         capacity of the tightest limit

The arithmetic is core's bucket.ts: tokens = min(capacity, tokens + elapsedMs × refillPerSecond / 1000),
compared with 1e-9 of slack, durations rounded up to whole ms. The clock is this server's TIME, never
the caller's. A write stores numbers with %.17g (Lua's tostring keeps only 14 digits) and sets PEXPIRE
to the ms until full plus TTL_MARGIN_MS; a bucket that is full is deleted, as no key means a full bucket.
A denied take writes nothing: refilling later from the old state gives the same tokens.
]]

-- Runs after bucket.lua (see src/scripts.ts), which defines n, load, save, tightest, ….

local cost = tonumber(ARGV[1])
for i = 1, n do load(i, 1) end

local retry = 0
for i = 1, n do
  local wait = ms_until(tokens[i], cost, rates[i])
  if wait > retry then retry = wait end
end

if retry == 0 then
  for i = 1, n do
    local left = tokens[i] - cost
    if left > 0 then tokens[i] = left else tokens[i] = 0 end
    save(i)
  end
end

local remaining, reset, limit = tightest()
local allowed = 0
if retry == 0 then allowed = 1 end
return { allowed, remaining, retry, reset, limit }
