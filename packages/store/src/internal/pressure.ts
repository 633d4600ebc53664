/**
 * Streaming a large object allocates one short-lived buffer per chunk; V8 collects them
 * lazily (a major collection starts only once ~64 MiB of such external memory piled up),
 * so a process streaming fast holds that much garbage. A full collection every `every`
 * bytes streamed bounds it instead. The collector is V8's own `gc`, taken from a fresh
 * context after enabling `--expose-gc` at run time, so the bound holds however the operator
 * starts Node (`npm start`, `cairn serve`, compiled JS); nothing else in the process sees
 * a global `gc`.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

const every = 32 * 1024 * 1024

const collector = (): (() => void) | undefined => {
  const existing = (globalThis as { gc?: unknown }).gc
  if (typeof existing === "function") return existing as () => void
  try {
    setFlagsFromString("--expose-gc")
    const gc = runInNewContext("gc") as unknown
    return typeof gc === "function" ? (gc as () => void) : undefined
  } catch {
    return undefined
  }
}

let collect: (() => void) | undefined | null = null

/** Call with the bytes streamed so far before and after a chunk. */
export const relieve = (before: number, after: number): void => {
  if (Math.floor(before / every) === Math.floor(after / every)) return
  if (collect === null) collect = collector()
  collect?.()
}
