import applyLua from '../lua/apply.lua';
import bucketLua from '../lua/bucket.lua';

// Redis runs each script as one unit with no way to include another, so the shared arithmetic
// (lua/bucket.lua) is put in front of the operation here, once, at load time.

/** The full Lua source of `RedisStore`'s one script, as sent to Redis. */
export const SCRIPTS = Object.freeze({
  apply: bucketLua + applyLua,
});
