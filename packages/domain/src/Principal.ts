/**
 * The verified caller. Built only from a verified token; `databaseKey` is derived
 * from the identity and never from a request parameter.
 */
import { Data } from "effect"
import type { DatabaseKey } from "./Ids.js"

export class Principal extends Data.Class<{
  readonly subject: string
  readonly roles: ReadonlyArray<string>
  readonly claims: Readonly<Record<string, unknown>>
  readonly scopes: ReadonlyArray<string>
  readonly databaseKey: DatabaseKey
}> {
  hasRole(role: string): boolean {
    return this.roles.includes(role)
  }
}
