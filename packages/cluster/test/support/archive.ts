/**
 * The archive tests' world: a small counters catalog (create, bump, finish — rejected when done),
 * a store over a data directory with `PgArchive` on a real PostgreSQL and a real filesystem object
 * store (shared by every store of a test, as processes on one machine share `CAIRN_OBJECT_DIR`),
 * an object store wrapper a test can hold or break, and readers of files and of the archive's tables.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Context, Deferred, Effect, Layer, Redacted, Schema } from "effect"
import { v7 as uuidv7 } from "uuid"
import { Entity, Operation, RootSchema } from "@cairn/catalog"
import { type Catalog, compile } from "@cairn/catalog/Catalog"
import { View } from "@cairn/catalog/View"
import { DatabaseKey, InvocationIdFromString } from "@cairn/domain/Ids"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { Principal } from "@cairn/domain/Principal"
import { operationRef } from "@cairn/domain/References"
import { Handler, Handlers } from "@cairn/store"
import { Archive } from "@cairn/store/Archive"
import { Databases } from "@cairn/store/Databases"
import { mutate as mutateIn } from "@cairn/store/Mutate"
import { MutationGuard } from "@cairn/store/MutationGuard"
import { makeFilesystem, ObjectStore, ObjectStoreError, type ObjectStoreShape } from "@cairn/store/ObjectStore"
import { OperationCatalog } from "@cairn/store/OperationCatalog"
import { StoreConfig } from "@cairn/store/StoreConfig"
import * as PgArchive from "@cairn/cluster/archive/PgArchive"

/** The counters catalog; `evolved` adds an optional field (an additive catalog change). */
const define = (evolved: boolean) => {
  const Counter = Entity.make("Counter", {
    description: "A named counter.",
    fields: { name: Schema.String, count: Schema.Int, done: Schema.Boolean, ...(evolved ? { note: Schema.optional(Schema.String) } : {}) }
  })
  const CounterCreate = Operation.make({
    owner: Counter,
    name: "create",
    description: "Create a counter.",
    targeted: false,
    input: Schema.Struct({ name: Schema.String, note: Schema.optional(Schema.String) }),
    output: Schema.Struct({ id: Schema.String })
  })
  const CounterBump = Operation.make({
    owner: Counter,
    name: "bump",
    description: "Add to it.",
    targeted: true,
    input: Schema.Struct({ by: Schema.Int }),
    output: Schema.Struct({ count: Schema.Int })
  })
  const CounterFinish = Operation.make({
    owner: Counter,
    name: "finish",
    description: "Mark it done; rejected when it is done already.",
    targeted: true,
    input: Schema.Struct({}),
    output: Schema.Struct({})
  })
  const root = RootSchema.make("counters", { entities: [Counter], operations: [CounterCreate, CounterBump, CounterFinish] })
  // Loosely typed: the entity's shape depends on `evolved`; the handlers are the same either way.
  const handlers = Handlers.make({ entities: [Counter], operations: [CounterCreate, CounterBump, CounterFinish] }, {
    "Counter.create": ({ input, tx }: any) =>
      Effect.map(tx.insert("Counter", { name: input.name, count: 0, done: false, ...(evolved && input.note ? { note: input.note } : {}) }), (id) => ({ id })),
    "Counter.bump": ({ input, target, tx }: any) => Effect.map(tx.patch("Counter", target.id, { count: target.count + input.by }), (c: any) => ({ count: c.count })),
    "Counter.finish": ({ target, tx }: any) => (target.done ? Handler.reject("It is done already.") : Effect.as(tx.patch("Counter", target.id, { done: true }), {}))
  } as any)
  return { root, handlers, catalog: Effect.orDie(compile(root)) as Effect.Effect<Catalog> }
}
const v1 = define(false)
const v2 = define(true)
export const counters = v1.root
export const catalog: Effect.Effect<Catalog> = v1.catalog
export const evolvedCatalog: Effect.Effect<Catalog> = v2.catalog

export const tempDir = (prefix = "cairn-archive-") =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

/** The object store of a test, with switches: `failPuts` makes every put fail; `hold` makes puts wait for it. */
export interface Switchboard {
  failPuts: boolean
  hold: Deferred.Deferred<void> | undefined
  puts: number
}
export const switchboard = (): Switchboard => ({ failPuts: false, hold: undefined, puts: 0 })

export const wrapStore = (inner: ObjectStoreShape, switches: Switchboard): ObjectStoreShape => ({
  ...inner,
  put: (databaseId, body, limit) =>
    Effect.gen(function* () {
      if (switches.hold) yield* Deferred.await(switches.hold)
      if (switches.failPuts) return yield* new ObjectStoreError({ cause: new Error("injected put failure") })
      const blob = yield* inner.put(databaseId, body, limit)
      switches.puts += 1
      return blob
    })
})

export const pgLayer = (url: string) => PgClient.layer({ url: Redacted.make(url) })

export interface StoreOptions {
  readonly dataDir: string
  readonly objects: ObjectStoreShape
  readonly pgUrl: string
  readonly settings?: Partial<PgArchive.ArchiveSettings>
  /** The evolved catalog (an added optional field). */
  readonly evolved?: boolean
}

/** One "process": `Databases` over `dataDir`, archived in PostgreSQL + the shared object store. */
export const storeLayer = (options: StoreOptions) =>
  Databases.Default.pipe(
    Layer.provide(PgArchive.layerWith({ ...PgArchive.defaults, ...options.settings })),
    Layer.provide(Layer.succeed(ObjectStore, options.objects)),
    Layer.provide(pgLayer(options.pgUrl)),
    Layer.provide(StoreConfig.layer({ dataDir: options.dataDir })),
    Layer.provide(options.evolved ? OperationCatalog.layer(v2.catalog, v2.handlers) : OperationCatalog.layer(v1.catalog, v1.handlers)),
    Layer.provide(Layer.succeed(MutationGuard, { check: () => Effect.void }))
  )

export const filesystemStore = (root: string) => makeFilesystem(root)

export const KEY = "org-acme"
export const principal = (databaseKey = KEY) =>
  new Principal({ subject: "alice", roles: [], claims: {}, scopes: [], databaseKey: DatabaseKey.make(databaseKey) })

export const request = (name: string, input: unknown, target?: string, invocationId?: string): MutateRequest => ({
  operation: operationRef("Counter", name),
  input,
  invocationId: Schema.decodeSync(InvocationIdFromString)(invocationId ?? uuidv7()),
  ...(target !== undefined ? { target: { kind: "entity", entity: "Counter", id: target } } : {})
})

/** `mutate` as the DataPlane calls it, in the store of `context`. */
export const mutate = (context: Context.Context<Databases>, req: MutateRequest, databaseKey = KEY) =>
  Effect.gen(function* () {
    const view = View.full(yield* catalog)
    const databases = Context.get(context, Databases)
    return yield* databases.withDatabase(DatabaseKey.make(databaseKey), (database) =>
      mutateIn({ view, principal: principal(databaseKey), request: req, database })
    )
  })

/** Rows of `text` in the open database of `databaseKey` (its reader). */
export const rows = (context: Context.Context<Databases>, text: string, databaseKey = KEY) =>
  Effect.scoped(
    Effect.flatMap(Context.get(context, Databases).activate(DatabaseKey.make(databaseKey)), (db) =>
      Effect.orDie(db.reader.unsafe<Record<string, unknown>>(text))
    )
  )

/** What a database file holds: its rows, its log and its receipts (closed again). */
export const fileState = (filename: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqliteClient.make({ filename })
      const read = (text: string) => Effect.orDie(sql.unsafe<Record<string, unknown>>(text))
      return {
        counters: yield* read(`SELECT * FROM "Counter" ORDER BY id`),
        commits: yield* read(`SELECT position, invocation_id, operation, target_entity, target_id, intent, subject, receipt, changes, committed_at FROM _cairn_commits ORDER BY position`),
        receipts: yield* read(`SELECT * FROM _cairn_receipts ORDER BY invocation_id`)
      }
    })
  ).pipe(Effect.orDie, Effect.provide(Reactivity.layer))

/** The archive's tables for one database. */
export const archiveRows = (databaseId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const heads = yield* sql<Record<string, unknown>>`SELECT * FROM cairn_archive_heads WHERE db_id = ${databaseId}`
    const segments = yield* sql<Record<string, unknown>>`SELECT * FROM cairn_archive_segments WHERE db_id = ${databaseId} ORDER BY seq`
    const snapshots = yield* sql<Record<string, unknown>>`SELECT * FROM cairn_archive_snapshots WHERE db_id = ${databaseId} ORDER BY seq`
    return {
      head: heads[0] === undefined ? undefined : { epoch: Number(heads[0].epoch), seq: Number(heads[0].seq), position: Number(heads[0].position) },
      segments: segments.map((s) => ({ seq: Number(s.seq), from: Number(s.first_position), to: Number(s.last_position), sha256: String(s.sha256) })),
      snapshots: snapshots.map((s) => ({ seq: Number(s.seq), position: Number(s.position), sha256: String(s.sha256) }))
    }
  }).pipe(Effect.orDie)

/**
 * One test's archive world: a fresh PostgreSQL database (`url`), a filesystem object store shared by
 * its "processes", a data directory, and the archive's context (PostgreSQL + object store) for reads.
 */
export const archiveWorld = (url: string) =>
  Effect.gen(function* () {
    const objects = filesystemStore(yield* tempDir())
    const dataDir = yield* tempDir()
    const pgc = yield* Layer.build(pgLayer(url))
    const archive = Context.merge(pgc, Context.make(ObjectStore, objects))
    return { url, objects, dataDir, pgc, archive }
  })
