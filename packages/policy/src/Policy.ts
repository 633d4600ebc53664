/**
 * Policies: rules written against the catalog (which entities, fields and operations a
 * principal sees, which rows, which targets and references an operation may touch),
 * compiled once per catalog install into a `CompiledPolicy` that yields per-principal
 * `View`s and `MutationRule`s. Anything a policy does not grant is invisible.
 */
import { Effect, type Schema, SchemaAST as AST } from "effect"
import { type Entity, type Operation, RowScope } from "@cairn/catalog"
import { type Catalog } from "@cairn/catalog/Catalog"
import { digest } from "@cairn/catalog/Digest"
import { View } from "@cairn/catalog/View"
import type { OperationRef } from "@cairn/domain/References"
import type { Principal } from "@cairn/domain/Principal"
import { checkRule } from "./internal/check.js"
import { both, type Resolved, resolve, toRowScope } from "./internal/resolve.js"
import * as MutationRule from "./MutationRule.js"
import { PolicyError } from "./PolicyError.js"
import { always, type Condition, type Rule } from "./Rule.js"

export interface EntityRules<Field extends string = string> {
  /** The rows of the entity the principal may read; targets and references must lie in them too. */
  readonly read: Rule
  /** Whether the entity exists for the principal at all (default: always). */
  readonly visible?: Condition
  /** Per-field visibility (default: visible); a hidden field behaves as nonexistent. */
  readonly fields?: Partial<Record<Field, Condition>>
}

export interface EntityPolicy extends EntityRules {
  readonly _tag: "EntityPolicy"
  readonly entity: string
}

/** Where an input id must point: a row of `entity` (default: the owner's relationship through that field) satisfying `where`. */
export interface ReferenceRule {
  readonly entity?: string
  readonly where?: Rule
}

export interface OperationRules<InputField extends string = string> {
  /** Whether the principal sees and may invoke the operation (default: always). */
  readonly visible?: Condition
  /** Targeted operations: a rule over the owner entity the target row must satisfy (besides the owner's read rule). */
  readonly target?: Rule
  /**
   * Ids in the input that must point at rows satisfying a rule. Input fields named like
   * one of the owner's relationship fields are references implicitly; every reference
   * must also lie in the referenced entity's read scope.
   */
  readonly references?: Partial<Record<InputField, Rule | ReferenceRule>>
}

export interface OperationPolicy extends OperationRules {
  readonly _tag: "OperationPolicy"
  readonly owner: string
  readonly name: string
}

export interface PolicyDefinition {
  readonly _tag: "PolicyDefinition"
  readonly entities: ReadonlyArray<EntityPolicy>
  readonly operations: ReadonlyArray<OperationPolicy>
}

type FieldOf<E> = E extends Entity.Entity<string, infer F> ? keyof F & string : string
type InputFieldOf<O> = O extends Operation.Operation<string, string, infer I, any, boolean>
  ? keyof Schema.Schema.Encoded<I> & string
  : string

/** Rules for one entity, named by its definition (typed field names) or by name. */
export const entity = <E extends Entity.Entity<string, any> | string>(entity: E, rules: EntityRules<FieldOf<E>>): EntityPolicy => ({
  _tag: "EntityPolicy",
  entity: typeof entity === "string" ? entity : entity.name,
  ...(rules as EntityRules)
})

/** Rules for one operation, named by its definition (typed input fields) or as `"Owner.name"`. */
export const operation = <O extends Operation.Any | `${string}.${string}`>(
  operation: O,
  rules: OperationRules<InputFieldOf<O>> = {}
): OperationPolicy => {
  const [owner, name] = typeof operation === "string" ? (operation.split(".") as [string, string]) : [operation.owner, operation.name]
  return { _tag: "OperationPolicy", owner, name, ...(rules as OperationRules) }
}

export const make = (definition: {
  readonly entities: ReadonlyArray<EntityPolicy>
  readonly operations: ReadonlyArray<OperationPolicy>
}): PolicyDefinition => ({ _tag: "PolicyDefinition", ...definition })

interface CompiledReference {
  readonly inputField: string
  readonly entity: string
  readonly where: Rule
}

interface EntityEntry {
  readonly entity: string
  readonly read: Rule
  readonly visible: Condition
  readonly fields: ReadonlyArray<readonly [string, Condition]>
}

interface OperationEntry {
  readonly owner: string
  readonly name: string
  readonly targeted: boolean
  readonly visible: Condition
  readonly target: Rule
  readonly references: ReadonlyArray<CompiledReference>
}

/** Views kept per compiled policy (one per distinct principal identity). */
const VIEW_CACHE_CAPACITY = 1024

/** Per-principal decisions shared by `view` and `mutation`. */
class Decisions {
  private readonly reads = new Map<string, Resolved>()
  constructor(
    private readonly catalog: Catalog,
    private readonly entities: ReadonlyMap<string, EntityEntry>,
    readonly principal: Principal
  ) {}

  holds(condition: Condition): boolean {
    return resolve(this.catalog, this.principal, undefined, condition) === true
  }

  entityVisible(name: string): boolean {
    const e = this.entities.get(name)
    return e !== undefined && this.holds(e.visible)
  }

  read(name: string): Resolved {
    let r = this.reads.get(name)
    if (r === undefined) {
      r = this.entityVisible(name) ? resolve(this.catalog, this.principal, name, this.entities.get(name)!.read) : false
      this.reads.set(name, r)
    }
    return r
  }

  over(entity: string, rule: Rule): Resolved {
    return resolve(this.catalog, this.principal, entity, rule)
  }
}

export class CompiledPolicy {
  private readonly entities: ReadonlyMap<string, EntityEntry>
  private readonly operations: ReadonlyMap<string, OperationEntry>

  constructor(
    /** The catalog the policy was compiled against, its token covering this policy's digest. */
    readonly catalog: Catalog,
    /** Stable digest of the compiled rules. */
    readonly digest: string,
    entities: ReadonlyArray<EntityEntry>,
    operations: ReadonlyArray<OperationEntry>
  ) {
    this.entities = new Map(entities.map((e) => [e.entity, e]))
    this.operations = new Map(operations.map((o) => [`${o.owner}.${o.name}`, o]))
  }

  /** The claims any rule of this policy reads (besides subject, roles and scopes). */
  private claimNames: ReadonlyArray<string> | undefined
  /** Views by principal identity (see `identityOf`): a view is a pure function of it. Bounded. */
  private readonly views = new Map<string, View>()

  /**
   * What of a principal this policy can see: subject, roles, scopes and the claims its rules
   * name. Two principals with the same identity get the same view.
   */
  private identityOf(principal: Principal): string {
    if (this.claimNames === undefined) {
      const names = new Set<string>()
      const seen = new Set<unknown>()
      const walk = (u: unknown): void => {
        if (typeof u !== "object" || u === null || seen.has(u)) return
        seen.add(u)
        const o = u as { readonly ref?: unknown; readonly op?: unknown; readonly name?: unknown }
        if ((o.ref === "claim" || o.op === "hasClaim") && typeof o.name === "string") names.add(o.name)
        for (const v of Array.isArray(u) ? u : Object.values(u)) walk(v)
      }
      walk([...this.entities.values()])
      walk([...this.operations.values()])
      this.claimNames = [...names].sort()
    }
    const claims = principal.claims as Readonly<Record<string, unknown>>
    return JSON.stringify([
      principal.subject,
      principal.roles,
      principal.scopes,
      this.claimNames.map((n) => (Object.hasOwn(claims, n) ? [claims[n]] : []))
    ])
  }

  /** The principal's visible catalog: definitions, fields, operations and row scopes. */
  view(principal: Principal): View {
    const key = this.identityOf(principal)
    const cached = this.views.get(key)
    if (cached !== undefined) return cached
    const view = this.computeView(principal)
    if (this.views.size >= VIEW_CACHE_CAPACITY) this.views.delete(this.views.keys().next().value!)
    this.views.set(key, view)
    return view
  }

  private computeView(principal: Principal): View {
    const d = new Decisions(this.catalog, this.entities, principal)
    const visible = new Set([...this.entities.keys()].filter((e) => d.entityVisible(e)))
    const hidden = new Set<string>()
    for (const e of this.entities.values()) {
      for (const [field, condition] of e.fields) if (!d.holds(condition)) hidden.add(`${e.entity}.${field}`)
    }
    const operations = new Set(
      [...this.operations.values()].filter((o) => visible.has(o.owner) && d.holds(o.visible)).map((o) => `${o.owner}.${o.name}`)
    )
    const scopes = new Map([...visible].map((e) => [e, toRowScope(d.read(e))]))
    return new View(this.catalog, {
      entity: (name) => visible.has(name),
      field: (entity, field) => visible.has(entity) && !hidden.has(`${entity}.${field}`),
      operation: (owner, name) => operations.has(`${owner}.${name}`),
      rowScope: (entity) => scopes.get(entity) ?? RowScope.none
    })
  }

  /** The rows of `entity` the principal may read. */
  rowScope(principal: Principal, entity: string): RowScope.RowScope {
    return toRowScope(new Decisions(this.catalog, this.entities, principal).read(entity))
  }

  /**
   * What the writer must check before running `operation` for the principal. `Deny`
   * exactly when the operation is not in the principal's view, or no target could ever
   * qualify; the caller then answers as for an operation or target that does not exist.
   */
  mutation(principal: Principal, operation: OperationRef): MutationRule.MutationRule {
    const op = this.operations.get(`${operation.owner.name}.${operation.name}`)
    if (!op) return MutationRule.deny
    const d = new Decisions(this.catalog, this.entities, principal)
    if (!d.entityVisible(op.owner) || !d.holds(op.visible)) return MutationRule.deny
    let target: RowScope.RowScope | undefined
    if (op.targeted) {
      const t = both(d.read(op.owner), d.over(op.owner, op.target))
      if (t === false) return MutationRule.deny
      target = toRowScope(t)
    }
    const references = op.references.map((r) => ({
      inputField: r.inputField,
      entity: r.entity,
      scope: toRowScope(both(d.read(r.entity), d.over(r.entity, r.where)))
    }))
    return MutationRule.allow(target, references)
  }
}

const inputFields = (op: { readonly input: Schema.Schema<any, any> }): ReadonlyArray<string> => {
  const ast = AST.encodedAST(op.input.ast)
  return AST.isTypeLiteral(ast) ? ast.propertySignatures.map((p) => String(p.name)) : []
}

const byKey = <A>(key: (a: A) => string) => (a: A, b: A) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0)

/**
 * Compiles `definition` against `catalog`; every problem is reported at once. The
 * result's `catalog` is `catalog.withPolicyDigest(digest)`, so its token covers the policy.
 */
export const compile = (catalog: Catalog, definition: PolicyDefinition): Effect.Effect<CompiledPolicy, PolicyError> =>
  Effect.suspend(() => {
    const problems: Array<string> = []
    const entities: Array<EntityEntry> = []
    const seenEntities = new Set<string>()
    for (const e of definition.entities) {
      const where = `entity "${e.entity}"`
      const compiled = catalog.entity(e.entity)
      if (!compiled) {
        problems.push(`${where}: not defined in catalog "${catalog.name}"`)
        continue
      }
      if (seenEntities.has(e.entity)) problems.push(`${where}: has more than one policy`)
      seenEntities.add(e.entity)
      if (e.read === undefined) problems.push(`${where}: needs a read rule (use Rule.always to grant every row)`)
      else checkRule(catalog, e.entity, e.read, `${where}, read rule`, problems)
      const visible = e.visible ?? always
      checkRule(catalog, undefined, visible, `${where}, visible condition`, problems)
      const fields: Array<readonly [string, Condition]> = []
      for (const [field, condition] of Object.entries(e.fields ?? {}) as Array<[string, Condition | undefined]>) {
        if (condition === undefined) continue
        if (field === "id") problems.push(`${where}: the record id cannot be hidden`)
        else if (!compiled.field(field)) problems.push(`${where}: has no field "${field}" to hide`)
        checkRule(catalog, undefined, condition, `${where}, visibility of field "${field}"`, problems)
        fields.push([field, condition])
      }
      fields.sort(byKey(([f]) => f))
      entities.push({ entity: e.entity, read: e.read ?? always, visible, fields })
    }

    const operations: Array<OperationEntry> = []
    const seenOperations = new Set<string>()
    for (const o of definition.operations) {
      const where = `operation "${o.owner}.${o.name}"`
      const compiled = catalog.operation(o.owner, o.name)
      if (!compiled) {
        problems.push(`${where}: not defined in catalog "${catalog.name}"`)
        continue
      }
      if (seenOperations.has(`${o.owner}.${o.name}`)) problems.push(`${where}: has more than one policy`)
      seenOperations.add(`${o.owner}.${o.name}`)
      if (!seenEntities.has(o.owner)) problems.push(`${where}: its owner entity "${o.owner}" has no policy, so the operation could never be visible`)
      const visible = o.visible ?? always
      checkRule(catalog, undefined, visible, `${where}, visible condition`, problems)
      if (o.target !== undefined) {
        if (!compiled.targeted) problems.push(`${where}: is targetless, so it has no target rule (constrain its input with references)`)
        else checkRule(catalog, o.owner, o.target, `${where}, target rule`, problems)
      }
      const owner = catalog.entity(o.owner)!
      const fields = inputFields(compiled)
      const references: Array<CompiledReference> = []
      const explicit = new Map(Object.entries(o.references ?? {}) as Array<[string, Rule | ReferenceRule | undefined]>)
      for (const [inputField, given] of explicit) {
        if (given === undefined) continue
        const rule: ReferenceRule = "op" in given ? { where: given } : given
        if (!fields.includes(inputField)) {
          problems.push(`${where}: reference "${inputField}" is not a field of the operation's input (${fields.join(", ") || "none"})`)
          continue
        }
        const entity = rule.entity ?? owner.relationships.find((r) => r.via === inputField)?.target
        if (entity === undefined) {
          problems.push(`${where}: reference "${inputField}" needs an entity (no relationship of ${o.owner} goes through "${inputField}")`)
          continue
        }
        if (!catalog.entity(entity)) {
          problems.push(`${where}: reference "${inputField}" points at unknown entity "${entity}"`)
          continue
        }
        if (rule.where !== undefined) checkRule(catalog, entity, rule.where, `${where}, reference "${inputField}"`, problems)
        references.push({ inputField, entity, where: rule.where ?? always })
      }
      for (const rel of owner.relationships) {
        if (fields.includes(rel.via) && !explicit.has(rel.via)) references.push({ inputField: rel.via, entity: rel.target, where: always })
      }
      references.sort(byKey((r) => r.inputField))
      operations.push({ owner: o.owner, name: o.name, targeted: compiled.targeted, visible, target: o.target ?? always, references })
    }

    if (problems.length > 0) return Effect.fail(new PolicyError({ problems }))
    entities.sort(byKey((e) => e.entity))
    operations.sort(byKey((o) => `${o.owner}.${o.name}`))
    const policyDigest = digest({
      v: 1,
      entities: entities.map((e) => ({ ...e, fields: Object.fromEntries(e.fields) })),
      operations
    })
    return Effect.succeed(new CompiledPolicy(catalog.withPolicyDigest(policyDigest), policyDigest, entities, operations))
  })
