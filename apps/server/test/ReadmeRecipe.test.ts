// The README's "Adding an entity and an operation", applied literally: its code blocks are
// read from README.md (so this fails when the README drifts), pasted where their first
// comment says into a copy of `catalog/src`, type-checked, and served by the real App; a
// milestone is created, closed and read back. Without the policy step, startup warns by name.
// Also: the engine's own tests never read the example app, so changing `catalog/` cannot break them.
import { execFile } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { CairnClient } from "@cairn/client/CairnClient"
import { Policy } from "@cairn/policy"
import { Deployment, type DeploymentDefinition } from "@cairn/server/engine/Deployment"
import { Effect, Logger, LogLevel } from "effect"
import { v7 as uuidv7 } from "uuid"
import { startApp } from "./support/app.js"

const root = fileURLToPath(new URL("../../..", import.meta.url))

/** The section's text and its code blocks, keyed by their first line (the place to paste them). */
const recipe = () => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  const start = readme.indexOf("## Adding an entity and an operation")
  assert.isAtLeast(start, 0, "README has the section")
  const section = readme.slice(start, readme.indexOf("\n## ", start + 1))
  const blocks = new Map<string, string>()
  for (const [, body] of section.matchAll(/```ts\n([\s\S]*?)```/g)) {
    const [first, ...rest] = body!.split("\n")
    if (first!.startsWith("// catalog/src/")) blocks.set(first!.slice(3), rest.join("\n"))
  }
  const block = (place: string) => {
    const found = blocks.get(place)
    assert.isDefined(found, `README has a block for "${place}"`)
    return found!
  }
  return { section, block }
}

/** Inserts `text` right after the one occurrence of `anchor` in `file`. */
const insertAfter = (file: string, anchor: string | RegExp, text: string) => {
  const source = readFileSync(file, "utf8")
  const matches = [...source.matchAll(new RegExp(typeof anchor === "string" ? anchor.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : anchor.source, "g"))]
  assert.strictEqual(matches.length, 1, `one "${String(anchor)}" in ${file}`)
  const at = matches[0]!.index! + matches[0]![0].length
  writeFileSync(file, source.slice(0, at) + text + source.slice(at))
}

const insertBefore = (file: string, anchor: string, text: string) => {
  const source = readFileSync(file, "utf8")
  assert.strictEqual(source.split(anchor).length, 2, `one "${anchor}" in ${file}`)
  writeFileSync(file, source.replace(anchor, text + anchor))
}

/**
 * A copy of `catalog/src` under the repository (so it resolves the workspace's packages) with
 * the recipe applied; left as it is when the example already holds it (someone followed it).
 */
const applyRecipe = () => {
  const { block, section } = recipe()
  mkdirSync(join(root, ".tmp"), { recursive: true })
  const dir = mkdtempSync(join(root, ".tmp", "readme-recipe-"))
  cpSync(join(root, "catalog/src"), join(dir, "src"), { recursive: true })
  const file = (name: string) => join(dir, "src", name)

  const definitions = block("catalog/src/tracker.ts, above `export const tracker = RootSchema.make(...)`")
  const entities = [...definitions.matchAll(/export const (\w+) = Entity\.make/g)].map((m) => m[1]!)
  const operations = [...definitions.matchAll(/export const (\w+) = Operation\.make/g)].map((m) => m[1]!)
  assert.deepStrictEqual([entities, operations], [["Milestone"], ["MilestoneCreate", "MilestoneClose"]])
  assert.include(section, `entities: [${entities.join(", ")}, `)
  assert.include(section, `operations: [${operations.join(", ")}, `)
  if (readFileSync(file("tracker.ts"), "utf8").includes(`export const ${entities[0]} =`)) return dir

  // 1. Definitions, above the root schema.
  insertBefore(file("tracker.ts"), "export const tracker = RootSchema.make(", definitions + "\n")
  // 2. The root schema's lists: every entity and operation the definitions export, as the README says.
  insertAfter(file("tracker.ts"), /RootSchema\.make\("tracker", \{[\s\S]*?entities: \[/, `${entities.join(", ")}, `)
  insertAfter(file("tracker.ts"), /RootSchema\.make\("tracker", \{[\s\S]*?operations: \[/, `\n    ${operations.join(", ")},`)
  // 3. Handlers.
  insertAfter(file("handlers.ts"), "Handlers.make(tracker, {", "\n" + block("catalog/src/handlers.ts, in `Handlers.make(tracker, { ... })`"))
  // 4. Policy: the import the README names, then the rules.
  const imported = /Import `([^`]+)` from `\.\/tracker\.js`/.exec(section)
  assert.isNotNull(imported, "README names the policy's import")
  insertBefore(file("policy.ts"), "\nconst {", `import { ${imported![1]} } from "./tracker.js"\n`)
  insertAfter(file("policy.ts"), "entities: [", "\n" + block("catalog/src/policy.ts, in `Policy.make({ entities: [ ... ] })`"))
  insertAfter(file("policy.ts"), "operations: [", "\n" + block("catalog/src/policy.ts, in `Policy.make({ operations: [ ... ] })`"))
  return dir
}

const typeCheck = (dir: string) =>
  Effect.async<{ readonly code: number; readonly output: string }>((resume) => {
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        extends: join(root, "tsconfig.base.json"),
        compilerOptions: { composite: false, incremental: false, declaration: false, emitDeclarationOnly: false, noEmit: true },
        include: ["src"]
      })
    )
    execFile(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(dir, "tsconfig.json")], { cwd: dir }, (error, stdout, stderr) =>
      resume(Effect.succeed({ code: error === null ? 0 : (typeof error.code === "number" ? error.code : 1), output: stdout + stderr }))
    )
  })

const loadDeployment = (dir: string) =>
  Effect.promise(() => import(pathToFileURL(join(dir, "src/application.ts")).href) as Promise<{ readonly trackerDeployment: DeploymentDefinition }>).pipe(
    Effect.map((module) => module.trackerDeployment)
  )

const removeAfter = (dir: string) => Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))

describe("README: adding an entity and an operation", () => {
  it.scopedLive("applied to a copy of the example, type-checks, serves the new entity, creates and reads it back as an admin", () =>
    Effect.gen(function* () {
      const dir = applyRecipe()
      yield* removeAfter(dir)
      const checked = yield* typeCheck(dir)
      assert.strictEqual(checked.code, 0, checked.output)

      const deployment = yield* loadDeployment(dir)
      const compiled = yield* Deployment.make(deployment)
      assert.deepStrictEqual(compiled.invisible, { entities: [], operations: [] })
      assert.include(compiled.catalog.entities.map((e) => e.name), "Milestone")

      const logged: Array<string> = []
      const capture = Logger.make(({ logLevel, message }) => {
        if (LogLevel.greaterThanEqual(logLevel, LogLevel.Warning)) logged.push([message].flat().join(" "))
      })
      const app = yield* startApp({ deployment }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
      assert.deepStrictEqual(logged.filter((l) => l.includes("visible to no one")), [])

      const admin = app.as(yield* app.token({ sub: "root", org: "acme", roles: ["admin"] }))
      const outsider = app.as(yield* app.token({ sub: "nora", org: "acme" }))
      const mutate = (owner: string, name: string, input: unknown, target?: string) =>
        Effect.flatMap(CairnClient, (client) =>
          client.mutate({
            operation: { kind: "operation", owner: { kind: "entity", name: owner }, name },
            input,
            invocationId: uuidv7(),
            ...(target !== undefined ? { target: { kind: "entity", entity: owner, id: target } } : {})
          })
        )
      const created = (receipt: { readonly outcome: string; readonly output?: unknown }) => {
        assert.strictEqual(receipt.outcome, "committed")
        return (receipt.output as { readonly id: string }).id
      }
      const project = created(yield* admin(mutate("Project", "create", { name: "Apollo" })))
      const milestone = created(yield* admin(mutate("Milestone", "create", { projectId: project, title: "Launch", due: "2026-12-01" })))
      assert.strictEqual((yield* admin(mutate("Milestone", "close", {}, milestone))).outcome, "committed")
      const again = yield* Effect.flip(admin(mutate("Milestone", "close", {}, milestone)))
      assert.deepStrictEqual([again._tag, again.message], ["OperationRejected", "This milestone is already closed."])

      const milestones = Effect.flatMap(CairnClient, (client) =>
        client.query({
          query: {
            version: 1,
            from: { kind: "entity", name: "Milestone" },
            select: { id: { path: ["id"] }, title: { path: ["title"] }, closed: { path: ["closed"] }, due: { path: ["due"] }, project: { path: ["project", "name"] } }
          }
        })
      )
      assert.deepStrictEqual((yield* admin(milestones)).rows, [{ id: milestone, title: "Launch", closed: true, due: "2026-12-01", project: "Apollo" }])
      // The recipe's rule: members of the project only.
      assert.deepStrictEqual((yield* outsider(milestones)).rows, [])
    }))

  it.scopedLive("without the policy step, the real start warns that Milestone and its operations are visible to no one", () =>
    Effect.gen(function* () {
      const dir = applyRecipe()
      yield* removeAfter(dir)
      const applied = yield* loadDeployment(dir)
      // Step 4 left out: the same deployment without the rules naming Milestone.
      const deployment: DeploymentDefinition = {
        ...applied,
        policy: Policy.make({
          entities: applied.policy.entities.filter((e) => e.entity !== "Milestone"),
          operations: applied.policy.operations.filter((o) => o.owner !== "Milestone")
        })
      }
      const logged: Array<string> = []
      const capture = Logger.make(({ logLevel, message }) => {
        if (LogLevel.greaterThanEqual(logLevel, LogLevel.Warning)) logged.push([message].flat().join(" "))
      })
      yield* startApp({ deployment }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
      assert.deepStrictEqual(logged.filter((l) => l.includes("visible to no one")), [
        "Policy: entity Milestone and operations Milestone.create, Milestone.close are visible to no one; add Policy.entity/Policy.operation rules"
      ])
    }))
})

describe("engine tests and the example app", () => {
  const files = (dir: string): Array<string> =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name)
      return statSync(path).isDirectory() ? files(path) : [path]
    })

  it("no engine test, nor an engine package's manifest or project, reads the example app (@cairn/tracker, catalog/)", () => {
    const packages = readdirSync(join(root, "packages")).map((p) => join(root, "packages", p))
    const tests = packages.filter((p) => existsSync(join(p, "test"))).flatMap((p) => files(join(p, "test")))
    assert.isAbove(tests.length, 20)
    const offenders = [
      ...tests.filter((f) => /@cairn\/tracker|\bcatalog\/src\//.test(readFileSync(f, "utf8"))),
      ...packages.map((p) => join(p, "package.json")).filter((f) => readFileSync(f, "utf8").includes("@cairn/tracker")),
      ...packages.map((p) => join(p, "tsconfig.json")).filter((f) => readFileSync(f, "utf8").includes("../../catalog\""))
    ]
    assert.deepStrictEqual(offenders, [])
  })
})
