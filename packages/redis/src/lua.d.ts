/** A Lua script's source, imported as text (tsup's `.lua: text` loader; a vite plugin in tests). */
declare module '*.lua' {
  const source: string;
  export default source;
}
