#!/usr/bin/env node
// The npm registry reachable here serves only some platforms' builds of packages with
// native optional dependencies (rollup, msgpackr-extract). npm then writes a lockfile
// without the other platforms' entries, and `npm ci` rejects it as out of sync. This adds
// the missing optional entries, tagged with the os/cpu/libc their names state, so npm
// skips them on every other platform exactly as it would with a complete lockfile.
// Run it after any `npm install` that changes package-lock.json.
import { readFileSync, writeFileSync } from "node:fs"

const file = new URL("../package-lock.json", import.meta.url)
const lock = JSON.parse(readFileSync(file, "utf8"))
const osNames = ["darwin", "linux", "win32", "android", "freebsd", "openbsd", "openharmony", "sunos", "aix"]
const cpuNames = ["arm64", "arm", "x64", "ia32", "loong64", "ppc64", "riscv64", "s390x", "mips64el"]

const platformOf = (name) => {
  const parts = name.split("/").pop().split("-")
  const os = parts.find((p) => osNames.includes(p))
  const cpu = parts.find((p) => cpuNames.includes(p))
  if (!os || !cpu) return undefined
  const libc = os === "linux" ? (parts.some((p) => p.startsWith("musl")) ? "musl" : "glibc") : undefined
  return { os: [os], cpu: [cpu], ...(libc ? { libc: [libc] } : {}) }
}

let added = 0
for (const [path, entry] of Object.entries(lock.packages)) {
  for (const [dep, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const nested = `${path ? path + "/" : ""}node_modules/${dep}`
    if (lock.packages[nested] || lock.packages[`node_modules/${dep}`]) continue
    const platform = platformOf(dep)
    if (!platform || !/^\d+\.\d+\.\d+/.test(version)) continue
    lock.packages[`node_modules/${dep}`] = {
      version,
      ...platform,
      ...(entry.dev ? { dev: true } : {}),
      optional: true
    }
    added++
  }
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0)))
writeFileSync(file, JSON.stringify(lock, null, 2) + "\n")
console.log(`lockfile-platforms: added ${added} optional platform entries`)
