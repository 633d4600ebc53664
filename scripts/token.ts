/**
 * Prints a development access token for the server running on CAIRN_DATA_DIR and nothing else:
 *   npm run -s token -- --sub alice --org acme [--roles admin] [--scope "cairn:read"] [--resource db|mcp] [--ttl 3600] [--base <url>]
 * The same as `cairn token` (`apps/server/src/TokenCommand.ts`): the issuer, key and base URL
 * are the ones that server wrote to `<dataDir>/dev-issuer`; a disagreeing setting is refused.
 */
import { runTokenCommand } from "@cairn/server-app/TokenCommand"

runTokenCommand(process.argv.slice(2), process.env)
