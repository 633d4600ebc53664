/**
 * A principal's visible catalog: which definitions, fields and operations exist for
 * them, and which rows. Everything outside the view behaves exactly as nonexistent.
 * `View.full` sees everything; the policy package builds narrower views.
 */
import type { Catalog, CompiledEntity, CompiledField, CompiledOperation, CompiledRelationship, CompiledTrait } from "./Catalog.js"
import * as CatalogVersion from "./CatalogVersion.js"
import * as RowScope from "./RowScope.js"

export interface ViewRules {
  readonly entity: (entity: string) => boolean
  readonly field: (entity: string, field: string) => boolean
  readonly operation: (owner: string, name: string) => boolean
  readonly rowScope: (entity: string) => RowScope.RowScope
}

export class View {
  private readonly fieldCache = new Map<string, ReadonlyArray<CompiledField>>()
  /** A view never changes: its token is computed once (every mutation and query reads it). */
  private tokenCache: string | undefined

  constructor(
    readonly catalog: Catalog,
    readonly rules: ViewRules
  ) {}

  static full(catalog: Catalog): View {
    return new View(catalog, {
      entity: () => true,
      field: () => true,
      operation: () => true,
      rowScope: () => RowScope.all
    })
  }

  /** The catalog token this view issues: a version per visible definition (see `CatalogVersion`). */
  get token(): string {
    return (this.tokenCache ??= CatalogVersion.tokenOf(this.catalog, this.entities(), this.operations()))
  }

  /** Whether a request made under `token` may run: every definition it touches is unchanged for it. */
  admits(token: string, touched: ReadonlyArray<CatalogVersion.Touched>): boolean {
    return CatalogVersion.admits(this.catalog, token, touched)
  }

  entity(name: string): CompiledEntity | undefined {
    const entity = this.catalog.entity(name)
    return entity && this.rules.entity(name) ? entity : undefined
  }

  /** The visible fields of a visible entity, in definition order. */
  fields(entity: CompiledEntity): ReadonlyArray<CompiledField> {
    let cached = this.fieldCache.get(entity.name)
    if (!cached) {
      cached = entity.fields.filter((f) => this.rules.field(entity.name, f.name))
      this.fieldCache.set(entity.name, cached)
    }
    return cached
  }

  field(entity: string, field: string): CompiledField | undefined {
    const e = this.entity(entity)
    const f = e?.field(field)
    return f && this.rules.field(entity, field) ? f : undefined
  }

  /** A relationship is visible when its target entity and its id field are. */
  relationship(entity: string, name: string): CompiledRelationship | undefined {
    const rel = this.entity(entity)?.relationship(name)
    return rel && this.entity(rel.target) && this.field(entity, rel.via) ? rel : undefined
  }

  relationships(entity: CompiledEntity): ReadonlyArray<CompiledRelationship> {
    return entity.relationships.filter((r) => this.relationship(entity.name, r.name) !== undefined)
  }

  operation(owner: string, name: string): CompiledOperation | undefined {
    const op = this.catalog.operation(owner, name)
    return op && this.entity(owner) && this.rules.operation(owner, name) ? op : undefined
  }

  operations(): ReadonlyArray<CompiledOperation> {
    return this.catalog.operations.filter((o) => this.operation(o.owner, o.name) !== undefined)
  }

  entities(): ReadonlyArray<CompiledEntity> {
    return this.catalog.entities.filter((e) => this.rules.entity(e.name))
  }

  /** A trait is visible when a visible entity carries it. */
  trait(name: string): CompiledTrait | undefined {
    const trait = this.catalog.trait(name)
    return trait && trait.entities.some((e) => this.entity(e)) ? trait : undefined
  }

  traits(): ReadonlyArray<CompiledTrait> {
    return this.catalog.traits.filter((t) => this.trait(t.name) !== undefined)
  }

  rowScope(entity: string): RowScope.RowScope {
    return this.rules.rowScope(entity)
  }
}
