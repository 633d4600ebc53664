import { createServer } from "node:http"
import { readFileSync } from "node:fs"
import { build } from "/work/wt/browser/node_modules/esbuild/lib/main.js"
import { chromium } from "/work/wt/browser/node_modules/playwright-core/index.mjs"
const bundle = async (entry) => (await build({ entryPoints: [entry], bundle: true, format: "esm", write: false, minify: true })).outputFiles[0].text
const files = { "/main.js": await bundle("main.js"), "/worker.js": await bundle("worker.js") }
const wasm = readFileSync("node_modules/@effect/wa-sqlite/dist/wa-sqlite.wasm")
console.log("bundle sizes: main", files["/main.js"].length, "worker", files["/worker.js"].length, "wasm", wasm.length)
const server = createServer((req, res) => {
  if (req.url === "/") return res.end(`<!doctype html><script type="module" src="/main.js"></script>`)
  if (req.url === "/wa-sqlite.wasm") { res.setHeader("content-type", "application/wasm"); return res.end(wasm) }
  res.setHeader("content-type", "text/javascript"); res.end(files[req.url] ?? "")
}).listen(18999, "127.0.0.1")
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })
for (let round = 0; round < 3; round++) {
  const ctx = await browser.newContext()
  const page = await ctx.newPage()
  page.on("pageerror", (e) => console.log("pageerror", e.message))
  await page.goto("http://127.0.0.1:18999/")
  await page.waitForFunction(() => typeof window.measure === "function")
  console.log(JSON.stringify(await page.evaluate(() => window.measure())))
  await ctx.close()
}
await browser.close(); server.close()
