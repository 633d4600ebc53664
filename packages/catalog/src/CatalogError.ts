/** Catalog compilation failures: every problem found, each naming the definition at fault. */
import { Data } from "effect"

export class CatalogError extends Data.TaggedError("CatalogError")<{
  readonly problems: ReadonlyArray<string>
}> {
  override get message(): string {
    return `The catalog does not compile:\n- ${this.problems.join("\n- ")}`
  }
}
