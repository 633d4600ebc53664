// The notes example served by the same `App` as `npm start` serves the tracker, in process on
// free 127.0.0.1 ports with a fresh data directory; tokens signed by the development issuer
// with whatever verified claims a test needs; raw calls on RPC, MCP and sync are testkit's `Wire`.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { devIssuer, signDevToken } from "@cairn/devauth/DevIssuer"
import { accessScopes } from "@cairn/domain/AccessScope"
import { onLoopback, Settings } from "@cairn/server/operations/Settings"
import { App } from "@cairn/server-app/App"
import { freePort } from "@cairn/testkit/freePort"
import * as Wire from "@cairn/testkit/Wire"
import { ConfigProvider, Effect, Layer, Logger, LogLevel } from "effect"
import { notesDeployment } from "../src/application.js"

export interface Claims {
  readonly sub: string
  readonly resource?: "db" | "mcp"
  readonly [claim: string]: unknown
}

export interface Running {
  readonly base: string
  readonly token: (claims: Claims) => Effect.Effect<string>
}

/** Starts the notes app for the current scope. */
export const startNotes = Effect.gen(function* () {
  const port = yield* freePort()
  const base = `http://127.0.0.1:${port}`
  const settings = onLoopback({ port, dataDir: mkdtempSync(join(tmpdir(), "cairn-notes-")) })
  const env = ConfigProvider.fromMap(
    new Map([
      ["CAIRN_DEV_ISSUER_URL", `http://127.0.0.1:${yield* freePort()}`],
      ["CAIRN_SQLITE_SYNCHRONOUS", "NORMAL"]
    ])
  )
  yield* Layer.build(
    App(notesDeployment).pipe(
      Layer.provide(Settings.layer(settings)),
      Layer.provide(Layer.setConfigProvider(env)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
    )
  )
  const dev = yield* devIssuer.pipe(Effect.provideService(Settings, settings), Effect.withConfigProvider(env), Effect.orDie)
  const token = ({ resource, sub, ...claims }: Claims) =>
    signDevToken(dev, { subject: sub, audience: `${base}/${resource ?? "db"}`, claims, scope: accessScopes.join(" "), ttlSeconds: 3600 })
  return { base, token } satisfies Running
})

/** A snapshot on `/db/sync` small enough for one page: its first (and only) answer. */
export const snapshot = (app: Running, token: string, payload: unknown) => Wire.sync(app, token, "SyncSnapshot", payload)

export const { mcp, rpc } = Wire
export type Answer = Wire.Answer
