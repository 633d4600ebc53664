/** Wire payloads the end-to-end tests send to the tracker: references, a Project query, a Project.create. */
import { expect } from "@effect/vitest"
export const entity = (name: string) => ({ kind: "entity", name })

/** Every project's name. */
export const projects = { version: 1, from: entity("Project"), select: { name: { path: ["name"] } } }

/** A `Project.create` Mutate payload. */
export const createProject = (name: string, invocationId: string, description?: string) => ({
  operation: { kind: "operation", owner: entity("Project"), name: "create" },
  input: { name, ...(description ? { description } : {}) },
  invocationId
})

/** `Project.create` ("Apollo") as one plain `/db/rpc` POST to the server at `base`; its receipt (the call must succeed). */
export const postCreateProject = async (base: string, bearer: string, invocationId: string) => {
  const response = await fetch(`${base}/db/rpc`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", connection: "close" },
    body: JSON.stringify({ _tag: "Request", id: "1", tag: "Mutate", headers: [], payload: createProject("Apollo", invocationId) })
  })
  const text = await response.text()
  expect(response.status, text).toBe(200)
  const exit = (JSON.parse(text) as Array<any>).find((m) => m._tag === "Exit")?.exit
  expect(exit?._tag, text).toBe("Success")
  return exit.value as { outcome: string; position: string }
}
