/**
 * How far the stamp of an admission may trail the decision. A worker process (fleet or scenario)
 * stamps an admission with `Date.now()` just after deciding; on a loaded machine the stamp can be a
 * few ms late, which narrows the measured window by as much. Window bounds allow this much more.
 */
export const STAMP_SLACK_MS = 20;
