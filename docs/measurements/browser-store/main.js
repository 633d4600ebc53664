const worker = new Worker("/worker.js", { type: "module" })
let next = 0; const waiting = new Map()
worker.onmessage = (e) => { waiting.get(e.data[0])(e.data[1]); waiting.delete(e.data[0]) }
const call = (op, arg) => new Promise((r) => { const id = next++; waiting.set(id, r); worker.postMessage([id, op, arg]) })
const record = (i) => JSON.stringify({ id: `t${i}`, title: `Task number ${i}`, status: "open", projectId: "p1", createdAt: "2026-01-01T00:00:00.000Z" })
const idbOpen = () => new Promise((res, rej) => { const r = indexedDB.open("bench", 1); r.onupgradeneeded = () => { r.result.createObjectStore("r", { keyPath: ["entity", "id"] }); r.result.createObjectStore("m") }; r.onsuccess = () => res(r.result); r.onerror = rej })
const tx = (db, stores, body) => new Promise((res, rej) => { const t = db.transaction(stores, "readwrite"); let out; t.oncomplete = () => res(out); t.onerror = rej; body(t, (v) => (out = v)) })
const time = async (f) => { const t = performance.now(); await f(); return performance.now() - t }
const N = 200, S = 5000
window.measure = async () => {
  const out = {}
  let db
  out.idb_open_ms = await time(async () => { db = await idbOpen() })
  out.wasm_open_ms = await time(() => call("open"))
  const idbApply = [], wasmApply = []
  for (let i = 0; i < N; i++) {
    idbApply.push(await time(() => tx(db, ["r", "m"], (t) => { t.objectStore("r").put({ entity: "Task", id: `t${i}`, record: JSON.parse(record(i)) }); t.objectStore("m").put({ cursor: `c${i}` }, "checkpoint") })))
    wasmApply.push(await time(() => call("apply", { id: `t${i}`, record: record(i), cursor: `c${i}` })))
  }
  const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)]
  out.idb_apply_p50_ms = med(idbApply); out.wasm_apply_p50_ms = med(wasmApply)
  const rows = Array.from({ length: S }, (_, i) => ["Task", `s${i}`, record(i)])
  out.idb_snapshot5k_ms = await time(() => tx(db, ["r"], (t) => { const s = t.objectStore("r"); s.clear(); for (const r of rows) s.put({ entity: r[0], id: r[1], record: JSON.parse(r[2]) }) }))
  out.wasm_snapshot5k_ms = await time(() => call("snapshot", rows))
  out.idb_read5k_ms = await time(() => new Promise((res) => { const r = db.transaction("r").objectStore("r").getAll(IDBKeyRange.bound(["Task", ""], ["Task", []])); r.onsuccess = () => res(r.result.length) }))
  out.wasm_read5k_ms = await time(() => call("read"))
  return out
}
