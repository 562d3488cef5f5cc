// The store doubles live in the test harness, shared with the limiter contract and the option matrix.
export { ScriptedStore, type StoreCall, type StoreMode } from '@tiered-limiter/test-harness';
