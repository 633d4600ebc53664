/**
 * Runs the official MCP conformance suite's server scenarios against Cairn's MCP endpoint
 * and compares the outcome with the committed baseline (`conformance-baseline.yml`: only
 * scenarios that need fixtures a three-tool server must not have). Exits non-zero on any
 * regression or stale baseline entry.
 *
 *   npx tsx scripts/conformance.ts [--entry apps/server/src/main.ts]
 *
 * Starts the real entry point (`apps/server/src/main.ts`) on free loopback ports, gets a
 * token from the development authorization server (client_credentials), and puts a small
 * local proxy in front that adds the `Authorization` header: the suite's client has no
 * OAuth. The proxy's address is the server's base URL, as for any deployment behind a
 * proxy, so Host/Origin checks see what a real client sends. Needs the tools installed by
 *   npm i --prefix .tools/node22 node@22
 *   npm i --prefix .tools/conformance @modelcontextprotocol/conformance@0.1.16
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { createServer, request, type Server } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { freePortPromise as freePort } from "@cairn/testkit/freePort"

export const root = fileURLToPath(new URL("..", import.meta.url))
export const node22 = join(root, ".tools/node22/node_modules/.bin/node")
export const conformanceCli = join(root, ".tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js")
export const baselinePath = join(root, "scripts/conformance-baseline.yml")

/** Scenarios a three-tool server must pass for real; never allowed in the baseline. */
export const required = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"] as const

export const installHint = [
  "npm i --prefix .tools/node22 node@22",
  "npm i --prefix .tools/conformance @modelcontextprotocol/conformance@0.1.16"
].join(" && ")

/** Fails with the install command when a tool is missing. */
export const checkTools = (): void => {
  for (const path of [node22, conformanceCli]) {
    if (!existsSync(path)) throw new Error(`missing ${path}; install the conformance tools with: ${installHint}`)
  }
}

/**
 * A pass-through proxy on `listenPort` to `targetPort` that sets `Authorization: Bearer
 * <token>`. It forwards Host and Origin unchanged, and streams both directions (SSE).
 */
export const startProxy = (listenPort: number, targetPort: number, token: string) =>
  new Promise<Server>((resolve, reject) => {
    const server = createServer((req, res) => {
      const upstream = request(
        {
          host: "127.0.0.1",
          port: targetPort,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, authorization: `Bearer ${token}` }
        },
        (response) => {
          res.writeHead(response.statusCode ?? 502, response.headers)
          response.pipe(res)
        }
      )
      upstream.on("error", () => {
        if (!res.headersSent) res.writeHead(502)
        res.end()
      })
      req.pipe(upstream)
    })
    server.once("error", reject)
    server.listen(listenPort, "127.0.0.1", () => resolve(server))
  })

/** An access token for `{base}/mcp` from the development authorization server (client_credentials). */
export const clientCredentialsToken = async (issuer: string, resource: string, org = "conformance"): Promise<string> => {
  const registration = await fetch(`${issuer}/reg`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "cairn-conformance",
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      org
    })
  })
  const client = (await registration.json()) as { client_id: string; client_secret: string }
  if (!registration.ok) throw new Error(`client registration failed: ${JSON.stringify(client)}`)
  const response = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString("base64")}`
    },
    body: new URLSearchParams({ grant_type: "client_credentials", resource, scope: "cairn:read cairn:write" }).toString()
  })
  const body = (await response.json()) as { access_token?: string }
  if (!body.access_token) throw new Error(`token request failed: ${JSON.stringify(body)}`)
  return body.access_token
}

export interface ScenarioResult {
  readonly scenario: string
  readonly passed: number
  readonly failed: number
  readonly warnings: number
}

export interface SuiteResult {
  readonly exitCode: number
  readonly output: string
  readonly scenarios: ReadonlyArray<ScenarioResult>
}

/** Reads the baseline's `server:` list. */
export const readBaseline = (): ReadonlyArray<string> => {
  const lines = readFileSync(baselinePath, "utf8").split("\n")
  const out: Array<string> = []
  let inServer = false
  for (const line of lines) {
    if (/^server:\s*$/.test(line)) inServer = true
    else if (/^\S/.test(line)) inServer = false
    else if (inServer) {
      const match = /^\s+-\s+([a-z0-9-]+)\s*(#.*)?$/.exec(line)
      if (match) out.push(match[1]!)
    }
  }
  return out
}

/** Runs every active server scenario against `url` with the baseline; resolves with the outcome. */
export const runSuite = (url: string): Promise<SuiteResult> =>
  new Promise((resolve, reject) => {
    checkTools()
    const outputDir = mkdtempSync(join(tmpdir(), "cairn-conformance-"))
    const child = spawn(node22, [conformanceCli, "server", "--url", url, "--expected-failures", baselinePath, "-o", outputDir], {
      cwd: root,
      env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => (output += d))
    child.once("error", reject)
    child.once("exit", (code) => {
      const plain = output.replace(/\u001b\[[0-9;]*m/g, "")
      const scenarios: Array<ScenarioResult> = []
      for (const match of plain.matchAll(/^[✓✗] (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?$/gm)) {
        scenarios.push({ scenario: match[1]!, passed: Number(match[2]), failed: Number(match[3]), warnings: Number(match[4] ?? 0) })
      }
      resolve({ exitCode: code ?? 1, output: plain, scenarios })
    })
  })

/** Checks the suite outcome beyond the CLI's own baseline comparison; returns the problems. */
export const judge = (result: SuiteResult): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const baseline = readBaseline()
  if (result.exitCode !== 0) problems.push(`the conformance CLI exited with ${result.exitCode} (regression or stale baseline entry)`)
  for (const name of required) {
    if (baseline.includes(name)) problems.push(`${name} must pass for real but is in the baseline`)
    const scenario = result.scenarios.find((s) => s.scenario === name)
    if (!scenario) problems.push(`${name} did not run`)
    else if (scenario.failed > 0 || scenario.warnings > 0 || scenario.passed === 0) problems.push(`${name} did not pass`)
  }
  return problems
}

const waitForLine = (child: ChildProcess, text: string, timeoutMs: number) =>
  new Promise<string>((resolve, reject) => {
    let output = ""
    const timer = setTimeout(() => reject(new Error(`server did not start within ${timeoutMs} ms:\n${output}`)), timeoutMs)
    const onData = (d: Buffer) => {
      output += d
      if (output.includes(text)) {
        clearTimeout(timer)
        resolve(output)
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`server exited early (${code}):\n${output}`))
    })
  })

/** Proxies `proxyPort` to a running server on `serverPort` with `token`, runs and judges the suite. */
export const conform = async (serverPort: number, proxyPort: number, token: string): Promise<number> => {
  const proxy = await startProxy(proxyPort, serverPort, token)
  try {
    const result = await runSuite(`http://127.0.0.1:${proxyPort}/mcp`)
    process.stdout.write(result.output)
    const problems = judge(result)
    for (const p of problems) console.error(`conformance: ${p}`)
    if (problems.length === 0) console.log(`conformance: OK (${required.join(", ")} pass; baseline: ${readBaseline().join(", ")})`)
    return problems.length === 0 ? 0 : 1
  } finally {
    proxy.closeAllConnections()
    proxy.close()
  }
}

const option = (name: string): string | undefined => {
  const i = process.argv.indexOf(name)
  return i >= 0 ? process.argv[i + 1] : undefined
}

const main = async (): Promise<number> => {
  checkTools()
  // Attach mode (tests): a server already runs on --server-port with base URL http://127.0.0.1:<--proxy-port>.
  const attach = option("--server-port")
  if (attach !== undefined) {
    const token = process.env["CAIRN_CONFORMANCE_TOKEN"]
    if (!token) throw new Error("attach mode reads the bearer token from CAIRN_CONFORMANCE_TOKEN")
    return conform(Number(attach), Number(option("--proxy-port")), token)
  }
  const [serverPort, issuerPort, proxyPort] = [await freePort(), await freePort(), await freePort()]
  const base = `http://127.0.0.1:${proxyPort}`
  const issuer = `http://127.0.0.1:${issuerPort}`
  // --entry: another entry point assembling the same deployment (default: what `npm start` runs).
  const entry = option("--entry") ?? "apps/server/src/main.ts"
  const server = spawn(process.execPath, ["--import", "tsx", entry], {
    cwd: root,
    env: {
      ...process.env,
      CAIRN_PORT: String(serverPort),
      CAIRN_BASE_URL: base,
      CAIRN_DEV_ISSUER_URL: issuer,
      CAIRN_DATA_DIR: mkdtempSync(join(tmpdir(), "cairn-conformance-data-")),
      CAIRN_STAGE: "test"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  try {
    await waitForLine(server, "Cairn listening on", 60_000)
    return await conform(serverPort, proxyPort, await clientCredentialsToken(issuer, `${base}/mcp`))
  } finally {
    server.kill("SIGTERM")
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then((code) => process.exit(code), (error) => {
    console.error(error instanceof Error ? error.message : error)
    process.exit(1)
  })
}
