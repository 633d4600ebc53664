// A failed write is classified from the real errors SQLite raises: a database at its page limit
// fails with SQLITE_FULL (what a full disk looks like to SQLite), counted as `full_disk`, however
// deep @effect/sql wraps it; an ordinary constraint failure is not a storage fault.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import Database from "better-sqlite3"
import { Cause } from "effect"
import { classify } from "@cairn/store/StorageFault"

const raised = (f: () => void): unknown => {
  try {
    f()
  } catch (error) {
    return error
  }
  throw new Error("expected the statement to fail")
}

describe("storage fault kinds of failed writes", () => {
  it("SQLITE_FULL is full_disk, wrapped or not; a constraint failure is none", () => {
    const db = new Database(join(mkdtempSync(join(tmpdir(), "cairn-fault-")), "full.sqlite"))
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)")
    const pages = db.pragma("page_count", { simple: true }) as number
    db.pragma(`max_page_count = ${pages + 1}`)
    const full = raised(() => db.prepare("INSERT INTO t VALUES (?)").run("x".repeat(64 * 1024)))
    assert.strictEqual((full as { code?: string }).code, "SQLITE_FULL")
    assert.strictEqual(classify(Cause.die(full)), "full_disk")
    assert.strictEqual(classify(Cause.fail(new SqlError({ cause: full, message: "Failed to execute statement" }))), "full_disk")
    assert.strictEqual(classify(Cause.die(new Error("group failed", { cause: new SqlError({ cause: full }) }))), "full_disk")

    db.pragma("max_page_count = 1000000")
    db.prepare("INSERT INTO t VALUES (?)").run("a")
    const duplicate = raised(() => db.prepare("INSERT INTO t VALUES (?)").run("a"))
    assert.isUndefined(classify(Cause.fail(new SqlError({ cause: duplicate }))))
    db.close()
  })

  it("I/O errors and damaged pages by their codes", () => {
    assert.strictEqual(classify(Cause.die(Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR_WRITE" }))), "io_error")
    assert.strictEqual(classify(Cause.die(Object.assign(new Error("no space"), { code: "ENOSPC" }))), "full_disk")
    assert.strictEqual(classify(Cause.die(Object.assign(new Error("malformed"), { code: "SQLITE_CORRUPT" }))), "corrupt")
  })
})
