/**
 * The partial resumable uploads on disk, as `@tus/file-store` keeps them: per database a folder
 * `<dataDir>/uploads/<database id>` holding, per upload, its bytes (`<id>`) and its record
 * (`<id>.json`: declared size, metadata, creation date). Read here to count unfinished uploads
 * against the quota after a restart, and to expire them for every database, touched since the
 * start or not.
 */
import { rmdirSync } from "node:fs"
import { readdir, readFile, rm, stat } from "node:fs/promises"
import { join } from "node:path"

export interface PartialUpload {
  readonly id: string
  /** Declared length; `undefined` while deferred. */
  readonly size: number | undefined
  /** Bytes received so far. */
  readonly offset: number
  /** Creation time, ms since the epoch. */
  readonly createdAt: number
}

const UPLOAD_ID = /^[0-9a-f]{64}$/
const DATABASE_ID = /^[A-Za-z0-9_-]{1,128}$/

export const uploadsRoot = (dataDir: string) => join(dataDir, "uploads")
export const uploadDirectory = (dataDir: string, databaseId: string) => {
  // Ids are digests we made; anything else is a defect, never a path.
  if (!DATABASE_ID.test(databaseId)) throw new Error("not a database id")
  return join(uploadsRoot(dataDir), databaseId)
}

const missing = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code === "ENOENT"

const namesIn = async (dir: string): Promise<Array<string>> => {
  try {
    return await readdir(dir)
  } catch (error) {
    if (missing(error)) return []
    throw error
  }
}

/** One upload's record and bytes, or `undefined` when either is gone. */
export const readPartial = async (dir: string, id: string): Promise<PartialUpload | undefined> => {
  if (!UPLOAD_ID.test(id)) return undefined
  try {
    const record = JSON.parse(await readFile(join(dir, `${id}.json`), "utf8")) as { size?: unknown; creation_date?: unknown }
    const bytes = await stat(join(dir, id))
    const size = typeof record.size === "number" && Number.isSafeInteger(record.size) && record.size >= 0 ? record.size : undefined
    const created = typeof record.creation_date === "string" ? Date.parse(record.creation_date) : NaN
    return { id, size, offset: bytes.size, createdAt: Number.isFinite(created) ? created : bytes.mtimeMs }
  } catch (error) {
    if (missing(error) || error instanceof SyntaxError) return undefined
    throw error
  }
}

/** The unfinished uploads of one database. */
export const readPartials = async (dir: string): Promise<Array<PartialUpload>> => {
  const found: Array<PartialUpload> = []
  for (const name of await namesIn(dir)) {
    if (!UPLOAD_ID.test(name)) continue
    const partial = await readPartial(dir, name)
    if (partial !== undefined) found.push(partial)
  }
  return found
}

/**
 * Removes, under every database's folder, the uploads begun before `before` (ms since the epoch)
 * and left-overs of either half whose other half is gone, then folders left empty unless `inUse`
 * (a request is working in it). Answers the removed upload ids per database id.
 */
export const sweepUploads = async (root: string, before: number, inUse: (databaseId: string) => boolean): Promise<Map<string, Array<string>>> => {
  const removed = new Map<string, Array<string>>()
  for (const databaseId of await namesIn(root)) {
    if (!DATABASE_ID.test(databaseId)) continue
    const dir = join(root, databaseId)
    const names = await namesIn(dir)
    const present = new Set(names)
    const gone: Array<string> = []
    for (const name of names) {
      const id = name.endsWith(".json") ? name.slice(0, -5) : name
      if (!UPLOAD_ID.test(id) || (name !== id && present.has(id))) continue
      const partial = await readPartial(dir, id)
      const modified = partial?.createdAt ?? (await stat(join(dir, name)).then((s) => s.mtimeMs, () => 0))
      if (modified >= before) continue
      await rm(join(dir, id), { force: true })
      await rm(join(dir, `${id}.json`), { force: true })
      gone.push(id)
    }
    if (gone.length > 0) removed.set(databaseId, gone)
    // Only an empty folder no request is using goes, checked and removed in one synchronous step
    // (a request marks its folder in use before it makes it); one with files stays (ENOTEMPTY).
    if (!inUse(databaseId)) {
      try {
        rmdirSync(dir)
      } catch {
        // not empty, or already gone
      }
    }
  }
  return removed
}
