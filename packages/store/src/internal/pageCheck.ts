/**
 * SQLite's page checks of a database file, off the event loop. `PRAGMA quick_check` and
 * `integrity_check` read every page, so they are linear in the file's size (seconds for a
 * gigabyte); on the loop they would hold every other tenant's requests for as long. The check
 * runs in a worker thread on a read-only connection of its own (WAL readers never block the
 * writer); the worker is plain JavaScript evaluated in place, so it needs no loader.
 */
import { statSync } from "node:fs"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { Effect } from "effect"

/** Files up to this size get `quickCheck` inline: a quick_check of 8 MiB takes a few milliseconds. */
export const inlineBytes = 8 * 1024 * 1024

/** The driver the worker loads: the same installed better-sqlite3 the store uses (resolved here, not in the worker). */
const driver = createRequire(import.meta.url).resolve("better-sqlite3")

// CommonJS, evaluated by the worker: opens the file read-only, runs the pragma, answers once.
const source = `
const { parentPort, workerData } = require("node:worker_threads")
let db
try {
  const Database = require(workerData.driver)
  db = new Database(workerData.filename, { readonly: true, fileMustExist: true })
  db.pragma("busy_timeout = 5000")
  const problems = db.prepare("PRAGMA " + workerData.pragma).raw().all().map((r) => r[0]).filter((p) => p !== "ok")
  let position = 0
  try {
    position = Number(db.prepare("SELECT coalesce(max(position), 0) FROM _cairn_commits").raw().get()[0])
  } catch (e) {}
  parentPort.postMessage({ ok: true, problems, position })
} catch (e) {
  parentPort.postMessage({ ok: false, message: String((e && e.message) || e), code: e && typeof e.code === "string" ? e.code : undefined })
} finally {
  if (db) { try { db.close() } catch {} }
}
`

/** What a page check found: SQLite's problems (empty: intact) and the last committed position the file holds. */
export interface PageCheck {
  readonly problems: ReadonlyArray<string>
  readonly position: number
}

/**
 * The check could not run (the file could not be opened or read, the worker died): `code` is
 * SQLite's, as the driver reports it, so a corrupt file is classified as on the loop (`damaged`).
 */
export class PageCheckFailed extends Error {
  constructor(message: string, readonly code?: string) {
    super(message)
  }
}

/** `pragma` (`quick_check` or `integrity_check(N)`) of `filename` in a worker thread; terminated if interrupted. */
export const inWorker = (filename: string, pragma: "quick_check" | `integrity_check(${number})`): Effect.Effect<PageCheck, PageCheckFailed> =>
  Effect.async<PageCheck, PageCheckFailed>((resume) => {
    const worker = new Worker(source, { eval: true, workerData: { driver, filename, pragma } })
    let done = false
    const finish = (answer: Effect.Effect<PageCheck, PageCheckFailed>) => {
      if (done) return
      done = true
      resume(answer)
    }
    type Answer = { readonly ok: true; readonly problems: ReadonlyArray<string>; readonly position: number } | { readonly ok: false; readonly message: string; readonly code?: string }
    worker.once("message", (answer: Answer) =>
      finish(answer.ok ? Effect.succeed({ problems: answer.problems, position: answer.position }) : Effect.fail(new PageCheckFailed(answer.message, answer.code))))
    worker.on("error", (error) => finish(Effect.fail(new PageCheckFailed(error.message))))
    worker.once("exit", (code) => finish(Effect.fail(new PageCheckFailed(`the check's worker exited (${code}) without an answer`))))
    return Effect.sync(() => {
      done = true
      void worker.terminate()
    })
  })

/**
 * The problems `PRAGMA quick_check` finds in `filename` (empty: intact): `inline` (the caller's own
 * connection) for a small file, a worker for a big one, so the loop is never held for long.
 */
export const quickCheck = <E>(filename: string, inline: Effect.Effect<ReadonlyArray<string>, E>): Effect.Effect<ReadonlyArray<string>, E | PageCheckFailed> =>
  Effect.suspend((): Effect.Effect<ReadonlyArray<string>, E | PageCheckFailed> => {
    const bytes = statSync(filename, { throwIfNoEntry: false })?.size ?? 0
    const wal = statSync(`${filename}-wal`, { throwIfNoEntry: false })?.size ?? 0
    return bytes + wal > inlineBytes ? Effect.map(inWorker(filename, "quick_check"), (check) => check.problems) : inline
  })
