// docs/mcp-clients.md says what to type; this runs exactly that, on the Node this project
// runs on (20), against a real server: the Inspector CLI lines of its shell block, and the
// mcp-remote configuration with a bearer token, spoken to over stdio as a desktop client would.
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { startStack } from "./support/stack.js"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const docs = readFileSync(join(root, "docs", "mcp-clients.md"), "utf8")
const documentedUrl = "http://127.0.0.1:8787/mcp"

/** The shell commands of the block that mints a token, continuation lines joined. */
const inspectorCommands = (): ReadonlyArray<string> => {
  const block = [...docs.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes("mcp-inspector --cli"))
  assert.isDefined(block, "docs/mcp-clients.md has no Inspector CLI block")
  return block!
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .filter((line) => line.startsWith("npx "))
}

/** The mcp-remote server entry that passes a bearer token. */
const mcpRemoteArgs = (): ReadonlyArray<string> => {
  const block = [...docs.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes("--header"))
  assert.isDefined(block, "docs/mcp-clients.md has no mcp-remote block with a token")
  const config = JSON.parse(block!) as { mcpServers: Record<string, { command: string; args: ReadonlyArray<string> }> }
  const server = Object.values(config.mcpServers)[0]!
  assert.strictEqual(server.command, "npx")
  return server.args
}

const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string>, input?: string) =>
  Effect.async<{ code: number | null; stdout: string; stderr: string }>((resume) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    if (input !== undefined) child.stdin.write(input)
    child.on("exit", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("docs/mcp-clients.md commands", () => {
  it.scopedLive("the Inspector CLI lines work on this Node, as written", () =>
    Effect.gen(function* () {
      const stack = yield* startStack()
      const token = yield* stack.token({ sub: "docs", org: "acme" })
      const commands = inspectorCommands()
      assert.lengthOf(commands, 3)
      const outputs: Array<string> = []
      for (const command of commands) {
        const result = yield* run("sh", ["-c", command.replace(documentedUrl, stack.mcpUrl)], { TOKEN: token })
        assert.strictEqual(result.code, 0, `${command}\n${result.stderr.slice(-2000)}`)
        outputs.push(result.stdout)
      }
      assert.deepStrictEqual((JSON.parse(outputs[0]!) as { tools: Array<{ name: string }> }).tools.map((t) => t.name), ["describe", "query", "mutate"])
      assert.include(outputs[1]!, "catalogToken")
      assert.include(outputs[2]!, '"rows"')
    })
  )

  it.scopedLive("mcp-remote with a bearer token bridges stdio to the endpoint", () =>
    Effect.gen(function* () {
      const stack = yield* startStack()
      const token = yield* stack.token({ sub: "docs", org: "acme" })
      const args = mcpRemoteArgs().map((a) => a.replace(documentedUrl, stack.mcpUrl).replace("${CAIRN_TOKEN}", token))
      const messages = [
        { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "docs-test", version: "1" } } },
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }
      ]
      // mcp-remote answers on stdout line by line; it exits when its stdin closes after the answers.
      const result = yield* Effect.async<{ stdout: string; stderr: string }>((resume) => {
        const child = spawn("npx", args, { cwd: root, env: process.env, stdio: ["pipe", "pipe", "pipe"] })
        let stdout = ""
        let stderr = ""
        child.stderr.on("data", (d) => (stderr += d))
        child.stdout.on("data", (d) => {
          stdout += d
          if (stdout.split("\n").some((line) => line.includes('"id":2'))) {
            child.kill("SIGTERM")
            resume(Effect.succeed({ stdout, stderr }))
          }
        })
        child.on("exit", () => resume(Effect.succeed({ stdout, stderr })))
        for (const message of messages) child.stdin.write(JSON.stringify(message) + "\n")
        return Effect.sync(() => child.kill("SIGKILL"))
      }).pipe(Effect.timeoutFail({ duration: "100 seconds", onTimeout: () => new Error("mcp-remote never answered tools/list") }))
      const listed = result.stdout
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map((line) => JSON.parse(line) as { id?: number; result?: { tools?: Array<{ name: string }> } })
        .find((m) => m.id === 2)
      assert.isDefined(listed, `${result.stdout}\n${result.stderr.slice(-2000)}`)
      assert.deepStrictEqual(listed!.result!.tools!.map((t) => t.name), ["describe", "query", "mutate"])
    })
  )
})
