import { createHash } from 'node:crypto';
import applyLua from '../lua/apply.lua';
import bucketLua from '../lua/bucket.lua';
import type { LuaScript } from './client/adapter.js';

// Redis runs each script as one unit with no way to include another, so the shared arithmetic
// (lua/bucket.lua) is put in front of the operation here, once, at load time.
const apply = bucketLua + applyLua;

/** The full Lua source of `RedisStore`'s one script, as sent to Redis. */
export const SCRIPTS = Object.freeze({ apply });

/** `RedisStore`'s script with its SHA-1, as the client adapters send it. */
export const APPLY_SCRIPT: LuaScript = Object.freeze({
  lua: apply,
  sha1: createHash('sha1').update(apply).digest('hex'),
});
