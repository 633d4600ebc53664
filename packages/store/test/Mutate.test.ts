import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { v4 as uuidv4, v7 as uuidv7 } from "uuid"
import { View } from "@cairn/catalog/View"
import { decodeMutateRequest } from "@cairn/domain/RequestDecoders"
import { Inaccessible, OperationRejected } from "@cairn/domain/PublicError"
import { Receipt } from "@cairn/domain/Receipt"
import { Log, Position } from "@cairn/store"
import { Databases } from "@cairn/store/Databases"
import { type MutationGuardShape } from "@cairn/store/MutationGuard"
import { compiledNotes, fullView, mutate, principal, request, storeLayer, tempDir } from "./support/notes.js"

const inStore = <A, E>(effect: Effect.Effect<A, E, Databases>, options: Omit<Parameters<typeof storeLayer>[0], "dataDir"> = {}) =>
  Effect.flatMap(tempDir, (dataDir) => Effect.provide(effect, storeLayer({ dataDir, ...options })))

const create = (title: string, options: { readonly invocationId?: string; readonly subject?: string } = {}) =>
  Effect.flatMap(fullView, (view) =>
    mutate({ view, principal: principal(options.subject), request: request("Note", "create", { title }, options) })
  )

const on = (name: string, id: string, input: unknown = {}, options: { readonly invocationId?: string; readonly subject?: string } = {}) =>
  Effect.flatMap(fullView, (view) =>
    mutate({ view, principal: principal(options.subject), request: request("Note", name, input, { ...options, target: id }) })
  )

const idOf = (receipt: Receipt) => (receipt.output as { readonly id: string }).id

/** Rows of the caller's database, through its read-only connection. */
const rows = (text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.scoped(
    Effect.gen(function* () {
      const db = yield* (yield* Databases).activate(principal().databaseKey)
      return yield* Effect.orDie(db.reader.unsafe<Record<string, any>>(text, params))
    })
  )

describe("mutate", () => {
  it.scoped("commits an operation and returns its durable receipt", () =>
    inStore(
      Effect.gen(function* () {
        const view = yield* fullView
        const invocationId = uuidv7()
        const receipt = yield* create("First", { invocationId })
        assert.deepStrictEqual(Schema.decodeUnknownSync(Receipt)(receipt), receipt)
        assert.strictEqual(receipt.invocationId, invocationId)
        assert.deepStrictEqual(receipt.operation, { kind: "operation", owner: { kind: "entity", name: "Note" }, name: "create" })
        assert.strictEqual(receipt.outcome, "committed")
        assert.strictEqual(receipt.position, Position.encode(1))
        assert.strictEqual(receipt.catalogToken, view.token)
        assert.match(receipt.committedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        assert.isUndefined(receipt.target)
        const id = idOf(receipt)
        assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7/)

        const notes = yield* rows(`SELECT * FROM "Note"`)
        assert.deepStrictEqual(notes, [{ id, title: "First", done: 0, count: 0, tag: null }])
        const commits = yield* rows(`SELECT * FROM _cairn_commits`)
        assert.strictEqual(commits.length, 1)
        assert.strictEqual(commits[0]!.position, 1)
        assert.strictEqual(commits[0]!.operation, "Note.create")
        assert.strictEqual(commits[0]!.subject, "alice")
        assert.deepStrictEqual(JSON.parse(commits[0]!.receipt), receipt)
        assert.deepStrictEqual(JSON.parse(commits[0]!.changes), [
          { entity: "Note", id, before: null, after: { id, title: "First", done: false, count: 0 } }
        ])

        const targeted = yield* on("bump", id, { by: 5 })
        assert.deepStrictEqual(targeted.target, { kind: "entity", entity: "Note", id })
        assert.deepStrictEqual(targeted.output, { count: 5 })
        assert.strictEqual(targeted.position, Position.encode(2))
        const db = yield* Effect.scoped(Effect.flatMap(Databases, (d) => Effect.flatMap(d.activate(principal().databaseKey), (x) => x.position)))
        assert.strictEqual(db, 2)
      })
    ))

  it.scoped("records before and after images, folding several writes to one row", () =>
    inStore(
      Effect.gen(function* () {
        const id = idOf(yield* create("Original"))
        yield* on("bump", id, { by: 3 })
        const copy = idOf(yield* on("copy", id))
        yield* on("remove", id)
        const commits = yield* Effect.scoped(
          Effect.flatMap(Databases, (d) => Effect.flatMap(d.activate(principal().databaseKey), (db) => Effect.orDie(Log.commitsAfter(db.reader, 0, 10))))
        )
        assert.deepStrictEqual(
          commits.map((c) => [c.position, c.operation, c.targetId]),
          [[1, "Note.create", null], [2, "Note.bump", id], [3, "Note.copy", id], [4, "Note.remove", id]]
        )
        const note = (count: number, noteId = id, title = "Original") => ({ id: noteId, title, done: false, count })
        assert.deepStrictEqual(commits[1]!.changes, [{ entity: "Note", id, before: note(0), after: note(3) }])
        // insert then patch in one invocation: one change, from nothing to the final row
        assert.deepStrictEqual(commits[2]!.changes, [{ entity: "Note", id: copy, before: null, after: note(3, copy) }])
        assert.deepStrictEqual(commits[3]!.changes, [{ entity: "Note", id, before: note(3), after: null }])
      })
    ))

  // A stale ifCatalog is catalog_changed before any database is activated: the DataPlane's
  // check, the same for every request kind (end to end in packages/mcp McpOAuthFlow.test.ts).
  it.scoped("ifCatalog is not mutate's to check: the DataPlane refuses a stale one before activation", () =>
    inStore(
      Effect.gen(function* () {
        const view = yield* fullView
        const ok = yield* mutate({ view, principal: principal(), request: request("Note", "create", { title: "x" }, { ifCatalog: view.token }) })
        assert.strictEqual(ok.outcome, "committed")
        const unchecked = yield* mutate({ view, principal: principal(), request: request("Note", "create", { title: "y" }, { ifCatalog: "stale-token" }) })
        assert.strictEqual(unchecked.outcome, "committed")
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM "Note"`))[0]!.n, 2)
      })
    ))

  it.scoped("unknown and hidden operations are inaccessible with the same message", () =>
    inStore(
      Effect.gen(function* () {
        const catalog = yield* compiledNotes
        const narrow = new View(catalog, { ...View.full(catalog).rules, operation: (_owner, name) => name !== "bump" })
        const hidden = yield* mutate({ view: narrow, principal: principal(), request: request("Note", "bump", { by: 1 }, { target: "x" }) }).pipe(Effect.flip)
        const missing = yield* mutate({ view: View.full(catalog), principal: principal(), request: request("Note", "nothing", {}, { target: "x" }) }).pipe(Effect.flip)
        const noOwner = yield* mutate({ view: View.full(catalog), principal: principal(), request: request("Ghost", "bump", {}) }).pipe(Effect.flip)
        assert.strictEqual(hidden._tag, "Inaccessible")
        assert.strictEqual(missing._tag, "Inaccessible")
        assert.strictEqual(noOwner._tag, "Inaccessible")
        assert.strictEqual(hidden.message.replace('.bump"', ".NAME\""), missing.message.replace('.nothing"', ".NAME\""))
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts`))[0]!.n, 0)
      })
    ))

  it.scoped("target must be present exactly for targeted operations, and name the owner entity", () =>
    inStore(
      Effect.gen(function* () {
        const view = yield* fullView
        const run = (req: ReturnType<typeof request>) => Effect.flip(mutate({ view, principal: principal(), request: req }))
        const missing = yield* run(request("Note", "finish", {}))
        assert.strictEqual(missing._tag, "InvalidInput")
        assert.deepStrictEqual(missing._tag === "InvalidInput" && missing.issues?.map((i) => i.path), ["/target"])
        const extra = yield* run(request("Note", "create", { title: "t" }, { target: "abc" }))
        assert.strictEqual(extra._tag, "InvalidInput")
        assert.deepStrictEqual(extra._tag === "InvalidInput" && extra.issues?.map((i) => i.path), ["/target"])
        const wrongEntity = yield* run({
          ...request("Note", "finish", {}),
          target: { kind: "entity", entity: "Other", id: "abc" }
        })
        assert.strictEqual(wrongEntity._tag, "InvalidInput")
        assert.deepStrictEqual(wrongEntity._tag === "InvalidInput" && wrongEntity.issues?.map((i) => i.path), ["/target/entity"])
      })
    ))

  it.scoped("a target that does not exist is inaccessible, and nothing is stored", () =>
    inStore(
      Effect.gen(function* () {
        const invocationId = uuidv7()
        const error = yield* on("finish", uuidv7(), {}, { invocationId }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "Inaccessible")
        assert.notInclude(error.message, "exist ")
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts`))[0]!.n, 0)
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_commits`))[0]!.n, 0)
      })
    ))

  it.scoped("input not matching the schema is invalid_input with the failing paths", () =>
    inStore(
      Effect.gen(function* () {
        const view = yield* fullView
        const error = yield* mutate({
          view,
          principal: principal(),
          request: request("Note", "create", { title: "", tag: 7, colour: "red" })
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidInput")
        const paths = error._tag === "InvalidInput" ? [...new Set((error.issues ?? []).map((i) => i.path))].sort() : []
        assert.deepStrictEqual(paths, ["/input/colour", "/input/tag", "/input/title"])
        const absent = yield* mutate({ view, principal: principal(), request: { ...request("Note", "create", {}), input: undefined } }).pipe(Effect.flip)
        assert.strictEqual(absent._tag, "InvalidInput")
        assert.deepStrictEqual(absent._tag === "InvalidInput" && absent.issues?.map((i) => i.path), ["/input/title"])
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM "Note"`))[0]!.n, 0)
      })
    ))

  it.scoped("invocationId must be a UUIDv7", () =>
    inStore(
      Effect.gen(function* () {
        // Decoded once, by the request decoder every transport uses, before mutate runs.
        for (const invocationId of [uuidv4(), "not-a-uuid", "", uuidv7().slice(0, 30)]) {
          const error = yield* decodeMutateRequest({ ...request("Note", "create", { title: "x" }), invocationId }).pipe(Effect.flip)
          assert.strictEqual(error._tag, "InvalidInput")
          assert.deepStrictEqual(error.issues?.map((i) => i.path), ["/invocationId"])
          assert.include(error.message, "invocationId must be a UUIDv7 (time-ordered UUID) that names this one intent.")
        }
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM "Note"`))[0]!.n, 0)
      })
    ))

  it.scoped("the same invocationId and intent returns the stored receipt; a changed intent is invocation_conflict", () =>
    inStore(
      Effect.gen(function* () {
        const invocationId = uuidv7()
        const first = yield* create("Once", { invocationId })
        const again = yield* create("Once", { invocationId })
        assert.deepStrictEqual(again, first)
        // The same intent with the id in upper case is the same invocation.
        assert.deepStrictEqual(yield* create("Once", { invocationId: invocationId.toUpperCase() }), first)

        const changedInput = yield* create("Twice", { invocationId }).pipe(Effect.flip)
        assert.strictEqual(changedInput._tag, "InvocationConflict")
        const changedCaller = yield* create("Once", { invocationId, subject: "bob" }).pipe(Effect.flip)
        assert.strictEqual(changedCaller._tag, "InvocationConflict")
        const id = idOf(first)
        const bumpId = uuidv7()
        yield* on("bump", id, { by: 1 }, { invocationId: bumpId })
        const other = idOf(yield* create("Other"))
        const changedTarget = yield* on("bump", other, { by: 1 }, { invocationId: bumpId }).pipe(Effect.flip)
        assert.strictEqual(changedTarget._tag, "InvocationConflict")
        const changedOperation = yield* on("finish", id, {}, { invocationId: bumpId }).pipe(Effect.flip)
        assert.strictEqual(changedOperation._tag, "InvocationConflict")

        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM "Note"`))[0]!.n, 2)
        assert.deepStrictEqual((yield* rows(`SELECT position FROM _cairn_commits ORDER BY position`)).map((r) => r.position), [1, 2, 3])
        assert.strictEqual((yield* rows(`SELECT count FROM "Note" WHERE id = ?`, [id]))[0]!.count, 1)
      })
    ))

  it.scoped("a rejection is a stored receipt: operation_rejected with the reason, replayed identically", () =>
    inStore(
      Effect.gen(function* () {
        const id = idOf(yield* create("Chore"))
        yield* on("finish", id)
        const invocationId = uuidv7()
        const rejected = yield* on("finish", id, {}, { invocationId }).pipe(Effect.flip)
        assert.strictEqual(rejected._tag, "OperationRejected")
        assert.strictEqual(rejected.message, "This note is already done.")
        const receipt = rejected._tag === "OperationRejected" ? rejected.receipt! : undefined
        assert.strictEqual(receipt?.outcome, "rejected")
        assert.strictEqual(receipt?.reason, "This note is already done.")
        assert.isUndefined(receipt?.output)
        assert.strictEqual(receipt?.position, Position.encode(2))
        // Later changes do not alter the decided answer.
        yield* on("bump", id, { by: 1 })
        const replay = yield* on("finish", id, {}, { invocationId }).pipe(Effect.flip)
        assert.strictEqual(replay._tag, "OperationRejected")
        assert.strictEqual(replay.message, rejected.message)
        assert.deepStrictEqual(replay._tag === "OperationRejected" && replay.receipt, receipt)
        // Rejections hold no position in the log.
        assert.deepStrictEqual((yield* rows(`SELECT position FROM _cairn_commits ORDER BY position`)).map((r) => r.position), [1, 2, 3])
        assert.deepStrictEqual(
          (yield* rows(`SELECT outcome FROM _cairn_receipts ORDER BY position, outcome`)).map((r) => r.outcome),
          ["committed", "committed", "rejected", "committed"]
        )
      })
    ))

  it.scoped("the mutation guard runs in the transaction: inaccessible stores nothing, a rejection is a receipt", () => {
    const guard: MutationGuardShape = {
      check: ({ principal: p, target, operation, tx }) =>
        Effect.gen(function* () {
          if (p.subject === "mallory") return yield* new Inaccessible({ message: "No accessible Note has this id." })
          if (target && target["title"] === "Locked" && operation.name !== "create") {
            // The guard reads through the same transaction the handler will write in.
            const same = yield* tx.findBy("Note", { title: "Locked" })
            const found = yield* tx.get("Note", String(target["id"]))
            if (same.length > 0 && Option.isSome(found)) return yield* new OperationRejected({ message: "Locked notes cannot change." })
          }
        })
    }
    return inStore(
      Effect.gen(function* () {
        const locked = idOf(yield* create("Locked"))
        const denied = yield* on("bump", locked, { by: 1 }, { subject: "mallory" }).pipe(Effect.flip)
        assert.strictEqual(denied._tag, "Inaccessible")
        const invocationId = uuidv7()
        const refused = yield* on("bump", locked, { by: 1 }, { invocationId }).pipe(Effect.flip)
        assert.strictEqual(refused._tag, "OperationRejected")
        assert.strictEqual(refused.message, "Locked notes cannot change.")
        const replay = yield* on("bump", locked, { by: 1 }, { invocationId }).pipe(Effect.flip)
        assert.deepStrictEqual(replay._tag === "OperationRejected" && replay.receipt, refused._tag === "OperationRejected" && refused.receipt)
        assert.strictEqual((yield* rows(`SELECT count FROM "Note"`))[0]!.count, 0)
        assert.strictEqual((yield* rows(`SELECT count(*) AS n FROM _cairn_receipts`))[0]!.n, 2)
      }),
      { guard }
    )
  })
})
