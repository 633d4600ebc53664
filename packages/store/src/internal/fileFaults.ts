/**
 * What the store checks of a database file outside SQLite: what is at its path before SQLite opens
 * it, whether an open file is still the one at its path, and which SQLite failures mean a damaged
 * file. Each answers a `StorageFault`, never recreates or overwrites anything.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs"
import { Cause, Effect } from "effect"
import { type DatabaseId } from "@cairn/domain/Ids"
import { type FaultKind, StorageFault } from "../StorageFault.js"

export const fault = (id: DatabaseId, kind: FaultKind, detail: string): StorageFault => new StorageFault({ databaseId: id, kind, detail })

const sqliteHeader = "SQLite format 3\u0000"

/** What is at `filename` before SQLite opens it (which would create a missing file or write an empty one). */
export const inspect = (id: DatabaseId, filename: string): Effect.Effect<void, StorageFault> =>
  Effect.suspend(() => {
    const stat = statSync(filename, { throwIfNoEntry: false })
    if (stat === undefined) return Effect.fail(fault(id, "missing", "its file does not exist"))
    if (stat.size === 0) return Effect.fail(fault(id, "empty", "its file is empty"))
    const header = Buffer.alloc(16)
    const fd = openSync(filename, "r")
    try {
      readSync(fd, header, 0, 16, 0)
    } finally {
      closeSync(fd)
    }
    return header.toString("latin1") === sqliteHeader
      ? Effect.void
      : Effect.fail(fault(id, "corrupt", "its file is not a SQLite database"))
  })

/** Which file a path names: a file deleted or replaced under an open connection has another identity. */
export interface FileIdentity {
  readonly dev: number
  readonly ino: number
}

export const identityOf = (filename: string): FileIdentity => {
  const stat = statSync(filename)
  return { dev: stat.dev, ino: stat.ino }
}

/** Whether the open file is still at its path: not removed (with `databases/` or alone), replaced or truncated; else its fault. */
export const fileFault = (id: DatabaseId, filename: string, identity: FileIdentity): StorageFault | undefined => {
  const stat = statSync(filename, { throwIfNoEntry: false })
  if (stat === undefined) return fault(id, "missing", "its file was removed while open")
  if (stat.dev !== identity.dev || stat.ino !== identity.ino) return fault(id, "missing", "its file was replaced while open")
  if (stat.size === 0) return fault(id, "empty", "its file was truncated while open")
  return undefined
}

/**
 * A file SQLite reports as damaged or not a database is `corrupt`, whatever the statement that
 * found it; any other failure (interruption, no file descriptors left) stays an ordinary one.
 */
export const damaged = <E>(id: DatabaseId, cause: Cause.Cause<E>): Effect.Effect<never, E | StorageFault> => {
  const error = Cause.squash(cause)
  const code = (e: unknown) => (e as { readonly code?: unknown } | undefined)?.code
  const found = [code(error), code((error as { readonly cause?: unknown } | undefined)?.cause)].find((c) => typeof c === "string")
  return typeof found === "string" && (found.startsWith("SQLITE_CORRUPT") || found === "SQLITE_NOTADB")
    ? Effect.fail(fault(id, "corrupt", `unreadable: ${String(error)}`))
    : Effect.failCause(cause)
}
