// Independently written MCP clients against the endpoint: the official conformance suite
// (scripts/conformance.ts, through its header-adding proxy, judged against the committed
// baseline) and the MCP Inspector CLI with a bearer header. Both run on Node 22 from
// `.tools/`; a missing tool fails the test with the command that installs it.
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { v7 as uuidv7 } from "uuid"
import { freePort } from "@cairn/testkit/freePort"
import { startStack } from "./support/stack.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const node22 = join(root, ".tools/node22/node_modules/.bin/node")
const inspector = join(root, ".tools/inspector/node_modules/.bin/mcp-inspector")
// scripts/tools.mjs installs all three (pinned) before `npm test`.
const install = { node22: "npm run tools", conformance: "npm run tools", inspector: "npm run tools" }

const requireTool = (path: string, command: string) => {
  if (!existsSync(path)) assert.fail(`missing ${path}; install it with: ${command}`)
}

const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<{ code: number; output: string; stdout: string }>((resume) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    let stdout = ""
    child.stdout.on("data", (d) => {
      output += d
      stdout += d
    })
    child.stderr.on("data", (d) => (output += d))
    child.once("exit", (code) => resume(Effect.succeed({ code: code ?? 1, output, stdout })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("external MCP clients", () => {
  it.scopedLive("the conformance suite passes server-initialize, ping, tools-list, dns-rebinding-protection and matches the baseline", () =>
    Effect.gen(function* () {
      requireTool(node22, install.node22)
      requireTool(join(root, ".tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"), install.conformance)
      const proxyPort = yield* freePort()
      const stack = yield* startStack({ basePort: proxyPort })
      const token = yield* stack.token({ sub: "conformance", org: "acme" })
      const { code, output } = yield* run(
        process.execPath,
        ["--import", "tsx", "scripts/conformance.ts", "--server-port", String(stack.port), "--proxy-port", String(proxyPort)],
        { CAIRN_CONFORMANCE_TOKEN: token }
      )
      assert.strictEqual(code, 0, output)
      for (const scenario of ["server-initialize", "ping", "tools-list"]) {
        assert.match(output, new RegExp(`^✓ ${scenario}: 1 passed, 0 failed$`, "m"), output)
      }
      assert.match(output, /^✓ dns-rebinding-protection: 2 passed, 0 failed$/m, output)
      assert.include(output, "conformance: OK")
    })
  )

  it.scopedLive("the MCP Inspector CLI lists exactly three tools and calls query", () =>
    Effect.gen(function* () {
      requireTool(node22, install.node22)
      requireTool(inspector, install.inspector)
      const stack = yield* startStack()
      const token = yield* stack.token({ sub: "inspector", org: "acme" })
      const base = [inspector, "--cli", stack.mcpUrl, "--transport", "http", "--header", `Authorization: Bearer ${token}`]
      const listed = yield* run(node22, [...base, "--method", "tools/list"])
      assert.strictEqual(listed.code, 0, listed.output)
      const tools = JSON.parse(listed.stdout) as { tools: Array<{ name: string }> }
      assert.deepStrictEqual(tools.tools.map((t) => t.name), ["describe", "query", "mutate"])

      // Some data first, through the same endpoint.
      const client = yield* stack.client(token)
      const created = yield* Effect.promise(() =>
        client.callTool({
          name: "mutate",
          arguments: {
            operation: { kind: "operation", owner: { kind: "entity", name: "Project" }, name: "create" },
            input: { name: "Inspected" },
            invocationId: uuidv7()
          }
        })
      )
      assert.isUndefined(created.isError, JSON.stringify(created))

      const query = { version: 1, from: { kind: "entity", name: "Project" }, select: { name: { path: ["name"] } } }
      const called = yield* run(node22, [...base, "--method", "tools/call", "--tool-name", "query", "--tool-arg", `query=${JSON.stringify(query)}`])
      assert.strictEqual(called.code, 0, called.output)
      const result = JSON.parse(called.stdout) as { isError?: boolean; structuredContent: { rows: Array<unknown> } }
      assert.isUndefined(result.isError, called.stdout)
      assert.deepStrictEqual(result.structuredContent.rows, [{ name: "Inspected" }])

      const anonymous = yield* run(node22, [inspector, "--cli", stack.mcpUrl, "--transport", "http", "--method", "tools/list"])
      assert.notStrictEqual(anonymous.code, 0)
    })
  )
})
