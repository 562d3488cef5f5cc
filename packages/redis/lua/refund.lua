--[[
refund: gives back unused leased tokens to the N limits of one key, never past a limit's capacity.

KEYS[i]      the bucket of limit i, i = 1..N: a hash { tokens = double, ts = µs of Redis TIME }.
             All N keys carry the same {hash tag}, so they sit in one Cluster slot.
ARGV[1]      tokens: whole tokens to add to every limit (≥ 1)
ARGV[2i]     capacity of limit i (a whole number)
ARGV[2i+1]   refillPerSecond of limit i (fractions allowed)

Reply        { remaining, resetMs, limit }, all integers:
             remaining     whole tokens in the tightest limit (fewest whole tokens; first on a tie)
             resetMs       ms until every limit is full (0 when the refund filled them all)
             limit         capacity of the tightest limit

Arithmetic, clock, storage and expiry: bucket.lua. The key's TTL is set anew, and a limit the
refund fills is deleted.
]]

-- Runs after bucket.lua (see src/scripts.ts), which defines n, load, save, tightest, ….

local give = tonumber(ARGV[1])
for i = 1, n do
  load(i, 1)
  local t = tokens[i] + give
  if t < caps[i] then tokens[i] = t else tokens[i] = caps[i] end
  save(i)
end

local remaining, reset, limit = tightest()
return { remaining, reset, limit }
