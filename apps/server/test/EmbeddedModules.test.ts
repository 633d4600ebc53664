// The embedded default (`npm start`, no CAIRN_ROLE) never loads the cluster: not @cairn/cluster,
// not @effect/cluster, not PostgreSQL's client. Checked on the real entry point as a child
// process whose every module resolution is recorded; the controls are that the engine's own
// modules are in the same record, and (ClusterEndToEnd) that a runner's record holds the cluster.
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { launchChild, stopChild } from "./support/child.js"
import { isClusterModule, moduleRecording } from "./support/modules.js"

describe("embedded mode", () => {
  it("loads none of the cluster's modules", async () => {
    const recording = moduleRecording()
    const server = await launchChild("apps/server/src/main.ts", mkdtempSync(join(tmpdir(), "cairn-embedded-")), recording.env, undefined, recording.nodeArgs)
    try {
      expect((await fetch(`${server.base}/health`)).status).toBe(200)
    } finally {
      await stopChild(server, "SIGTERM")
    }
    const modules = recording.modules()
    // The control: the record holds the engine, the store and their dependencies, so an absence below means something.
    expect(modules.some((m) => m.endsWith("/packages/server/src/engine/DataPlane.ts"))).toBe(true)
    expect(modules.some((m) => m.endsWith("/packages/server/src/engine/DatabaseRouter.ts"))).toBe(true)
    expect(modules.some((m) => m.includes("/node_modules/@effect/platform-node/"))).toBe(true)
    expect(modules.filter(isClusterModule)).toEqual([])
  })
})
