/**
 * Milliseconds as whole seconds, rounded up, at least `min`: what `Retry-After`, `w` and `t`
 * carry (HTTP's delay-seconds has no fractions). A hair of slack (1e-6 ms) keeps a duration
 * such as 5 / (5 / 60 000) ms, one ulp over 60 000, at 60 s rather than 61.
 */
export function wholeSeconds(ms: number, min = 1): number {
  return Math.max(min, Math.ceil((ms - 1e-6) / 1000));
}
