/**
 * The databases whose entity is active in this process right now. A runner serves a read
 * locally only while it hosts the database's entity (its writer is here and current); every
 * other read is forwarded to the entity. Entries live exactly as long as the entity's scope.
 */
import { Context, Effect, Layer, type Scope } from "effect"

export interface HostedDatabasesShape {
  /** Whether the entity of database `id` is active here. */
  readonly has: (id: string) => boolean
  /** Marks database `id` hosted until the current (entity) scope closes. */
  readonly enter: (id: string) => Effect.Effect<void, never, Scope.Scope>
}

export class HostedDatabases extends Context.Tag("@cairn/cluster/HostedDatabases")<HostedDatabases, HostedDatabasesShape>() {
  static readonly layer: Layer.Layer<HostedDatabases> = Layer.sync(HostedDatabases, () => {
    const hosted = new Set<string>()
    return {
      has: (id) => hosted.has(id),
      enter: (id) => Effect.acquireRelease(Effect.sync(() => void hosted.add(id)), () => Effect.sync(() => void hosted.delete(id)))
    }
  })
}
