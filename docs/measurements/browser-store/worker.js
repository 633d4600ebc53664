import * as WaSqlite from "@effect/wa-sqlite"
import SQLiteESMFactory from "@effect/wa-sqlite/dist/wa-sqlite.mjs"
import { AccessHandlePoolVFS } from "@effect/wa-sqlite/src/examples/AccessHandlePoolVFS.js"
let sqlite3, db
const exec = (sql) => { sqlite3.exec(db, sql) }
const run = (sql, params) => {
  for (const stmt of sqlite3.statements(db, sql)) {
    const rows = []
    for (const p of params) { sqlite3.reset(stmt); sqlite3.bind_collection(stmt, p); while (sqlite3.step(stmt) === 100) rows.push(sqlite3.row(stmt)) }
    return rows
  }
}
onmessage = async (e) => {
  const [id, op, arg] = e.data
  let result
  if (op === "open") {
    const factory = await SQLiteESMFactory({ locateFile: () => "/wa-sqlite.wasm" })
    sqlite3 = WaSqlite.Factory(factory)
    const vfs = await AccessHandlePoolVFS.create("opfs", factory)
    sqlite3.vfs_register(vfs, false)
    db = sqlite3.open_v2("bench.db", undefined, "opfs")
    exec("PRAGMA journal_mode=DELETE; CREATE TABLE IF NOT EXISTS r (entity TEXT, id TEXT, record TEXT, PRIMARY KEY(entity,id)) WITHOUT ROWID; CREATE TABLE IF NOT EXISTS c (one INTEGER PRIMARY KEY, cursor TEXT)")
  } else if (op === "apply") {
    exec("BEGIN")
    run("INSERT INTO r VALUES (?,?,?) ON CONFLICT DO UPDATE SET record=excluded.record", [["Task", arg.id, arg.record]])
    run("INSERT INTO c VALUES (1, ?) ON CONFLICT DO UPDATE SET cursor=excluded.cursor", [[arg.cursor]])
    exec("COMMIT")
  } else if (op === "snapshot") {
    exec("BEGIN; DELETE FROM r")
    run("INSERT INTO r VALUES (?,?,?)", arg)
    exec("COMMIT")
  } else if (op === "read") {
    result = run("SELECT id, record FROM r WHERE entity = ? ORDER BY id", [["Task"]]).length
  }
  postMessage([id, result])
}
