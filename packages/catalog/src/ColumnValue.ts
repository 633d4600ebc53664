/** Whether a JSON value can be stored in (and compared with) a column of a given type. */
import type { ColumnType } from "./internal/storedType.js"

/** A concrete scalar of the column's stored type (not checked against a literal set). */
export const fitsColumn = (column: ColumnType, value: unknown): boolean => {
  switch (column) {
    case "text":
      return typeof value === "string"
    case "integer":
      return typeof value === "number" && Number.isSafeInteger(value)
    case "real":
      return typeof value === "number" && Number.isFinite(value)
    case "boolean":
      return typeof value === "boolean"
  }
}
