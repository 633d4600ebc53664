/**
 * A CommonJS module's exports, however it was loaded: natively (Node gives named exports and
 * `default`) or from a chunk of the production bundle (esbuild gives only `default` to a dynamic
 * `import()` of CommonJS when it splits chunks).
 */
export const commonJs = <M extends object>(loaded: M): M => {
  const exports = (loaded as { readonly default?: unknown }).default
  return typeof exports === "object" && exports !== null ? ({ ...exports, ...loaded } as M) : loaded
}
