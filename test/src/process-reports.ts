/**
 * What the library reported to the process while a test ran: rejections no one handled, and the
 * codes of the warnings it emitted (which are recorded, not printed). `start()` in a `beforeEach`,
 * `stop()` in the `afterEach`.
 */
export class ProcessReports {
  readonly unhandled: unknown[] = [];
  readonly #codes: (string | undefined)[] = [];
  readonly #onUnhandled = (reason: unknown) => this.unhandled.push(reason);
  #emitWarning: typeof process.emitWarning | undefined;

  start(): void {
    this.unhandled.length = 0;
    this.#codes.length = 0;
    process.on('unhandledRejection', this.#onUnhandled);
    this.#emitWarning = process.emitWarning;
    process.emitWarning = ((_warning: string | Error, options?: unknown) => {
      this.#codes.push((options as { code?: string } | undefined)?.code);
    }) as typeof process.emitWarning;
  }

  stop(): void {
    process.off('unhandledRejection', this.#onUnhandled);
    if (this.#emitWarning !== undefined) process.emitWarning = this.#emitWarning;
    this.#emitWarning = undefined;
  }

  /** The codes of the warnings emitted since `start()` or the last `clearWarnings()`. */
  warningCodes(): (string | undefined)[] {
    return [...this.#codes];
  }

  clearWarnings(): void {
    this.#codes.length = 0;
  }
}
