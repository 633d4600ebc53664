/**
 * `PRAGMA quick_check` of a database file, off the event loop: it reads every page, so it is linear
 * in the file's size (seconds for a gigabyte), and on the loop it would hold every other tenant's
 * requests for as long. A file past `inlineBytes` is checked in a worker thread on a read-only
 * connection of its own; a small one inline (a few milliseconds, cheaper than starting a worker).
 */
import { statSync } from "node:fs"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { Effect } from "effect"

/** Files up to this size are checked on the loop: a quick_check of 8 MiB takes a few milliseconds. */
export const inlineBytes = 8 * 1024 * 1024

/** The driver the worker loads: the same installed better-sqlite3 the store uses (resolved here, not in the worker). */
const driver = (() => {
  try {
    return createRequire(import.meta.url).resolve("better-sqlite3")
  } catch {
    return "better-sqlite3"
  }
})()

// CommonJS, evaluated by the worker: opens the file read-only, runs the check, answers once.
const source = `
const { parentPort, workerData } = require("node:worker_threads")
let db
try {
  const Database = require(workerData.driver)
  db = new Database(workerData.filename, { readonly: true, fileMustExist: true })
  const rows = db.pragma("quick_check")
  parentPort.postMessage({ ok: true, problems: rows.map((r) => r.quick_check).filter((p) => p !== "ok") })
} catch (e) {
  parentPort.postMessage({ ok: false, message: String((e && e.message) || e), code: e && typeof e.code === "string" ? e.code : undefined })
} finally {
  if (db) { try { db.close() } catch {} }
}
`

/** A failure of the check itself (the file could not be opened or read): `code` is SQLite's, as the driver reports it. */
class CheckFailed extends Error {
  constructor(message: string, readonly code: string | undefined) {
    super(message)
  }
}

type Answer = { readonly ok: true; readonly problems: ReadonlyArray<string> } | { readonly ok: false; readonly message: string; readonly code?: string }

/** The check in a worker thread: its problems (empty when the file is intact); terminated if interrupted. */
export const inWorker = (filename: string): Effect.Effect<ReadonlyArray<string>, Error> =>
  Effect.async<ReadonlyArray<string>, Error>((resume) => {
    const worker = new Worker(source, { eval: true, workerData: { driver, filename } })
    let done = false
    worker.once("message", (answer: Answer) => {
      done = true
      resume(answer.ok ? Effect.succeed(answer.problems) : Effect.fail(new CheckFailed(answer.message, answer.code)))
    })
    worker.once("error", (error) => {
      if (done) return
      done = true
      resume(Effect.fail(error))
    })
    worker.once("exit", (code) => {
      if (done) return
      done = true
      resume(Effect.fail(new Error(`the integrity check's worker exited (${code}) without an answer`)))
    })
    return Effect.sync(() => {
      done = true
      void worker.terminate()
    })
  })

/**
 * The problems `PRAGMA quick_check` finds in `filename` (empty: intact): `inline` (the caller's own
 * connection) for a small file, a worker for a big one, so the loop is never held for long.
 */
export const quickCheck = <E>(filename: string, inline: Effect.Effect<ReadonlyArray<string>, E>): Effect.Effect<ReadonlyArray<string>, E | Error> =>
  Effect.suspend((): Effect.Effect<ReadonlyArray<string>, E | Error> => {
    const bytes = statSync(filename, { throwIfNoEntry: false })?.size ?? 0
    const wal = statSync(`${filename}-wal`, { throwIfNoEntry: false })?.size ?? 0
    return bytes + wal > inlineBytes ? inWorker(filename) : inline
  })
