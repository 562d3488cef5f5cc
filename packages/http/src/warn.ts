const warned = new WeakMap<object, Set<string>>();

/**
 * Emits a process warning (`type: 'TieredLimiterWarning'`) once per `owner` and `code`: a
 * misconfiguration seen on every request should say so once, not flood the log.
 * `process.on('warning', …)` receives it; `--no-warnings` silences it.
 */
export function warnOnce(owner: object, code: string, message: string): void {
  let codes = warned.get(owner);
  if (codes === undefined) {
    codes = new Set();
    warned.set(owner, codes);
  }
  if (codes.has(code)) return;
  codes.add(code);
  process.emitWarning(message, { type: 'TieredLimiterWarning', code });
}
