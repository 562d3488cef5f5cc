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

Arithmetic and clock: bucket.lua.
]]

-- Runs after bucket.lua (see src/scripts.ts), which defines n, load, save, tightest, ….

for i = 1, n do load(i, 0) end

local remaining, reset, limit = tightest()
return { remaining, reset, limit }
