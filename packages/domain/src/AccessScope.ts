/**
 * The OAuth scopes of Cairn's resources. Every way in (RPC, sync, MCP) asks the same
 * question of a verified token: reading needs `cairn:read`, invoking an operation needs
 * `cairn:write`. The engine checks them; transports only say how a refusal is worded.
 */
export type AccessScope = "cairn:read" | "cairn:write"

export const readScope: AccessScope = "cairn:read"
export const writeScope: AccessScope = "cairn:write"

/** Every scope, as published in protected-resource metadata and granted by development tokens. */
export const accessScopes: ReadonlyArray<AccessScope> = [readScope, writeScope]
