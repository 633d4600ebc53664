// A serving process whose log reader goes away (a log collector died, the parent that read its output
// exited): every log write then fails with EPIPE. Before, that failure escaped, its report was one more
// failing write, and the process spun on its own logs at full CPU. Now the failures are counted and
// the process keeps serving with nothing escaping.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { launchChild, stopChild } from "./support/child.js"
import { scrapeText } from "./support/scrape.js"

const valueOf = (text: string, name: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0)

describe("log output closed by its reader", () => {
  it("the server keeps serving; failed log writes are counted, none escapes", async () => {
    const metricsPort = await freePort()
    const server = await launchChild("apps/server/src/main.ts", mkdtempSync(join(tmpdir(), "cairn-logpipe-")), {
      CAIRN_METRICS_PORT: String(metricsPort),
      CAIRN_LOG_FORMAT: "json"
    })
    try {
      // The reader goes away: the server's next log lines go into a pipe nobody reads.
      server.child.stdout!.destroy()
      server.child.stderr!.destroy()
      for (let i = 0; i < 30; i++) {
        const answer = await fetch(`${server.base}/health`)
        expect(answer.status).toBe(200)
      }
      const { text } = await Effect.runPromise(scrapeText(`http://127.0.0.1:${metricsPort}/metrics`))
      expect(valueOf(text, "cairn_log_write_errors_total")).toBeGreaterThan(0)
      expect(valueOf(text, "cairn_escaped_errors_total")).toBe(0)
      expect(server.child.exitCode).toBeNull()
    } finally {
      await stopChild(server)
    }
  })
})
