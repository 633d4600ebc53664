/**
 * `PRAGMA integrity_check` over one database file on a worker thread with a read-only
 * connection of its own: linear in the file's size, it never holds the event loop (every
 * other database's calls keep being served) nor the database's writer (WAL readers do not
 * block it). The worker is plain JavaScript evaluated in place, so it needs no loader.
 */
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { Effect } from "effect"

export interface FileCheck {
  readonly ok: boolean
  /** SQLite's first problems (at most 10), verbatim: operator-facing. */
  readonly problems: ReadonlyArray<string>
  /** The last committed position the file holds (0 when it has no log yet). */
  readonly position: number
}

const source = `
const { parentPort, workerData } = require("node:worker_threads")
const Sqlite = require(workerData.driver)
let db
try {
  db = new Sqlite(workerData.filename, { readonly: true, fileMustExist: true })
  db.pragma("busy_timeout = 5000")
  const problems = db.prepare("PRAGMA integrity_check(10)").all().map((r) => r.integrity_check).filter((p) => p !== "ok")
  let position = 0
  try {
    position = Number(db.prepare("SELECT coalesce(max(position), 0) AS v FROM _cairn_commits").get().v)
  } catch (e) {}
  parentPort.postMessage({ ok: problems.length === 0, problems, position })
} catch (error) {
  parentPort.postMessage({ ok: false, problems: [String(error && error.message || error)], position: 0 })
} finally {
  if (db) db.close()
}
`

const driver = createRequire(import.meta.url).resolve("better-sqlite3")

/** Checks `filename` on a worker thread; a file SQLite cannot open at all is one problem. */
export const checkFile = (filename: string): Effect.Effect<FileCheck> =>
  Effect.async<FileCheck>((resume) => {
    const worker = new Worker(source, { eval: true, workerData: { filename, driver } })
    let done = false
    const finish = (result: FileCheck) => {
      if (done) return
      done = true
      resume(Effect.succeed(result))
      void worker.terminate()
    }
    worker.once("message", (result: FileCheck) => finish(result))
    worker.once("error", (error) => finish({ ok: false, problems: [error.message], position: 0 }))
    worker.once("exit", () => finish({ ok: false, problems: ["the check's worker stopped without an answer"], position: 0 }))
    return Effect.sync(() => void worker.terminate())
  })
