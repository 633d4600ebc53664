/**
 * Benchmark child: the minimal baseline for `npm run bench -- http`. A bare `node:http`
 * server over one better-sqlite3 connection to a file laid out as the tracker's (same Task
 * table and indexes, WAL, `synchronous=FULL`): `POST /write` inserts one Task in one
 * transaction per request; `POST /read` answers the same indexed page the App's query
 * plans. No authentication, no log. Prints `{ base, file }` (its database file), answers `stats`
 * lines like appServer.
 */
import { mkdtempSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import Database from "better-sqlite3"
import { Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { compile } from "@cairn/catalog/Catalog"
import { Layout } from "@cairn/store"
import { tracker } from "@cairn/tracker/tracker"

const catalog = Effect.runSync(compile(tracker))
const task = catalog.entity("Task")!
const file = join(mkdtempSync(join(tmpdir(), "cairn-bench-raw-")), "raw.sqlite")
const db = new Database(file)
db.pragma("journal_mode = WAL")
db.pragma("synchronous = FULL")
for (const ddl of Layout.catalogDdl(catalog)) db.exec(ddl)
const columns = ["id", ...task.fields.map((f) => f.name)]
const insert = db.prepare(`INSERT INTO "Task" (${columns.map(Layout.quote).join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
const page = db.prepare(`SELECT "id", "title", "status", "priority" FROM "Task" WHERE "assigneeId" = ? ORDER BY "id" LIMIT 51`)
let transactions = 0
const write = db.transaction((input: Record<string, unknown>) => {
  const at = new Date().toISOString()
  const record = Layout.encodeRecord(task, { ...input, id: uuidv7(), status: "open", createdAt: at, updatedAt: at })
  insert.run(...columns.map((c) => record[c] ?? null))
  transactions += 1
  return record["id"]
})

const server = createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>
    let answer: unknown
    if (req.url === "/write") answer = { id: write(body) }
    else {
      const rows = page.all(body["assigneeId"]) as Array<Record<string, unknown>>
      answer = { items: rows.slice(0, 50), hasMore: rows.length > 50 }
    }
    const text = JSON.stringify(answer)
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    res.end(text)
  })
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address() as { readonly port: number }
  process.stdout.write(JSON.stringify({ base: `http://127.0.0.1:${address.port}`, file }) + "\n")
})
const lines = createInterface({ input: process.stdin })
lines.on("line", () => {
  const cpu = process.cpuUsage()
  process.stdout.write(JSON.stringify({ cpuUs: cpu.user + cpu.system, groups: transactions, groupedWrites: transactions }) + "\n")
})
lines.on("close", () => process.exit(0))
