/**
 * Strict decoders of the describe and mutate requests, shared by every transport so a
 * malformed request reads the same over RPC and MCP: unknown keys are refused, and the
 * error lists the offending paths. (The query request has its own, in `@cairn/query`,
 * because its filter is checked against the planner's budget first.)
 */
import { decodeStrict, isSummaryIssue, omittedCount } from "./Decode.js"
import { DescribeRequest } from "./Describe.js"
import { MutateRequest } from "./Mutate.js"
import { InvalidInput, InvalidQuery, type Issue } from "./PublicError.js"

/**
 * The first `shown` issues as `path: message`, joined for a one-line error message; a
 * trailing summary issue (`isSummaryIssue`) adds to the count of the rest or is quoted.
 */
export const summarizeIssues = (issues: ReadonlyArray<Issue>, shown = 5): string => {
  const last = issues[issues.length - 1]
  const summary = last !== undefined && isSummaryIssue(last) ? last : undefined
  const listed = summary === undefined ? issues : issues.slice(0, -1)
  const omitted = summary === undefined ? undefined : omittedCount(summary)
  const more = listed.length - Math.min(shown, listed.length) + (omitted ?? 0)
  return (
    listed
      .slice(0, shown)
      // An issue written as a sentence keeps its words, not its full stop: the summary is one sentence.
      .map((i) => `${i.path}: ${i.message.replace(/\.$/, "")}`)
      .join("; ") +
    (more > 0 ? `; and ${more} more` : "") +
    (summary !== undefined && omitted === undefined ? `; ${summary.message}` : "")
  )
}

export const decodeDescribeRequest = decodeStrict(
  DescribeRequest,
  (issues) => new InvalidQuery({ message: `The describe request is malformed: ${summarizeIssues(issues)}.`, issues })
)

export const decodeMutateRequest = decodeStrict(
  MutateRequest,
  (issues) => new InvalidInput({ message: `The mutate request is malformed: ${summarizeIssues(issues)}.`, issues })
)
