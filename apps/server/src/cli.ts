/**
 * `cairn` (`npm run cairn -- <command>`): the operator's command line, defined in `Commands.ts`.
 * `cairn token` is answered here without loading Effect or the server (`TokenCommand.ts`), so
 * minting takes a fraction of a second; `cairn token --help` goes through the full CLI.
 */
const args = process.argv.slice(2)

if (args[0] === "token" && !args.some((a) => a === "--help" || a === "-h" || a === "--wizard" || a === "--completions")) {
  const { runTokenCommand } = await import("./TokenCommand.js")
  runTokenCommand(args.slice(1), process.env)
} else {
  const { runCli } = await import("./Commands.js")
  runCli(process.argv)
}

export {}
