/** Wire payloads the end-to-end tests send to the tracker: references, a Project query, a Project.create. */
export const entity = (name: string) => ({ kind: "entity", name })

/** Every project's name. */
export const projects = { version: 1, from: entity("Project"), select: { name: { path: ["name"] } } }

/** A `Project.create` Mutate payload. */
export const createProject = (name: string, invocationId: string, description?: string) => ({
  operation: { kind: "operation", owner: entity("Project"), name: "create" },
  input: { name, ...(description ? { description } : {}) },
  invocationId
})
