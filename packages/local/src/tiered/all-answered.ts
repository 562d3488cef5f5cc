/**
 * Resolves once every one of `sent` has answered, and rejects with the first failure then: every
 * op is waited for, not only up to the first failure, since the others may still land.
 */
export function allAnswered(sent: readonly Promise<unknown>[]): Promise<void> {
  return Promise.allSettled(sent).then((results) => {
    for (const result of results) if (result.status === 'rejected') throw result.reason;
  });
}
