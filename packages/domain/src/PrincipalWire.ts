/**
 * The verified caller as it crosses a process hop (a front forwarding a call to the process
 * that runs the database). `Principal` is a `Data.Class`; this is its Schema. It is only ever
 * built from a principal the front verified, so the database key it carries is the one the
 * token selected, never a request parameter.
 */
import { Predicate, Schema } from "effect"
import { DatabaseKey } from "./Ids.js"
import { Principal } from "./Principal.js"

/** The fields of a `Principal`, as plain data. */
export const PrincipalFields = Schema.Struct({
  subject: Schema.String,
  roles: Schema.Array(Schema.String),
  claims: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  scopes: Schema.Array(Schema.String),
  databaseKey: DatabaseKey
})

/** A `Principal` value, recognised by its shape (a second copy of the domain makes `instanceof` lie). */
const PrincipalValue = Schema.declare(
  (u: unknown): u is Principal =>
    Predicate.hasProperty(u, "subject") && Predicate.hasProperty(u, "databaseKey") && Predicate.hasProperty(u, "hasRole"),
  { identifier: "Principal" }
)

/** Encodes a `Principal` to its fields and decodes the fields to a `Principal`. */
export const PrincipalWire = Schema.transform(PrincipalFields, PrincipalValue, {
  strict: true,
  decode: (fields) => new Principal(fields),
  encode: (principal) => ({
    subject: principal.subject,
    roles: principal.roles,
    claims: principal.claims,
    scopes: principal.scopes,
    databaseKey: principal.databaseKey
  })
})
