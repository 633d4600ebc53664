/**
 * A small catalog for store tests (notes with a counter) and its handlers, with
 * switches a test flips to hold the writer on a latch, or make a handler fail with a defect
 * or wait for something asynchronous;
 * plus a temp data directory, the store layers over it, a permissive mutation guard
 * (tests only: production provides the policy's), and `mutate` as the DataPlane calls it.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Deferred, Effect, Layer, Option, Schema } from "effect"
import { v7 as uuidv7 } from "uuid"
import { Entity, Operation, RootSchema } from "@cairn/catalog"
import { type Catalog, compile } from "@cairn/catalog/Catalog"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationIdFromString } from "@cairn/domain/Ids"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { operationRef } from "@cairn/domain/References"
import { Principal } from "@cairn/domain/Principal"
import { Handler, Handlers, Writer } from "@cairn/store"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { mutate as mutateIn, type MutateArgs } from "@cairn/store/Mutate"
import { type MutationGuardShape, MutationGuard } from "@cairn/store/MutationGuard"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig, type StoreConfigShape } from "@cairn/store/StoreConfig"

export const Note = Entity.make("Note", {
  description: "A note with a counter.",
  fields: {
    title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
    done: Schema.Boolean,
    count: Schema.Int,
    tag: Schema.optional(Schema.String)
  },
  indexes: [["title"]]
})

const Created = Schema.Struct({ id: Schema.String })
const Empty = Schema.Struct({})

export const NoteCreate = Operation.make({
  owner: Note,
  name: "create",
  description: "Create a note.",
  targeted: false,
  input: Schema.Struct({ title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)), tag: Schema.optional(Schema.String) }),
  output: Created
})
export const NoteFinish = Operation.make({
  owner: Note,
  name: "finish",
  description: "Mark the note done. Rejected if it is done already.",
  targeted: true,
  input: Empty,
  output: Empty
})
export const NoteBump = Operation.make({
  owner: Note,
  name: "bump",
  description: "Add to the note's counter.",
  targeted: true,
  input: Schema.Struct({ by: Schema.Int.pipe(Schema.between(1, 100)) }),
  output: Schema.Struct({ count: Schema.Int })
})
export const NoteCopy = Operation.make({
  owner: Note,
  name: "copy",
  description: "Copy the note (insert, then patch the counter in the same invocation).",
  targeted: true,
  input: Empty,
  output: Created
})
export const NoteRemove = Operation.make({
  owner: Note,
  name: "remove",
  description: "Delete the note.",
  targeted: true,
  input: Empty,
  output: Schema.Struct({ removed: Schema.Boolean })
})
export const NoteProbe = Operation.make({
  owner: Note,
  name: "probe",
  description: "Test switchboard: writes a note, then fails with a defect (or first waits for a promise) when told to.",
  targeted: false,
  input: Schema.Struct({ title: Schema.String }),
  output: Created
})

export const notes = RootSchema.make("notes", {
  entities: [Note],
  operations: [NoteCreate, NoteFinish, NoteBump, NoteCopy, NoteRemove, NoteProbe]
})

/** What the probe handler does; tests set these before invoking it. */
export interface Switches {
  /** Completed by the writer once a group holds the write connection (before its transaction). */
  entered?: Deferred.Deferred<void> | undefined
  /** While set, each group waits for it while holding the write connection. */
  latch: Deferred.Deferred<void> | undefined
  explode: boolean
  /** The probe awaits a promise (yields to the event loop) before writing. */
  awaitPromise?: boolean
}

/** The writer's test pause, driven by the switches. */
const pauseOf = (switches: Switches) =>
  Effect.suspend(() =>
    Effect.gen(function* () {
      if (switches.entered) yield* Deferred.succeed(switches.entered, undefined)
      if (switches.latch) yield* Deferred.await(switches.latch)
    })
  )

export const makeHandlers = (switches: Switches) =>
  Handlers.make(
    { entities: [Note], operations: [NoteCreate, NoteFinish, NoteBump, NoteCopy, NoteRemove, NoteProbe] },
    {
      "Note.create": ({ input, tx }) =>
        Effect.map(tx.insert("Note", { title: input.title, done: false, count: 0, ...(input.tag ? { tag: input.tag } : {}) }), (id) => ({ id })),
      "Note.finish": ({ target, tx }) =>
        target.done ? Handler.reject("This note is already done.") : Effect.as(tx.patch("Note", target.id, { done: true }), {}),
      "Note.bump": ({ input, target, tx }) =>
        Effect.map(tx.patch("Note", target.id, { count: target.count + input.by }), (note) => ({ count: note.count })),
      "Note.copy": ({ target, tx }) =>
        Effect.gen(function* () {
          const id = yield* tx.insert("Note", { title: target.title, done: false, count: 0 })
          yield* tx.patch("Note", id, { count: target.count })
          return { id }
        }),
      "Note.remove": ({ target, tx }) => Effect.map(tx.delete("Note", target.id), (removed) => ({ removed })),
      "Note.probe": ({ input, tx }) =>
        Effect.gen(function* () {
          if (switches.awaitPromise) yield* Effect.promise(() => Promise.resolve())
          const id = yield* tx.insert("Note", { title: input.title, done: false, count: 0 })
          const found = yield* tx.findBy("Note", { title: input.title })
          if (Option.isNone(yield* tx.get("Note", id)) || found.length === 0) return yield* Effect.dieMessage("own write not visible")
          if (switches.explode) return yield* Effect.dieMessage("probe exploded: secret detail 0xDEADBEEF")
          return { id }
        })
    }
  )

export const compiledNotes: Effect.Effect<Catalog> = Effect.orDie(compile(notes))

/** A temp directory removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "cairn-store-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Real time, for tests of the store's own timers (lingers, idle closes): they poll, never assert a duration. */
export const pause = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

export interface StoreOptions extends Partial<StoreConfigShape> {
  readonly dataDir: string
  readonly switches?: Switches
  readonly guard?: MutationGuardShape
  /** Another root schema with the same operations (catalog evolution tests). */
  readonly root?: RootSchema.RootSchema
}

/** Tests only: a guard that allows every invocation (the store's tests are not about policy). */
export const allowAll: MutationGuardShape = { check: () => Effect.void }

/** `Databases` over the notes catalog in `dataDir`, guarded by `guard` (default: `allowAll`). */
export const storeLayer = (options: StoreOptions) => {
  const { switches, guard, root, ...config } = options
  const catalog = root ? Effect.orDie(compile(root)) : compiledNotes
  return Databases.Default.pipe(
    Layer.provide(Layer.succeed(Writer.GroupPause, switches ? pauseOf(switches) : Effect.void)),
    Layer.provide(StoreConfig.layer(config)),
    Layer.provide(Archive.local),
    Layer.provide(OperationCatalog.layer(catalog, makeHandlers(switches ?? { latch: undefined, explode: false }))),
    Layer.provide(Layer.succeed(MutationGuard, guard ?? allowAll))
  )
}

export const principal = (subject = "alice", databaseKey = "org-acme") =>
  new Principal({ subject, roles: [], claims: {}, scopes: [], databaseKey: DatabaseKey.make(databaseKey) })

/** `mutate` as the DataPlane calls it: the principal's database activated for the call. */
export const mutate = (args: Omit<MutateArgs, "database">) =>
  Effect.scoped(
    Effect.flatMap(Databases, (databases) =>
      Effect.flatMap(databases.activate(args.principal.databaseKey), (database) => mutateIn({ ...args, database }))
    )
  )

/** The caller's database, held for the scope. */
export const activate = (databaseKey: string) => Effect.flatMap(Databases, (d) => d.activate(DatabaseKey.make(databaseKey)))

export const request = (
  owner: string,
  name: string,
  input: unknown,
  options: { readonly target?: string; readonly invocationId?: string; readonly ifCatalog?: string } = {}
): MutateRequest => ({
  operation: operationRef(owner, name),
  input,
  invocationId: Schema.decodeSync(InvocationIdFromString)(options.invocationId ?? uuidv7()),
  ...(options.target !== undefined ? { target: { kind: "entity", entity: owner, id: options.target } } : {}),
  ...(options.ifCatalog !== undefined ? { ifCatalog: options.ifCatalog } : {})
})

export const fullView = Effect.map(compiledNotes, View.full)
