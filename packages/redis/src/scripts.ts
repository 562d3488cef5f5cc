import bucketLua from '../lua/bucket.lua';
import peekLua from '../lua/peek.lua';
import refundLua from '../lua/refund.lua';
import reserveLua from '../lua/reserve.lua';
import takeLua from '../lua/take.lua';

// Redis runs each script as one unit with no way to include another, so the shared arithmetic
// (lua/bucket.lua) is put in front of each operation here, once, at load time.

/** The full Lua source of each `RedisStore` operation, as sent to Redis. */
export const SCRIPTS = Object.freeze({
  take: bucketLua + takeLua,
  reserve: bucketLua + reserveLua,
  refund: bucketLua + refundLua,
  peek: bucketLua + peekLua,
});
