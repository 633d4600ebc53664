/**
 * Storage faults: a registered database whose file is gone, emptied, damaged, swapped for
 * another database's file or older than what was committed. Never repaired by recreating
 * the file: the database is refused (the operator repairs or restores it and clears the fault,
 * online: see `DatabaseAdmin`) while every other one works.
 */
import { Cause, Data, Effect, Metric } from "effect"

export type FaultKind = "missing" | "empty" | "corrupt" | "foreign" | "rolled_back"

/** Operator-facing: names the internal id and what was found; log it, never show it to a caller. */
export class StorageFault extends Data.TaggedError("StorageFault")<{
  readonly databaseId: string
  readonly kind: FaultKind
  readonly detail: string
}> {
  override get message(): string {
    return `Storage fault (${this.kind}) in database ${this.databaseId}: ${this.detail}. Nothing was recreated or overwritten; repair its file and clear the fault (cairn doctor --clear-fault), or restore it online (cairn restore), while every other database keeps serving.`
  }
}

export const storageFaults = Metric.counter("cairn_storage_faults_total", {
  description: "Storage faults detected, by kind: missing, empty, corrupt, foreign, rolled_back, full_disk, io_error",
  incremental: true
})

/** Faults SQLite or the OS report while writing: a full disk, an I/O error, a damaged page. */
export type WriteFaultKind = "full_disk" | "io_error" | "corrupt"

const kindOfCode = (code: unknown): WriteFaultKind | undefined => {
  if (typeof code !== "string") return undefined
  if (code === "SQLITE_FULL" || code === "ENOSPC" || code === "EDQUOT") return "full_disk"
  if (code.startsWith("SQLITE_IOERR") || code === "EIO") return "io_error"
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") return "corrupt"
  return undefined
}

/** The storage fault behind a failed write, if any: the first error code found along each error's `cause` chain. */
export const classify = (cause: Cause.Cause<unknown>): WriteFaultKind | undefined => {
  for (const error of [...Cause.failures(cause), ...Cause.defects(cause)]) {
    let current: unknown = error
    for (let depth = 0; depth < 6 && typeof current === "object" && current !== null; depth++) {
      const kind = kindOfCode((current as { code?: unknown }).code)
      if (kind !== undefined) return kind
      current = (current as { cause?: unknown }).cause
    }
  }
  return undefined
}

/** Counts the storage fault behind a failed write (nothing when the failure is not one). */
export const countWriteFault = (cause: Cause.Cause<unknown>) => {
  const kind = classify(cause)
  return kind === undefined ? Effect.void : Metric.increment(Metric.tagged(storageFaults, "kind", kind))
}
