/**
 * File steps backup and restore share: fsync of a file and of its directory (so a
 * rename survives power loss), sha256 of a file, and writes that appear whole or not at all.
 */
import { createHash, randomUUID } from "node:crypto"
import { closeSync, existsSync, fsyncSync, linkSync, openSync, readdirSync, readSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"

export const fsyncFile = (path: string): void => {
  const fd = openSync(path, "r+")
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

export const fsyncDirectory = (path: string): void => {
  const fd = openSync(path, "r")
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Hex sha256 of a file's bytes, read in chunks. */
export const sha256File = (path: string): string => {
  const hash = createHash("sha256")
  const fd = openSync(path, "r")
  try {
    const buffer = Buffer.allocUnsafe(1 << 20)
    for (;;) {
      const n = readSync(fd, buffer, 0, buffer.length, null)
      if (n === 0) break
      hash.update(buffer.subarray(0, n))
    }
  } finally {
    closeSync(fd)
  }
  return hash.digest("hex")
}

/** A temp name next to `path`, never matched as a backup or database file. */
export const tempNameFor = (path: string): string => join(dirname(path), `.tmp-${randomUUID()}`)

/**
 * A temp name next to `path` that names its owner (this process): a process killed mid-copy
 * leaves it behind, and `sweepStaleTemps` later knows it is nobody's.
 */
export const ownedTempNameFor = (path: string): string => join(dirname(path), `.tmp-${process.pid}-${randomUUID()}`)

const alive = (pid: number): boolean => {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Removes the temps of `directory` (from `ownedTempNameFor`, with any SQLite suffix) whose
 * process is gone: what a killed backup or restore left behind. Answers how many it removed;
 * another live process's temps are left alone.
 */
export const sweepStaleTemps = (directory: string): number => {
  if (!existsSync(directory)) return 0
  let removed = 0
  for (const name of readdirSync(directory)) {
    const owner = /^\.tmp-(\d+)-[0-9a-f-]{36}/.exec(name)
    if (owner === null || alive(Number(owner[1]))) continue
    rmSync(join(directory, name), { force: true })
    removed++
  }
  return removed
}

/** Renames `from` onto `to` durably: the file's bytes first, then the directory entry. */
export const publish = (from: string, to: string): void => {
  fsyncFile(from)
  renameSync(from, to)
  fsyncDirectory(dirname(to))
}

/** Writes `text` to `path` whole or not at all (temp file, fsync, rename, fsync of the directory). */
export const writeAtomically = (path: string, text: string): void => {
  const temp = tempNameFor(path)
  writeFileSync(temp, text)
  publish(temp, path)
}

/**
 * Creates `path` holding `text` unless it exists (a hard link fails then): whole or not at
 * all, and of two concurrent creators exactly one wins.
 */
export const createOnce = (path: string, text: string): void => {
  const temp = tempNameFor(path)
  writeFileSync(temp, text)
  try {
    fsyncFile(temp)
    linkSync(temp, path)
    fsyncDirectory(dirname(path))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
  } finally {
    rmSync(temp, { force: true })
  }
}
