/**
 * The ids the engine passes around, branded so one is never taken for another: the
 * secret key naming a tenant's database, the opaque id naming its file, and the id a
 * caller gives one mutation intent.
 */
import { identity, Schema } from "effect"

/**
 * The database key from the verified identity: the chosen database deployment's key claim,
 * namespaced by that database deployment (`Deployment.databaseKeyOf`). Secret to the server:
 * it selects a database and never appears in a file name, a log or an answer.
 */
export const DatabaseKey = Schema.String.pipe(Schema.brand("DatabaseKey"))
export type DatabaseKey = typeof DatabaseKey.Type

/** The opaque digest of a database key: the file's name, safe for logs and metrics, never public. */
export const DatabaseId = Schema.String.pipe(Schema.brand("DatabaseId"))
export type DatabaseId = typeof DatabaseId.Type

const uuidV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** A caller-chosen UUIDv7 naming one mutation intent, in its canonical lowercase form. */
export const InvocationId = Schema.String.pipe(
  Schema.filter((id) => uuidV7.test(id), {
    message: () => "invocationId must be a UUIDv7 (time-ordered UUID) that names this one intent."
  }),
  Schema.brand("InvocationId")
)
export type InvocationId = typeof InvocationId.Type

/** A UUIDv7 in any letter case, decoded to its `InvocationId`: the same intent whatever case a client sends. */
export const InvocationIdFromString = Schema.transform(Schema.String, InvocationId, {
  strict: true,
  decode: (id) => id.toLowerCase(),
  encode: identity
})
