import { spawn } from "node:child_process"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { compile } from "@cairn/catalog/Catalog"
import { DatabaseKey } from "@cairn/domain/Ids"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { type Receipt } from "@cairn/domain/Receipt"
import { Layout, Log, Position } from "@cairn/store"
import { Databases } from "@cairn/store/Databases"
import { fullView, mutate, notes, principal, storeLayer, tempDir } from "./support/notes.js"

const repoRoot = join(import.meta.dirname, "..", "..", "..")
const fixture = join(import.meta.dirname, "fixtures", "crashWriter.ts")
/** The key crashWriter.ts writes to. */
const crashKey = "org-crash"

interface Ack {
  readonly request: MutateRequest
  readonly receipt: Receipt
}

/** Runs the child until it has acknowledged `atLeast` answers, then SIGKILLs it; returns the complete ack lines. */
const runAndKill = (dataDir: string, atLeast: number) =>
  Effect.async<{ readonly acks: ReadonlyArray<Ack>; readonly signal: string | null; readonly stderr: string }>((resume) => {
    // node itself with the tsx loader (not the tsx CLI, which would run the load in a grandchild that SIGKILL misses).
    const child = spawn(process.execPath, ["--import", "tsx", fixture, dataDir], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    let killed = false
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk
      if (!killed && out.split("\n").length > atLeast) {
        killed = true
        child.kill("SIGKILL")
      }
    })
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk))
    child.on("exit", (_code, signal) => {
      // The last line may be cut mid-write: only complete lines were acknowledged.
      const lines = out.split("\n").slice(0, -1)
      resume(Effect.succeed({ acks: lines.map((l) => JSON.parse(l) as Ack), signal, stderr: err }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("crash safety", () => {
  it.scoped("after SIGKILL under load every acknowledged receipt is present, replays are identical, the log has no gap", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const { acks, signal, stderr } = yield* runAndKill(dataDir, 600)
      assert.strictEqual(signal, "SIGKILL", stderr)
      assert.isAtLeast(acks.length, 600)
      assert.isTrue(acks.some((a) => a.receipt.outcome === "rejected"))

      yield* Effect.gen(function* () {
        const view = yield* fullView
        // Every acknowledged answer replays identically from the reopened file.
        for (const ack of acks) {
          const replay = yield* mutate({ view, principal: principal("crash", crashKey), request: ack.request }).pipe(
            Effect.catchAll((error) =>
              error._tag === "OperationRejected" && error.receipt ? Effect.succeed(error.receipt) : Effect.fail(error)
            )
          )
          assert.deepStrictEqual(replay, ack.receipt)
        }

        const catalog = yield* Effect.orDie(compile(notes))
        const note = catalog.entity("Note")!
        const { commits, rows, receipts } = yield* Effect.scoped(
          Effect.gen(function* () {
            const db = yield* (yield* Databases).activate(DatabaseKey.make(crashKey))
            return {
              commits: yield* Effect.orDie(Log.commitsAfter(db.reader, 0, 1_000_000)),
              rows: yield* Effect.orDie(db.reader.unsafe<Record<string, unknown>>(`SELECT * FROM "Note"`)),
              receipts: yield* Effect.orDie(
                db.reader.unsafe<{ invocation_id: string; outcome: string; receipt: string }>(`SELECT invocation_id, outcome, receipt FROM _cairn_receipts`)
              )
            }
          })
        )
        // Positions 1..N without a gap; every acknowledged commit is among them.
        assert.deepStrictEqual(commits.map((c) => c.position), commits.map((_, i) => i + 1))
        const maxAcked = Math.max(...acks.filter((a) => a.receipt.outcome === "committed").map((a) => Position.decode(a.receipt.position)!))
        assert.isAtLeast(commits.length, maxAcked)
        // Every commit has its receipt, and only committed receipts have commits.
        const committedReceipts = new Set(receipts.filter((r) => r.outcome === "committed").map((r) => r.invocation_id))
        assert.deepStrictEqual(new Set(commits.map((c) => c.invocationId)), committedReceipts)
        // No partial commit: replaying every commit's changes from empty gives exactly the stored rows.
        const state = new Map<string, unknown>()
        for (const commit of commits) {
          for (const change of commit.changes) {
            assert.deepStrictEqual(change.before ?? undefined, state.get(change.id) as any, `before image at position ${commit.position}`)
            if (change.after === null) state.delete(change.id)
            else state.set(change.id, change.after)
          }
        }
        const stored = new Map(rows.map((r) => [String(r["id"]), Layout.decodeRecord(note, r)]))
        assert.deepStrictEqual(stored, state)
      }).pipe(Effect.provide(storeLayer({ dataDir })))
    }))
})
