/** Policy compilation failures: every problem found, each naming the rule at fault. */
import { Data } from "effect"

export class PolicyError extends Data.TaggedError("PolicyError")<{
  readonly problems: ReadonlyArray<string>
}> {
  override get message(): string {
    return `The policy does not compile:\n- ${this.problems.join("\n- ")}`
  }
}
