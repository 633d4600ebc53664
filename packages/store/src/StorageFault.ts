/**
 * Storage faults: a registered database whose file is gone, emptied, damaged, swapped for
 * another database's file or older than what was committed. Never repaired by recreating
 * the file: the database is refused (the operator restores it) while every other one works.
 */
import { Data, Metric } from "effect"

export type FaultKind = "missing" | "empty" | "corrupt" | "foreign" | "rolled_back"

/** Operator-facing: names the internal id and what was found; log it, never show it to a caller. */
export class StorageFault extends Data.TaggedError("StorageFault")<{
  readonly databaseId: string
  readonly kind: FaultKind
  readonly detail: string
}> {
  override get message(): string {
    return `Storage fault (${this.kind}) in database ${this.databaseId}: ${this.detail}. Nothing was recreated or overwritten; restore the file with the server stopped.`
  }
}

export const storageFaults = Metric.counter("cairn_storage_faults_total", {
  description: "Storage faults detected, by kind: missing, empty, corrupt, foreign, rolled_back",
  incremental: true
})
