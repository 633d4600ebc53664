/** Commit positions: defined in `@cairn/domain/Position` (clients compare them too). */
export { decode, encode } from "@cairn/domain/Position"
