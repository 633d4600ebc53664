/** Strict decoders of sync requests (temporary: the bounded filter decoder replaces them). */
import { ChangesRequest, decodeStrict, InvalidQuery, SnapshotRequest, summarizeIssues } from "@cairn/domain"

export const decodeSnapshotRequest = decodeStrict(
  SnapshotRequest,
  (issues) => new InvalidQuery({ message: `The snapshot request is malformed: ${summarizeIssues(issues)}.`, issues })
)

export const decodeChangesRequest = decodeStrict(
  ChangesRequest,
  (issues) => new InvalidQuery({ message: `The changes request is malformed: ${summarizeIssues(issues)}.`, issues })
)
