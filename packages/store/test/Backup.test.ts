import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import BetterSqlite3 from "better-sqlite3"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema, TestClock } from "effect"
import { Entity, RootSchema } from "@cairn/catalog"
import { compile } from "@cairn/catalog/Catalog"
import { type Receipt } from "@cairn/domain/Receipt"
import { DatabaseKey } from "@cairn/domain/Ids"
import { type MutateRequest } from "@cairn/domain/Mutate"
import { Backup, Layout, Log, Position, Restore } from "@cairn/store"
import { databaseId } from "@cairn/store/Databases"
import { sha256File } from "../src/internal/files.js"
import {
  activate,
  compiledNotes,
  fullView,
  mutate,
  Note,
  NoteBump,
  NoteCopy,
  NoteCreate,
  NoteFinish,
  NoteProbe,
  NoteRemove,
  principal,
  request,
  storeLayer,
  tempDir
} from "./support/notes.js"

const repoRoot = join(import.meta.dirname, "..", "..", "..")
const fixtures = join(import.meta.dirname, "fixtures")

interface Ack {
  readonly request: MutateRequest
  readonly receipt: Receipt
}

const key = "org-acme"
const idOf = (k: string) => databaseId(DatabaseKey.make(k))

/** One mutation as the DataPlane answers it: a receipt, or the stored rejection's receipt. */
const send = (req: MutateRequest, k = key, subject = "alice") =>
  Effect.flatMap(fullView, (view) => mutate({ view, principal: principal(subject, k), request: req })).pipe(
    Effect.map((receipt): Ack => ({ request: req, receipt })),
    Effect.catchAll((error) =>
      error._tag === "OperationRejected" && error.receipt ? Effect.succeed<Ack>({ request: req, receipt: error.receipt }) : Effect.fail(error)
    ),
    Effect.orDie
  )

/** A deterministic mix of creates, bumps, copies, finishes (the second one of a note is a stored rejection) and removes. */
const workload = (from: number, n: number, acks: Array<Ack>, ids: Array<string>) =>
  Effect.gen(function* () {
    for (let i = from; i < from + n; i++) {
      const k = i % 7
      const target = ids.length > 0 ? ids[(i * 7) % ids.length]! : undefined
      const req =
        k === 0 || target === undefined
          ? request("Note", "create", { title: `n${i}`, ...(i % 4 === 0 ? { tag: `t${i}` } : {}) })
          : k <= 2
            ? request("Note", "bump", { by: (i % 5) + 1 }, { target })
            : k <= 4
              ? request("Note", "finish", {}, { target })
              : k === 5
                ? request("Note", "copy", {}, { target })
                : request("Note", "remove", {}, { target })
      const ack = yield* send(req)
      acks.push(ack)
      if (ack.receipt.outcome !== "committed") continue
      if (k === 0 || k === 5 || target === undefined) ids.push((ack.receipt.output as { readonly id: string }).id)
      if (k === 6) ids.splice(ids.indexOf(target!), 1)
    }
  })

/** The oracle: rows at `through`, replayed from the live log's change images. */
const stateAt = (commits: ReadonlyArray<Log.Commit>, through: number) => {
  const state = new Map<string, unknown>()
  for (const commit of commits) {
    if (commit.position > through) break
    for (const change of commit.changes) {
      if (change.after === null) state.delete(change.id)
      else state.set(change.id, change.after)
    }
  }
  return state
}

/** Everything a database holds, through the store: its log, its rows (decoded) and its receipts. */
const contents = (k: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const db = yield* activate(k)
      const note = (yield* compiledNotes).entity("Note")!
      const rows = yield* Effect.orDie(db.reader.unsafe<Record<string, unknown>>(`SELECT * FROM "Note"`))
      return {
        position: yield* db.position,
        commits: yield* Effect.orDie(Log.commitsAfter(db.reader, 0, 1_000_000)),
        state: new Map<string, unknown>(rows.map((r) => [String(r["id"]), Layout.decodeRecord(note, r)])),
        receipts: new Set(
          (yield* Effect.orDie(db.reader.unsafe<{ invocation_id: string }>(`SELECT invocation_id FROM _cairn_receipts`))).map((r) => r.invocation_id)
        ),
        integrity: (yield* Effect.orDie(db.reader.unsafe<{ integrity_check: string }>("PRAGMA integrity_check")))[0]?.integrity_check
      }
    })
  )

/** The acknowledged answers a database restored to `through` must hold, and those it must not. */
const split = (acks: ReadonlyArray<Ack>, through: number) => {
  const at = (a: Ack) => Position.decode(a.receipt.position)!
  return {
    held: acks.filter((a) => (a.receipt.outcome === "committed" ? at(a) <= through : at(a) < through)),
    absent: acks.filter((a) => a.receipt.outcome === "committed" && at(a) > through)
  }
}

/** Checks a restored data directory against the live log at `through`: rows, log, receipts and replays. */
const checkRestored = (dataDir: string, k: string, live: ReadonlyArray<Log.Commit>, acks: ReadonlyArray<Ack>, through: number, subject = "alice") =>
  Effect.gen(function* () {
    const restored = yield* contents(k)
    assert.strictEqual(restored.integrity, "ok")
    assert.strictEqual(restored.position, through)
    assert.deepStrictEqual(restored.commits, live.filter((c) => c.position <= through))
    assert.deepStrictEqual(restored.state, stateAt(live, through))
    const { absent, held } = split(acks, through)
    assert.isAbove(held.length, 0)
    for (const ack of absent) assert.isFalse(restored.receipts.has(ack.receipt.invocationId), `receipt ${ack.receipt.position} is after the target`)
    // Every answer acknowledged at or before the target replays identically: same id and intent, the same stored receipt.
    for (const ack of held) assert.deepStrictEqual((yield* send(ack.request, k, subject)).receipt, ack.receipt)
    // Nothing was written by the replays.
    assert.strictEqual((yield* contents(k)).position, through)
  }).pipe(Effect.provide(storeLayer({ dataDir })))

const refusal = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.flatMap(Effect.flip(effect), (e) => {
    assert.strictEqual((e as { _tag?: string })._tag, "RestoreRefused", String(e))
    return Effect.succeed((e as unknown as Restore.RestoreRefused).message)
  })

// ---------------------------------------------------------------------------------------------

interface Child {
  readonly process: ChildProcess
  readonly lines: Array<string>
  stderr: string
  exit: Promise<NodeJS.Signals | null>
}

/** Node itself with the tsx loader (not the tsx CLI, whose grandchild a SIGKILL would miss); killed with the scope. */
const spawnChild = (fixture: string, args: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync((): Child => {
      const child = spawn(process.execPath, ["--import", "tsx", join(fixtures, fixture), ...args], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] })
      const state: Child = { process: child, lines: [], stderr: "", exit: new Promise((resolve) => child.on("exit", (_c, signal) => resolve(signal))) }
      let out = ""
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        out += chunk
        const complete = out.split("\n")
        out = complete.pop()!
        state.lines.push(...complete)
      })
      child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (state.stderr += chunk))
      return state
    }),
    (child) => Effect.sync(() => child.process.kill("SIGKILL"))
  )

const kill = (child: Child) =>
  Effect.zipRight(
    Effect.sync(() => child.process.kill("SIGKILL")),
    Effect.promise(() => child.exit)
  )

/** Polls (real time) until `condition` holds. */
const until = (condition: () => boolean, pause = Duration.millis(5)): Effect.Effect<void> =>
  Effect.suspend(() => (condition() ? Effect.void : Effect.zipRight(Effect.sleep(pause), until(condition, pause))))

// ---------------------------------------------------------------------------------------------

describe("backup and restore", () => {
  it.scopedLive("an online backup taken while another process commits restores exactly its position; every receipt acknowledged before it replays identically", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const backups = yield* tempDir
      const fresh = yield* tempDir
      const crashKey = "org-crash"
      const id = idOf(crashKey)
      const deploymentId = yield* Backup.deploymentIdOf(dataDir)
      const writer = yield* spawnChild("crashWriter.ts", [dataDir])
      yield* until(() => writer.lines.length >= 300 || writer.process.exitCode !== null)
      assert.isAtLeast(writer.lines.length, 300, writer.stderr)
      const before = writer.lines.length
      const manifest = yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: id, to: backups })
      // The writer never stopped: it keeps acknowledging after the snapshot.
      yield* until(() => writer.lines.length >= before + 300 || writer.process.exitCode !== null)
      assert.isAtLeast(writer.lines.length, before + 300, writer.stderr)
      yield* kill(writer)
      const acks = writer.lines.map((l) => JSON.parse(l) as Ack)
      assert.isAbove(manifest.position, 0)
      assert.strictEqual(manifest.databaseId, id)
      assert.strictEqual(manifest.deploymentId, deploymentId)
      assert.strictEqual(manifest.catalogToken, (yield* compiledNotes).token)
      assert.strictEqual(manifest.sha256, sha256File(join(backups, manifest.file)))
      assert.isTrue(acks.some((a) => Position.decode(a.receipt.position)! > manifest.position))

      const live = yield* Effect.map(contents(crashKey), (c) => c.commits).pipe(Effect.provide(storeLayer({ dataDir })))
      assert.isAbove(live.length, manifest.position)
      const restored = yield* Restore.restore({ from: backups, dataDir: fresh, databaseId: id, deploymentId, catalog: yield* compiledNotes })
      assert.strictEqual(restored.position, manifest.position)
      assert.strictEqual(restored.replayed, 0)
      yield* checkRestored(fresh, crashKey, live, acks, manifest.position, "crash")
    }), { timeout: 120_000 })

  it.scoped("restores to any position: the newest backup at or before it, then the later log's commits", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const backups = yield* tempDir
      const id = idOf(key)
      const deploymentId = yield* Backup.deploymentIdOf(dataDir)
      const catalog = yield* compiledNotes
      const acks: Array<Ack> = []
      const ids: Array<string> = []
      // Four phases a minute apart (TestClock): a time names the end of a phase exactly.
      const { first, second, live } = yield* Effect.gen(function* () {
        yield* workload(0, 40, acks, ids)
        const first = yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: id, to: backups })
        yield* TestClock.adjust(Duration.minutes(1))
        yield* workload(40, 20, acks, ids)
        yield* TestClock.adjust(Duration.minutes(1))
        yield* workload(60, 20, acks, ids)
        const second = yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: id, to: backups })
        yield* TestClock.adjust(Duration.minutes(1))
        yield* workload(80, 40, acks, ids)
        const all = yield* contents(key)
        // The oracle is sound: the live log's images replayed give the live rows.
        assert.deepStrictEqual(stateAt(all.commits, all.position), all.state)
        return { first, second, live: all.commits }
      }).pipe(Effect.provide(storeLayer({ dataDir })))
      const head = live.length
      assert.isTrue(0 < first.position && first.position < second.position && second.position < head)
      assert.isTrue(acks.some((a) => a.receipt.outcome === "rejected"))
      const liveFile = Backup.databaseFile(dataDir, id)

      // Between the two backups, and between the second one and the live head.
      for (const [target, from] of [
        [first.position + 7, first],
        [second.position, second],
        [head - 3, second],
        [head, second]
      ] as const) {
        const fresh = yield* tempDir
        const restored = yield* Restore.restore({ from: backups, dataDir: fresh, databaseId: id, deploymentId, catalog, to: { position: target }, log: liveFile })
        assert.strictEqual(restored.manifest.file, from.file)
        assert.strictEqual(restored.replayed, target - from.position)
        yield* checkRestored(fresh, key, live, acks, target)
      }

      // Without a live file, the newest backup is the later log.
      const viaBackup = yield* tempDir
      const fromBackup = yield* Restore.restore({ from: backups, dataDir: viaBackup, databaseId: id, deploymentId, catalog, to: { position: first.position + 5 } })
      assert.strictEqual(fromBackup.manifest.file, first.file)
      assert.strictEqual(fromBackup.replayed, 5)
      yield* checkRestored(viaBackup, key, live, acks, first.position + 5)

      // To a time: the last commit made at or before it (here: mid-way between the two backups).
      const atTime = yield* tempDir
      const time = new Date(Date.parse(live[first.position]!.committedAt) + 30_000).toISOString()
      const expected = live.filter((c) => c.committedAt <= time).at(-1)!.position
      assert.isTrue(first.position < expected && expected < second.position)
      const byTime = yield* Restore.restore({ from: backups, dataDir: atTime, databaseId: id, deploymentId, catalog, to: { time }, log: liveFile })
      assert.strictEqual(byTime.position, expected)
      assert.strictEqual(byTime.manifest.file, first.file)
      yield* checkRestored(atTime, key, live, acks, expected)

      // No target: the newest backup as it is; without a later log nothing beyond it.
      const newest = yield* tempDir
      assert.strictEqual((yield* Restore.restore({ from: backups, dataDir: newest, databaseId: id, deploymentId, catalog })).position, second.position)
      yield* checkRestored(newest, key, live, acks, second.position)
      const noLog = yield* refusal(Restore.restore({ from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId, catalog, to: { position: head } }))
      assert.include(noLog, `the log reaches position ${second.position}, before the target ${head}`)

      // In place: refused while the file exists, unless forced; the old file is kept aside.
      const existing = yield* refusal(Restore.restore({ from: backups, dataDir, databaseId: id, deploymentId, catalog, to: { position: first.position + 3 } }))
      assert.include(existing, "already exists")
      const inPlace = yield* Restore.restore({ from: backups, dataDir, databaseId: id, deploymentId, catalog, to: { position: first.position + 3 }, force: true })
      assert.isTrue(inPlace.replaced !== undefined && existsSync(inPlace.replaced))
      yield* checkRestored(dataDir, key, live, acks, first.position + 3)

      // The restored database goes on with a history of its own: the second backup no longer continues its log.
      yield* workload(200, 2 * (second.position - first.position), [], []).pipe(Effect.provide(storeLayer({ dataDir })))
      const diverged = yield* refusal(
        Restore.restore({ from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId, catalog, to: { position: second.position + 1 }, log: liveFile })
      )
      assert.include(diverged, `the log's commit ${second.position} is not the backup's: they are of different histories`)
    }), { timeout: 120_000 })

  it.scoped("an edited manifest's position is not trusted: restore reads the position from the backup file", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const backups = yield* tempDir
      const id = idOf(key)
      const deploymentId = yield* Backup.deploymentIdOf(dataDir)
      const catalog = yield* compiledNotes
      const acks: Array<Ack> = []
      const { manifest, live } = yield* Effect.gen(function* () {
        yield* workload(0, 30, acks, [])
        const manifest = yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: id, to: backups })
        yield* workload(30, 10, acks, [])
        return { manifest, live: (yield* contents(key)).commits }
      }).pipe(Effect.provide(storeLayer({ dataDir })))
      // The manifest claims ten commits fewer than its file holds (its sha256 covers the file, not itself).
      const manifestPath = join(backups, manifest.file.replace(/\.sqlite$/, ".manifest.json"))
      const edited = manifest.position - 10
      writeFileSync(manifestPath, JSON.stringify({ ...JSON.parse(readFileSync(manifestPath, "utf8")), position: edited }, null, 2))
      assert.strictEqual((yield* Backup.list(backups, id))[0]!.manifest.position, edited)

      const fresh = yield* tempDir
      const restored = yield* Restore.restore({ from: backups, dataDir: fresh, databaseId: id, deploymentId, catalog })
      assert.strictEqual(restored.position, manifest.position)
      assert.strictEqual(restored.manifest.position, manifest.position)
      yield* checkRestored(fresh, key, live, acks, manifest.position)

      // To the position the manifest claims: the file is past it, so it is refused, not restored as that position.
      const past = yield* refusal(
        Restore.restore({ from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId, catalog, to: { position: edited }, log: Backup.databaseFile(dataDir, id) })
      )
      assert.include(past, `holds commits through position ${manifest.position}, though its manifest says ${edited}`)
      // Beyond the file's position: replayed from where the file really ends.
      const later = yield* Restore.restore({
        from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId, catalog, to: { position: manifest.position + 4 }, log: Backup.databaseFile(dataDir, id)
      })
      assert.strictEqual(later.replayed, 4)
    }), { timeout: 60_000 })

  it.scoped("refuses to replay commits whose change images were compacted away", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const backups = yield* tempDir
      const id = idOf(key)
      const deploymentId = yield* Backup.deploymentIdOf(dataDir)
      const catalog = yield* compiledNotes
      const acks: Array<Ack> = []
      const ids: Array<string> = []
      const { backup, live } = yield* Effect.gen(function* () {
        yield* workload(0, 20, acks, ids)
        const backup = yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: id, to: backups })
        yield* workload(20, 30, acks, ids)
        const dropped = yield* Effect.scoped(Effect.flatMap(activate(key), (db) => db.compact))
        assert.isAbove(dropped, backup.position)
        return { backup, live: (yield* contents(key)).commits }
      }).pipe(Effect.provide(storeLayer({ dataDir, retainedCommits: 5 })))
      const message = yield* refusal(
        Restore.restore({ from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId, catalog, to: { position: live.length - 1 }, log: Backup.databaseFile(dataDir, id) })
      )
      assert.include(message, `the change images of commits ${backup.position + 1}..`)
      assert.include(message, "compacted away")
      // The backup's own position needs no images.
      const fresh = yield* tempDir
      yield* Restore.restore({ from: backups, dataDir: fresh, databaseId: id, deploymentId, catalog, to: { position: backup.position }, log: Backup.databaseFile(dataDir, id) })
      const restored = yield* contents(key).pipe(Effect.provide(storeLayer({ dataDir: fresh })))
      assert.strictEqual(restored.position, backup.position)
    }))

  it.scoped("refuses another deployment's backup, a catalog the deployment cannot read, a damaged or unpublished backup", () =>
    Effect.gen(function* () {
      const id = idOf(key)
      const catalog = yield* compiledNotes
      // A newer catalog than the running one: an entity the deployment does not know.
      const Label = Entity.make("Label", { description: "A label.", fields: { name: Schema.String } })
      const notesPlus = RootSchema.make("notes", {
        entities: [Note, Label],
        operations: [NoteCreate, NoteFinish, NoteBump, NoteCopy, NoteRemove, NoteProbe]
      })
      const plus = yield* Effect.orDie(compile(notesPlus))

      const dataDir = yield* tempDir
      const backups = yield* tempDir
      yield* workload(0, 10, [], []).pipe(Effect.provide(storeLayer({ dataDir })))
      const manifest = yield* Backup.backupDatabase({ dataDir, deploymentId: "deployment-a", databaseId: id, to: backups })

      const foreign = yield* refusal(Restore.restore({ from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId: "deployment-b", catalog }))
      assert.include(foreign, "belongs to deployment deployment-a, this data directory is deployment deployment-b")

      // An older catalog is fine: the restore applies the additive difference.
      const upgraded = yield* tempDir
      yield* Restore.restore({ from: backups, dataDir: upgraded, databaseId: id, deploymentId: "deployment-a", catalog: plus })

      const newerDir = yield* tempDir
      const newerBackups = yield* tempDir
      yield* workload(0, 5, [], []).pipe(Effect.provide(storeLayer({ dataDir: newerDir, root: notesPlus })))
      const newer = yield* Backup.backupDatabase({ dataDir: newerDir, deploymentId: "deployment-a", databaseId: id, to: newerBackups })
      assert.strictEqual(newer.catalogToken, plus.token)
      const unknown = yield* refusal(Restore.restore({ from: newerBackups, dataDir: yield* tempDir, databaseId: id, deploymentId: "deployment-a", catalog }))
      assert.include(unknown, `token ${plus.token}`)
      assert.include(unknown, `token ${catalog.token}`)
      assert.include(unknown, `entity "Label" was removed`)

      // Damaged bytes: refused, and nothing is written at the destination.
      const damagedTo = yield* tempDir
      truncateSync(join(backups, manifest.file), statSync(join(backups, manifest.file)).size - 4096)
      const damaged = yield* refusal(Restore.restore({ from: backups, dataDir: damagedTo, databaseId: id, deploymentId: "deployment-a", catalog }))
      assert.include(damaged, `the backup file ${manifest.file} does not match its manifest`)
      assert.isFalse(existsSync(Backup.databaseFile(damagedTo, id)))
      assert.deepStrictEqual(readdirSync(join(damagedTo, "databases")), [])

      // A file without its manifest is not a backup.
      rmSync(join(backups, manifest.file.replace(/\.sqlite$/, ".manifest.json")))
      const unpublished = yield* refusal(Restore.restore({ from: backups, dataDir: yield* tempDir, databaseId: id, deploymentId: "deployment-a", catalog }))
      assert.include(unpublished, `no complete backup of database ${id}`)
    }))

  it.scopedLive("a backup SIGKILLed mid-copy is never taken for one, and its source is intact", () =>
    Effect.gen(function* () {
      const dataDir = yield* tempDir
      const backups = yield* tempDir
      const id = idOf(key)
      const deploymentId = yield* Backup.deploymentIdOf(dataDir)
      const catalog = yield* compiledNotes
      yield* workload(0, 10, [], []).pipe(Effect.provide(storeLayer({ dataDir })))
      // Bulk rows straight into the table (this test is about the file, not the log): a copy that takes a while.
      const source = Backup.databaseFile(dataDir, id)
      yield* Effect.sync(() => {
        const db = new BetterSqlite3(source)
        const insert = db.prepare(`INSERT INTO "Note" (id, title, done, count, tag) VALUES (?, ?, 0, ?, NULL)`)
        db.transaction(() => {
          for (let i = 0; i < 150_000; i++) insert.run(`bulk-${i.toString().padStart(8, "0")}`, `title ${i} ${"x".repeat(80)}`, i)
        })()
        db.close()
      })
      const before = yield* contents(key).pipe(Effect.provide(storeLayer({ dataDir })))
      const sourceSha = sha256File(source)

      const temps = () => readdirSync(backups).filter((n) => n.startsWith(".tmp-") && statSync(join(backups, n), { throwIfNoEntry: false })?.size)
      const child = yield* spawnChild("backupChild.ts", [dataDir, backups, deploymentId, id])
      // One complete backup, then a kill while the next one is being copied.
      yield* until(() => child.lines.length >= 1 || child.process.exitCode !== null)
      assert.isAtLeast(child.lines.length, 1, child.stderr)
      yield* until(() => temps().length > 0 || child.process.exitCode !== null, Duration.millis(1))
      assert.strictEqual(yield* kill(child), "SIGKILL", child.stderr)
      assert.isAbove(temps().length, 0, "killed mid-copy: the partial copy is left behind")

      // Only published backups count, and each one's bytes match its manifest.
      const found = yield* Backup.list(backups, id)
      assert.isAtLeast(found.length, 1)
      for (const f of found) assert.strictEqual(sha256File(f.path), f.manifest.sha256)
      // Each is one the child published (its last manifest may have been written just before its line was).
      const published = child.lines.map((l) => (JSON.parse(l) as Backup.Manifest).file)
      assert.isAtMost(found.filter((f) => !published.includes(f.manifest.file)).length, 1)

      const fresh = yield* tempDir
      const restored = yield* Restore.restore({ from: backups, dataDir: fresh, databaseId: id, deploymentId, catalog })
      assert.isTrue(found.some((f) => f.manifest.file === restored.manifest.file))
      const copy = yield* contents(key).pipe(Effect.provide(storeLayer({ dataDir: fresh })))
      assert.strictEqual(copy.integrity, "ok")
      assert.deepStrictEqual(copy.state, before.state)

      // The source: byte for byte what it was, and it opens and checks clean.
      assert.strictEqual(sha256File(source), sourceSha)
      const after = yield* contents(key).pipe(Effect.provide(storeLayer({ dataDir })))
      assert.strictEqual(after.integrity, "ok")
      assert.deepStrictEqual(after.state, before.state)
      assert.deepStrictEqual(after.commits, before.commits)

      // The next backup into the directory removes what the killed one left (its process is gone).
      const stale = temps()
      assert.isAbove(stale.length, 0)
      yield* Backup.backupDatabase({ dataDir, deploymentId, databaseId: id, to: backups })
      assert.deepStrictEqual(readdirSync(backups).filter((n) => n.startsWith(".tmp-")), [])
    }), { timeout: 120_000 })
})
