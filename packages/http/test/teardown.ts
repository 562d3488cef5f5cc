import { afterEach } from 'vitest';

/** What a test opens and must close: a server or an app (`close()`), or a function that closes. */
export type Closable = { close(): PromiseLike<unknown> } | (() => PromiseLike<unknown>);

/**
 * After each test, empties `lists` and closes what they held: one list at a time, all of a list at
 * once, so that the servers a test started close before the limiters they call.
 */
export function closeAfterEach(...lists: Closable[][]): void {
  afterEach(async () => {
    for (const list of lists) {
      await Promise.all(list.splice(0).map((item) => (typeof item === 'function' ? item() : item.close())));
    }
  });
}
