/**
 * Streaming a large object allocates one short-lived buffer per chunk; V8 collects them
 * lazily (a major collection starts only once ~64 MiB of such external memory piled up),
 * so a process streaming fast holds that much garbage. A scavenge (minor collection) every
 * `every` bytes streamed bounds it instead, at a fraction of a full collection's cost. The collector is V8's own `gc`, taken from a fresh
 * context after enabling `--expose-gc` at run time, so the bound holds however the operator
 * starts Node (`npm start`, `cairn serve`, compiled JS); nothing else in the process sees
 * a global `gc`.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

const every = 8 * 1024 * 1024

type Gc = (options?: { readonly type: "minor" | "major" }) => void

const collector = (): (() => void) | undefined => {
  let gc = (globalThis as { gc?: unknown }).gc
  if (typeof gc !== "function") {
    try {
      setFlagsFromString("--expose-gc")
      gc = runInNewContext("gc") as unknown
    } catch {
      return undefined
    }
  }
  // A scavenge: the spent chunks are young, and a minor collection frees their buffers at a
  // fraction of a full collection's cost.
  return typeof gc === "function" ? () => (gc as Gc)({ type: "minor" }) : undefined
}

let collect: (() => void) | undefined | null = null

/** Call with the bytes streamed so far before and after a chunk. */
export const relieve = (before: number, after: number): void => {
  if (Math.floor(before / every) === Math.floor(after / every)) return
  if (collect === null) collect = collector()
  collect?.()
}
