import type { ChildProcess } from "node:child_process"

/**
 * Collects a server process's stdout and stderr and resolves once it logs that it listens
 * (`Cairn listening on`); rejects with everything it printed if it exits first.
 */
export const whenListening = async (child: ChildProcess, name = "server"): Promise<{ readonly output: () => string }> => {
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes("Cairn listening on")) {
        clearInterval(timer)
        resolve()
      }
    }, 20)
    child.once("exit", (code) => {
      clearInterval(timer)
      reject(new Error(`${name} exited early (${code}):\n${output}`))
    })
  })
  return { output: () => output }
}
