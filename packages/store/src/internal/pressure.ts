/**
 * Streaming a large object allocates one short-lived buffer per chunk; V8 collects them
 * lazily (a major collection starts only once ~64 MiB of such external memory piled up),
 * so a process streaming fast holds that much garbage. Where the operator started Node
 * with `--expose-gc`, a full collection every `every` bytes bounds it instead; elsewhere
 * this does nothing.
 */
const every = 32 * 1024 * 1024

const collect: (() => void) | undefined =
  typeof (globalThis as { gc?: unknown }).gc === "function" ? ((globalThis as unknown as { gc: () => void }).gc) : undefined

/** Call with the bytes streamed so far before and after a chunk. */
export const relieve = (before: number, after: number): void => {
  if (collect !== undefined && Math.floor(before / every) !== Math.floor(after / every)) collect()
}
